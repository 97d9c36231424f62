// Reference Lloyd's algorithm, written plainly (a distance loop per pair, an
// argmin, a mean per cluster) and independently of the transformer, so that
// the circuit can be checked against it iteration by iteration.
// Conventions: ties go to the lowest center index; an empty cluster keeps its
// previous center.
#ifndef KMT_REFERENCE_LLOYD_H_
#define KMT_REFERENCE_LLOYD_H_

#include <vector>

#include "core/types.h"

namespace kmt {

template <typename Scalar>
struct LloydIteration {
  Labels labels;           ///< nearest center before this iteration's update
  Matrix<Scalar> centers;  ///< d x k centers after the update
  double objective = 0;    ///< k-means objective of these centers
  int empty_clusters = 0;  ///< clusters that kept their center
};

// points: d x n, centers: d x k. One entry per iteration.
template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceLloyd(const Matrix<Scalar>& points,
                                                   const Matrix<Scalar>& centers, int iterations);

// sum_i min_j ||x_i - c_j||^2 by direct loops, accumulated in double.
template <typename Scalar>
double ReferenceObjective(const Matrix<Scalar>& points, const Matrix<Scalar>& centers);

// Each point's nearest center by direct loops, ties to the lowest index.
template <typename Scalar>
Labels ReferenceLabels(const Matrix<Scalar>& points, const Matrix<Scalar>& centers);

// ||a_i - b_j||^2 for columns i of a and j of b, one coordinate at a time.
template <typename Scalar>
Scalar ReferenceSquaredDistance(const Matrix<Scalar>& a, Eigen::Index i, const Matrix<Scalar>& b,
                                Eigen::Index j);

}  // namespace kmt

#endif  // KMT_REFERENCE_LLOYD_H_
