#include "core/init.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/random.h"
#include "core/validation.h"

namespace kmt {
namespace {

template <typename Scalar>
Matrix<Scalar> RandomSubset(const Matrix<Scalar>& points, int k, Rng& rng) {
  std::vector<Eigen::Index> order(points.cols());
  std::iota(order.begin(), order.end(), 0);
  Matrix<Scalar> centers(points.rows(), k);
  for (int j = 0; j < k; ++j) {
    const auto pick = j + static_cast<Eigen::Index>(rng.Below(order.size() - j));
    std::swap(order[j], order[pick]);
    centers.col(j) = points.col(order[j]);
  }
  return centers;
}

template <typename Scalar>
Vector<double> SquaredDistancesTo(const Matrix<Scalar>& points,
                                  Eigen::Index center) {
  return (points.colwise() - points.col(center))
      .colwise()
      .squaredNorm()
      .transpose()
      .template cast<double>();
}

template <typename Scalar>
Matrix<Scalar> KMeansPlusPlus(const Matrix<Scalar>& points, int k, Rng& rng) {
  const Eigen::Index n = points.cols();
  const int trials = 2 + static_cast<int>(std::floor(std::log(k)));
  Matrix<Scalar> centers(points.rows(), k);
  Eigen::Index chosen = static_cast<Eigen::Index>(rng.Below(n));
  centers.col(0) = points.col(chosen);
  Vector<double> closest = SquaredDistancesTo(points, chosen);
  double potential = closest.sum();
  std::vector<double> cumulative(n);
  for (int j = 1; j < k; ++j) {
    std::partial_sum(closest.data(), closest.data() + n, cumulative.begin());
    double best_potential = std::numeric_limits<double>::infinity();
    Vector<double> best_closest;
    for (int t = 0; t < trials; ++t) {
      const double target = rng.Uniform() * potential;
      const Eigen::Index candidate = std::min<Eigen::Index>(
          std::lower_bound(cumulative.begin(), cumulative.end(), target) -
              cumulative.begin(),
          n - 1);
      Vector<double> with_candidate =
          closest.cwiseMin(SquaredDistancesTo(points, candidate));
      const double candidate_potential = with_candidate.sum();
      if (candidate_potential < best_potential) {
        best_potential = candidate_potential;
        best_closest = std::move(with_candidate);
        chosen = candidate;
      }
    }
    centers.col(j) = points.col(chosen);
    closest = std::move(best_closest);
    potential = best_potential;
  }
  return centers;
}

}  // namespace

absl::string_view InitMethodName(InitMethod method) {
  return method == InitMethod::kRandomSubset ? "random" : "kmeans++";
}

absl::StatusOr<InitMethod> ParseInitMethod(absl::string_view name) {
  for (InitMethod m : {InitMethod::kRandomSubset, InitMethod::kKMeansPlusPlus}) {
    if (name == InitMethodName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown initialisation '", name, "', expected random or kmeans++"));
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> InitialCenters(const Matrix<Scalar>& points,
                                              int k, InitMethod method,
                                              uint64_t seed) {
  if (absl::Status s = ValidatePoints(points); !s.ok()) return s;
  if (absl::Status s = ValidateClusterCount(points.cols(), k); !s.ok()) return s;
  Rng rng(seed);
  return method == InitMethod::kRandomSubset ? RandomSubset(points, k, rng)
                                             : KMeansPlusPlus(points, k, rng);
}

template absl::StatusOr<Matrix<float>> InitialCenters<float>(
    const Matrix<float>&, int, InitMethod, uint64_t);
template absl::StatusOr<Matrix<double>> InitialCenters<double>(
    const Matrix<double>&, int, InitMethod, uint64_t);

}  // namespace kmt
