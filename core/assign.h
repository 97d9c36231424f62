// The assignment step: each point's nearest center and the k-means objective.
// Distances come from ||x||^2 + ||c||^2 - 2<x, c> through one matrix product
// per block of points (as FAISS does), in parallel over parts of the points;
// a point whose best two candidates lie within the product's round-off bound
// is decided again on directly computed distances, so the labels equal a
// plain argmin with ties to the lowest index. The same pass can add the
// points' counts and sums under their labels (Lloyd's update), while each
// block is still in cache.
#ifndef KMT_CORE_ASSIGN_H_
#define KMT_CORE_ASSIGN_H_

#include "core/cluster_sums.h"
#include "core/types.h"

namespace kmt {

// points: d x n, centers: d x k. Fills labels (n), if given the squared
// distance of each point to its center (n), and if given adds the counts,
// weights and weighted coordinate sums of the points under their labels to
// `sums`. `weights` (n, or null for 1 each) weigh the points. Returns the
// objective sum_i w_i min_j ||x_i - c_j||^2, accumulated in double.
// Objective and sums are added in fixed parts of the points merged in order,
// so they do not depend on the thread count.
template <typename Scalar>
double AssignNearest(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, Labels* labels,
                     NonDeduced<Vector<Scalar>>* sq_dist = nullptr, ClusterSums* sums = nullptr,
                     const NonDeduced<Vector<Scalar>>* weights = nullptr);

// sum_i min_j ||x_i - c_j||^2, accumulated in double.
template <typename Scalar>
double Objective(const Matrix<Scalar>& points, const Matrix<Scalar>& centers);

}  // namespace kmt

#endif  // KMT_CORE_ASSIGN_H_
