// Reference Lloyd's algorithm, written plainly (a distance loop per pair, an
// argmin, a mean per cluster) and independently of the transformer, so that
// the circuit can be checked against it iteration by iteration.
// Conventions: ties go to the lowest center index; an empty cluster keeps its
// previous center.
#ifndef KMT_REFERENCE_LLOYD_H_
#define KMT_REFERENCE_LLOYD_H_

#include <vector>

#include "core/cluster_sums.h"
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

// The cluster sums of the points (d x n) under their labels, each point's
// coordinates times its weight (`weights`: n, or null for 1 each): every sum
// added in binary128 (a 113-bit significand) one term at a time, in point
// order, and rounded to double once. That is the exact sum rounded to
// nearest wherever a sum's terms and their count span at most 113 bits
// (a float weight times a float coordinate takes 48; the tests' data spreads
// over a few dozen more).
template <typename Scalar>
ClusterSums ReferenceRoundedSums(const Matrix<Scalar>& points, const Labels& labels, int k,
                                 const Vector<Scalar>* weights = nullptr);

}  // namespace kmt

#endif  // KMT_REFERENCE_LLOYD_H_
