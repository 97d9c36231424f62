// Reference implementations of paper A's variants of Lloyd's algorithm
// (docs/variants.md), written plainly with a distance loop per pair and
// explicit sorts, so that the engine's circuits can be checked against them.
// Each iteration labels the points by their nearest current center (ties to
// the lowest index), then moves the centers by the variant's update step;
// an empty cluster keeps its previous center, as in ReferenceLloyd.
#ifndef KMT_REFERENCE_VARIANT_REFERENCE_H_
#define KMT_REFERENCE_VARIANT_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "core/types.h"
#include "reference/lloyd.h"

namespace kmt {

// points: d x n, centers: d x k. One entry per iteration, as ReferenceLloyd.

// r_ij = softmax over j of -beta ||x_i - c_j||^2; c_j <- sum_i r_ij x_i /
// sum_i r_ij. A center whose responsibilities all underflow to 0 keeps its
// value and counts as empty, whether or not points are labelled with it.
template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceSoftKMeans(const Matrix<Scalar>& points,
                                                        const Matrix<Scalar>& centers, double beta,
                                                        int iterations);

// Per cluster, its points sorted by -||x_i - c_j||^2 descending (ties: lower
// index first); c_j <- the mean of the first r, r maximising the mean of
// their scores minus tau / r (ties: the smallest r). tau >= 0.
template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceTrimmedKMeans(const Matrix<Scalar>& points,
                                                           const Matrix<Scalar>& centers,
                                                           double tau, int iterations);

// Per cluster, w = sparsemax of -beta ||x_i - c_j||^2 over its points;
// c_j <- sum_i w_i x_i. Points far from the center get weight exactly 0.
template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceRobustKMeans(const Matrix<Scalar>& points,
                                                          const Matrix<Scalar>& centers,
                                                          double beta, int iterations);

// Per cluster, its mean m_j; c_j <- a copy of the cluster's point x_i
// maximising -gamma ||x_i - m_j||^2 + CounterGumbel(seed, iteration, j, i),
// iterations counted from 0 and i the point's column. gamma = 0 stands for
// infinity: the point nearest m_j, ties to the lower index, no noise.
template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceKMedoids(const Matrix<Scalar>& points,
                                                      const Matrix<Scalar>& centers, double gamma,
                                                      uint64_t seed, int iterations);

// Points and initial centers are scaled to unit norm (none may be zero);
// c_j <- sum of its points / the norm of that sum, a zero sum keeping the
// center (and counting as empty). The objectives are those of the unit
// points.
template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceSphericalKMeans(const Matrix<Scalar>& points,
                                                             const Matrix<Scalar>& centers,
                                                             int iterations);

}  // namespace kmt

#endif  // KMT_REFERENCE_VARIANT_REFERENCE_H_
