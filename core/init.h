// Initial centers: a random subset of the points, greedy k-means++ (each new
// center is the best of 2 + floor(ln k) candidates drawn with probability
// proportional to the squared distance to the chosen centers, as
// scikit-learn does), plain k-means++ (each new center is one such draw,
// as Arthur and Vassilvitskii define it and the papers' authors run it), or
// two-level (FAISS's two_level_clustering, cuVS's hierarchical k-means):
// floor(sqrt(k)) coarse clusters, then each coarse cluster's points
// clustered into a share of the k centers in proportion to its size, which
// costs O(n sqrt(k) d) per iteration where k-means++ costs O(n k d) in all.
// All are deterministic for a given seed.
#ifndef KMT_CORE_INIT_H_
#define KMT_CORE_INIT_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

enum class InitMethod {
  kRandomSubset,         // "random": k distinct points, uniformly
  kKMeansPlusPlus,       // "kmeans++": greedy k-means++
  kPlainKMeansPlusPlus,  // "plain-kmeans++": one D^2 draw per center
  kTwoLevel,             // "two-level": coarse clusters, then fine ones in each
};

// Exact models start from it unless a request says otherwise; a learned
// model starts from the first initialisation it was trained for
// (Model::trained_inits).
inline constexpr InitMethod kDefaultInit = InitMethod::kKMeansPlusPlus;

absl::string_view InitMethodName(InitMethod method);
absl::StatusOr<InitMethod> ParseInitMethod(absl::string_view name);

// Called between steps of a long computation; a non-OK status (deadline,
// cancellation) stops it and is returned.
using StopCheck = std::function<absl::Status()>;

// The indices of the points "random" chooses among n for `seed`: k
// distinct ones uniformly (a partial Fisher-Yates shuffle), or with
// `weights` (n values, or null) one after another in proportion to their
// weights among those not drawn yet: the k largest keys u^(1/w)
// (Efraimidis and Spirakis; u uniform on (0, 1], one draw per point), ties
// to the lower index; points of weight 0 never (fewer than k of positive
// weight: fewer indices).
template <typename Weight>
std::vector<int64_t> RandomSubsetIndices(int64_t n, int k, uint64_t seed, const Weight* weights);

// Two-level initialisation, in three steps:
//  1. kTwoLevelIterations Lloyd's iterations of TwoLevelCoarseCount(k)
//     clusters, from a random subset, on a uniform sample of at most
//     kTwoLevelPointsPerCenter points per coarse cluster (of positive
//     weight), empty clusters split (FAISS's rule); then every point is
//     labelled with its nearest coarse center.
//  2. The fine counts: TwoLevelFineCounts of the coarse clusters' weights.
//  3. Each coarse cluster in turn: kTwoLevelIterations Lloyd's iterations of
//     its fine count of clusters, from a random subset, on a uniform sample
//     of at most kTwoLevelPointsPerCenter points per fine cluster of its own.
// The fine centers, coarse cluster by coarse cluster, are the k initial
// centers; they are means of points, not copies of points.
inline constexpr int kTwoLevelIterations = 10;
// FAISS's default max_points_per_centroid: more points per center move the
// initial centers little, and cost time in proportion.
inline constexpr int kTwoLevelPointsPerCenter = 256;

// floor(sqrt(k)), at least 1: the coarse clusters of two-level.
int TwoLevelCoarseCount(int k);

// Deals k centers among clusters of `sizes` (weights, >= 0) holding
// `capacities` points (of positive weight) each, by the D'Hondt rule: every
// cluster of positive capacity first gets one, then each further center
// goes to the cluster of the largest size / (count + 1) whose count is still
// below its capacity (ties to the lower index). Clusters of capacity 0 get
// none. The counts sum to k when the capacities sum to at least k and at
// most k clusters have a positive capacity (asserted).
std::vector<int> TwoLevelFineCounts(const std::vector<double>& sizes,
                                    const std::vector<int64_t>& capacities, int k);

// points: d x n; returns d x k centers, each a copy of a point (two-level's
// are means of points). Both
// k-means++ forms call `check` before each center after the first.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> InitialCenters(const Matrix<Scalar>& points, int k,
                                              InitMethod method, uint64_t seed,
                                              const StopCheck& check = {});

// The same without the input checks, for points and k already validated
// (the engine's batches), the points weighed by `weights` (n finite values
// >= 0, or null): k-means++ draws by w D^2 (its first center by w), and the
// random subset draws k distinct points with probability in proportion to
// their weights, as scikit-learn does, and two-level's Lloyd's iterations
// and fine counts weigh them; points of weight 0 are never chosen, and fewer
// than k of positive weight is an error.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ChooseInitialCenters(const Matrix<Scalar>& points, int k,
                                                    InitMethod method, uint64_t seed,
                                                    const StopCheck& check = {},
                                                    const Vector<Scalar>* weights = nullptr);

}  // namespace kmt

#endif  // KMT_CORE_INIT_H_
