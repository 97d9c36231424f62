#include "core/algorithm.h"

#include "absl/strings/str_cat.h"
#include "core/algorithms/homes.h"

namespace kmt {
namespace {

template <typename Scalar>
int MeansOfLabels(const Algorithm& algorithm, const Matrix<Scalar>& points,
                  const Vector<Scalar>* weights, const Labels& labels, Matrix<Scalar>* centers) {
  ClusterSums sums(static_cast<int>(points.rows()), static_cast<int>(centers->cols()));
  AccumulateClusterSums(points, labels, &sums, weights);
  return algorithm.CentersFromSums(sums, centers);
}

absl::Status NoDenseCircuit(const Algorithm& algorithm) {
  return absl::FailedPreconditionError(
      absl::StrCat(algorithm.name(), " runs the fast path only: it has no dense circuit"));
}

}  // namespace

absl::Status Algorithm::Prepare(Matrix<float>*, const char*) const { return absl::OkStatus(); }
absl::Status Algorithm::Prepare(Matrix<double>*, const char*) const { return absl::OkStatus(); }

int Algorithm::CentersFromSums(const ClusterSums& sums, Matrix<float>* centers) const {
  return ApplyMeans(sums, centers);
}
int Algorithm::CentersFromSums(const ClusterSums& sums, Matrix<double>* centers) const {
  return ApplyMeans(sums, centers);
}

int Algorithm::UpdateCenters(const UpdateContext&, const Matrix<float>& points,
                             const Vector<float>* weights, const Labels& labels,
                             Matrix<float>* centers) const {
  return MeansOfLabels(*this, points, weights, labels, centers);
}
int Algorithm::UpdateCenters(const UpdateContext&, const Matrix<double>& points,
                             const Vector<double>* weights, const Labels& labels,
                             Matrix<double>* centers) const {
  return MeansOfLabels(*this, points, weights, labels, centers);
}

bool Algorithm::RunsDense(const ParameterValues&) const { return false; }
absl::Status Algorithm::DenseCircuit(int, int, const LloydOptions&, const ParameterValues&,
                                     Model<float>*) const {
  return NoDenseCircuit(*this);
}
absl::Status Algorithm::DenseCircuit(int, int, const LloydOptions&, const ParameterValues&,
                                     Model<double>*) const {
  return NoDenseCircuit(*this);
}

const std::vector<const Algorithm*>& Algorithms() {
  static const std::vector<const Algorithm*> algorithms = {
      &LloydAlgorithm(),          &SoftmaxLloydAlgorithm(), &SoftKMeansAlgorithm(),
      &TrimmedKMeansAlgorithm(),  &RobustKMeansAlgorithm(), &KMedoidsAlgorithm(),
      &SphericalKMeansAlgorithm()};
  return algorithms;
}

const Algorithm* FindAlgorithm(absl::string_view name) {
  for (const Algorithm* algorithm : Algorithms()) {
    if (algorithm->name() == name) return algorithm;
  }
  return nullptr;
}

}  // namespace kmt
