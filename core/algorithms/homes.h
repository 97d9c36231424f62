// The algorithms' homes, one file each in this folder (algorithm.h says what
// a home holds). Adding an algorithm is one more file here, its line in
// Algorithms() (core/algorithm.cc), and its tests.
#ifndef KMT_CORE_ALGORITHMS_HOMES_H_
#define KMT_CORE_ALGORITHMS_HOMES_H_

#include "core/algorithm.h"

namespace kmt {

const Algorithm& SoftmaxLloydAlgorithm();     // softmax_lloyd.cc (LloydAlgorithm: lloyd.cc)
const Algorithm& SoftKMeansAlgorithm();       // soft_kmeans.cc
const Algorithm& TrimmedKMeansAlgorithm();    // trimmed_kmeans.cc
const Algorithm& RobustKMeansAlgorithm();     // robust_kmeans.cc
const Algorithm& KMedoidsAlgorithm();         // kmedoids.cc
const Algorithm& SphericalKMeansAlgorithm();  // spherical_kmeans.cc

// A home whose center update is one template over the scalar type:
// `Derived::Update<Scalar>(context, points, weights, labels, centers)` serves
// both of Algorithm's overloads.
template <typename Derived>
class UpdateByTemplate : public Algorithm {
 public:
  int UpdateCenters(const UpdateContext& context, const Matrix<float>& points,
                    const Vector<float>* weights, const Labels& labels,
                    Matrix<float>* centers) const final {
    return Derived::template Update<float>(context, points, weights, labels, centers);
  }
  int UpdateCenters(const UpdateContext& context, const Matrix<double>& points,
                    const Vector<double>* weights, const Labels& labels,
                    Matrix<double>* centers) const final {
    return Derived::template Update<double>(context, points, weights, labels, centers);
  }

 protected:
  using Algorithm::Algorithm;
};

}  // namespace kmt

#endif  // KMT_CORE_ALGORITHMS_HOMES_H_
