// The update step of Lloyd's as sufficient statistics: per center, the count
// and coordinate sum of its points. They are the denominator and numerator of
// theta3's average, and add up across batches of one dataset.
#ifndef KMT_CORE_CLUSTER_SUMS_H_
#define KMT_CORE_CLUSTER_SUMS_H_

#include <cstdint>
#include <vector>

#include "core/types.h"

namespace kmt {

struct ClusterSums {
  Matrix<double> sums;          ///< d x k coordinate sums
  std::vector<int64_t> counts;  ///< k point counts

  ClusterSums(int d, int k) : sums(Matrix<double>::Zero(d, k)), counts(k, 0) {}
};

// Adds the points (d x n) under their labels to `into`. Summed in fixed
// chunks merged in order, so the result does not depend on the thread count.
// (AssignNearest adds them in the assignment's own pass when asked.)
template <typename Scalar>
void AccumulateClusterSums(const Matrix<Scalar>& points, const Labels& labels, ClusterSums* into);

// Replaces each center that has points by their mean; a center with none
// keeps its value. Returns the number of such empty clusters.
template <typename Scalar>
int ApplyMeans(const ClusterSums& sums, Matrix<Scalar>* centers);

}  // namespace kmt

#endif  // KMT_CORE_CLUSTER_SUMS_H_
