// The update step of Lloyd's as sufficient statistics: per center, the count,
// the weight and the (weighted) coordinate sum of its points. Weight and sum
// are the denominator and numerator of theta3's average, and all three add
// up across batches of one dataset. Unweighted points weigh 1 each, so the
// weights then equal the counts exactly.
#ifndef KMT_CORE_CLUSTER_SUMS_H_
#define KMT_CORE_CLUSTER_SUMS_H_

#include <cstdint>
#include <vector>

#include "core/types.h"

namespace kmt {

struct ClusterSums {
  Matrix<double> sums;          ///< d x k coordinate sums, each point times its weight
  std::vector<int64_t> counts;  ///< k point counts
  std::vector<double> weights;  ///< k weight sums (the counts, for unweighted points)

  ClusterSums(int d, int k) : sums(Matrix<double>::Zero(d, k)), counts(k, 0), weights(k, 0) {}

  // Adds `other` (the same d and k) to these.
  void Add(const ClusterSums& other);
};

// The points AccumulateClusterSums sums in one chunk.
inline constexpr Eigen::Index kClusterSumsChunk = 16384;

// Adds the points (d x n) under their labels to `into`, each with its weight
// (`weights`: n values, or null for 1 each). Summed in fixed chunks
// (kClusterSumsChunk points) merged in order, so the result does not depend
// on the thread count.
// (AssignNearest adds them in the assignment's own pass when asked.)
template <typename Scalar>
void AccumulateClusterSums(const Matrix<Scalar>& points, const Labels& labels, ClusterSums* into,
                           const Vector<Scalar>* weights = nullptr);

// Replaces each center whose points weigh more than 0 by their weighted
// mean; a center with none (or only points of weight 0) keeps its value.
// Returns the number of such empty clusters.
template <typename Scalar>
int ApplyMeans(const ClusterSums& sums, Matrix<Scalar>* centers);

}  // namespace kmt

#endif  // KMT_CORE_CLUSTER_SUMS_H_
