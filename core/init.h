// Initial centers: a random subset of the points, greedy k-means++ (each new
// center is the best of 2 + floor(ln k) candidates drawn with probability
// proportional to the squared distance to the chosen centers, as
// scikit-learn does), or plain k-means++ (each new center is one such draw,
// as Arthur and Vassilvitskii define it and the papers' authors run it). All
// are deterministic for a given seed.
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

// points: d x n; returns d x k centers, each a copy of a point. Both
// k-means++ forms call `check` before each center after the first.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> InitialCenters(const Matrix<Scalar>& points, int k,
                                              InitMethod method, uint64_t seed,
                                              const StopCheck& check = {});

// The same without the input checks, for points and k already validated
// (the engine's batches), the points weighed by `weights` (n finite values
// >= 0, or null): k-means++ draws by w D^2 (its first center by w), and the
// random subset draws k distinct points with probability in proportion to
// their weights, as scikit-learn does; points of weight 0 are never chosen,
// and fewer than k of positive weight is an error.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ChooseInitialCenters(const Matrix<Scalar>& points, int k,
                                                    InitMethod method, uint64_t seed,
                                                    const StopCheck& check = {},
                                                    const Vector<Scalar>* weights = nullptr);

}  // namespace kmt

#endif  // KMT_CORE_INIT_H_
