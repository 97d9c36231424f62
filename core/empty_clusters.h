// What a center becomes when its cluster is empty after an assignment (no
// point, or only points of weight 0). Lloyd's as the circuits compute it
// keeps the center; scikit-learn relocates empty clusters to the points
// farthest from their centers; FAISS splits the largest cluster.
#ifndef KMT_CORE_EMPTY_CLUSTERS_H_
#define KMT_CORE_EMPTY_CLUSTERS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/cluster_sums.h"
#include "core/sparse.h"
#include "core/types.h"

namespace kmt {

enum class EmptyClusterPolicy {
  kKeep,              ///< the center keeps its value (the circuits' rule)
  kRelocateFarthest,  ///< scikit-learn's: the points farthest from their centers
  kSplitLargest,      ///< FAISS's: a perturbed copy of the heaviest cluster's center
};

absl::string_view EmptyClusterPolicyName(EmptyClusterPolicy policy);
absl::StatusOr<EmptyClusterPolicy> ParseEmptyClusterPolicy(absl::string_view name);

// Relocation, before the means: with m clusters of weight 0 in `sums`, the
// m points of positive weight farthest from the center they are labelled
// with (`centers`, the centers of this assignment; ties to the lower index)
// are taken, in decreasing distance, by the empty clusters in increasing
// index. Each moves from its cluster's sums into an empty one's, which then
// holds that point alone, as scikit-learn's _relocate_empty_clusters does.
// `weights`: n values or null (1 each). Fewer such points than empty
// clusters leave the rest empty. Returns the number of empty clusters it
// found; `moved`, if given, gets the number that took a point.
template <typename Scalar>
int RelocateEmptyClusters(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                          const Labels& labels, const Matrix<Scalar>& centers, ClusterSums* sums,
                          int64_t* moved = nullptr);

// The same for sparse points (n rows of d features): FarthestPoints' sparse
// form, so the same points moved, and the same sums to the bit.
template <typename Scalar>
int RelocateEmptyClusters(const CsrMatrix<Scalar>& points, const Vector<Scalar>* weights,
                          const Labels& labels, const Matrix<Scalar>& centers, ClusterSums* sums,
                          int64_t* moved = nullptr);

// The m points of positive weight (`weights`: n values, or null for 1
// each) farthest from the center they are labelled with, farthest first,
// ties to the lower index: relocation's candidates. `distances`, if given,
// gets their squared distances, as float of the points' type.
template <typename Scalar>
std::vector<int64_t> FarthestPoints(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                                    const Labels& labels, const Matrix<Scalar>& centers, int64_t m,
                                    std::vector<Scalar>* distances = nullptr);

// The same for sparse points (n rows of d features): the same points and
// distances, to the bit. Each point's distance is estimated from its
// nonzeros, O(nnz) in all, and only the points whose estimates reach the
// farthest m's (within the estimates' round-off bounds) are measured as
// the dense form measures every point (DirectSquaredDistance on the row
// made dense, O(d) each).
template <typename Scalar>
std::vector<int64_t> FarthestPoints(const CsrMatrix<Scalar>& points, const Vector<Scalar>* weights,
                                    const Labels& labels, const Matrix<Scalar>& centers, int64_t m,
                                    std::vector<Scalar>* distances = nullptr);

// Relocation's move of one point: `x` (its coordinates times its weight
// `w`) leaves cluster `from`, and cluster `to` holds it alone.
void MoveToEmptyCluster(const Vector<double>& x, double w, int from, int to, ClusterSums* sums);

// Splitting, after the means: each cluster of weight 0 in `sums`, in
// increasing index, takes the center of the heaviest cluster (ties to the
// lower index) scaled coordinate by coordinate by 1 + eps, -eps alternating
// (eps = 1/1024), the donor scaled the other way, and half its weight, as
// FAISS's split does (FAISS draws the donor at random in proportion to size;
// here it is the heaviest, so that a run does not depend on a draw).
template <typename Scalar>
void SplitLargestClusters(ClusterSums* sums, Matrix<Scalar>* centers);

}  // namespace kmt

#endif  // KMT_CORE_EMPTY_CLUSTERS_H_
