// The assignment step: each point's nearest center and the k-means objective.
// Distances come from ||x||^2 + ||c||^2 - 2<x, c> through one matrix product
// per block of points (as FAISS does), in parallel over blocks; a point whose
// best two candidates lie within the product's round-off bound is decided
// again on directly computed distances, so the labels equal a plain argmin
// with ties to the lowest index.
#ifndef KMT_CORE_ASSIGN_H_
#define KMT_CORE_ASSIGN_H_

#include "core/types.h"

namespace kmt {

// points: d x n, centers: d x k. Fills labels (n) and, if given, the squared
// distance of each point to its center (n).
template <typename Scalar>
void AssignNearest(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, Labels* labels,
                   Vector<Scalar>* sq_dist = nullptr);

// sum_i min_j ||x_i - c_j||^2, accumulated in double.
template <typename Scalar>
double Objective(const Matrix<Scalar>& points, const Matrix<Scalar>& centers);

}  // namespace kmt

#endif  // KMT_CORE_ASSIGN_H_
