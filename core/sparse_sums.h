// Cluster sums of sparse points as compressed sparse rows: center j's sum
// in row j, at the columns where a point labelled j has a nonzero. At a
// vocabulary's d a cluster's points touch a small part of the d
// coordinates, so the rows hold about the clusters' nonzeros rather than
// the k*d doubles of a ClusterSums (268 MB at k = 256, d = 2^17).
#ifndef KMT_CORE_SPARSE_SUMS_H_
#define KMT_CORE_SPARSE_SUMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/sparse.h"
#include "core/types.h"

namespace kmt {

struct CsrClusterSums {
  std::vector<int64_t> counts;  ///< k point counts
  std::vector<double> weights;  ///< k weight sums (the counts, for unweighted points)
  CsrMatrix<double> sums;       ///< k x d: each center's weighted coordinate sums
};

// The counts, weights and sums of `points` (n x d) under `labels` (n, each
// in [0, k)), each point times its weight (`weights`: n values, or null
// for 1 each), with the bits AssignNearestSparse's ClusterSums holds at
// the same places when its assignment is split in parts of `part_size`
// rows (AssignmentPartSize of n, d and k, or that of the gathered rows):
// each part's additions from zero in row order, the parts' added in order.
// A row's columns increase; a column whose additions cancel to 0 is kept.
// INVALID_ARGUMENT where a sum overflows to infinity (float64 points near
// the largest double), which a CsrMatrix cannot hold.
template <typename Scalar>
absl::StatusOr<CsrClusterSums> SparseClusterSums(const CsrMatrix<Scalar>& points,
                                                 const Labels& labels, int k,
                                                 const NonDeduced<Vector<Scalar>>* weights,
                                                 Eigen::Index part_size);

}  // namespace kmt

#endif  // KMT_CORE_SPARSE_SUMS_H_
