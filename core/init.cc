#include "core/init.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/distances.h"
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

// Squared distances of every point to each of the candidates (n x c).
template <typename Scalar>
Matrix<double> SquaredDistancesTo(const Matrix<Scalar>& points, const Vector<Scalar>& point_sq,
                                  const std::vector<Eigen::Index>& candidates) {
  Matrix<Scalar> c(points.rows(), candidates.size());
  Vector<Scalar> c_sq(candidates.size());
  for (size_t t = 0; t < candidates.size(); ++t) {
    c.col(t) = points.col(candidates[t]);
    c_sq[t] = point_sq[candidates[t]];
  }
  Matrix<Scalar> dist;
  SquaredDistances<Scalar>(points, point_sq, c, c_sq, &dist);
  return dist.template cast<double>();
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> KMeansPlusPlus(const Matrix<Scalar>& points, int k, Rng& rng,
                                              const StopCheck& check) {
  const Eigen::Index n = points.cols();
  const int trials = 2 + static_cast<int>(std::floor(std::log(k)));
  const Vector<Scalar> point_sq = SquaredNorms<Scalar>(points);
  Matrix<Scalar> centers(points.rows(), k);
  Eigen::Index chosen = static_cast<Eigen::Index>(rng.Below(n));
  centers.col(0) = points.col(chosen);
  Vector<double> closest = SquaredDistancesTo(points, point_sq, {chosen}).col(0);
  double potential = closest.sum();
  std::vector<double> cumulative(n);
  std::vector<Eigen::Index> candidates(trials);
  for (int j = 1; j < k; ++j) {
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    std::partial_sum(closest.data(), closest.data() + n, cumulative.begin());
    for (int t = 0; t < trials; ++t) {
      const double target = rng.Uniform() * potential;
      candidates[t] = std::min<Eigen::Index>(
          std::lower_bound(cumulative.begin(), cumulative.end(), target) - cumulative.begin(),
          n - 1);
    }
    const Matrix<double> dist = SquaredDistancesTo(points, point_sq, candidates);
    double best_potential = std::numeric_limits<double>::infinity();
    int best = 0;
    for (int t = 0; t < trials; ++t) {
      const double candidate_potential = closest.cwiseMin(dist.col(t)).sum();
      if (candidate_potential < best_potential) {
        best_potential = candidate_potential;
        best = t;
      }
    }
    chosen = candidates[best];
    centers.col(j) = points.col(chosen);
    closest = closest.cwiseMin(dist.col(best));
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
  return absl::InvalidArgumentError(
      absl::StrCat("unknown initialisation '", name, "', expected random or kmeans++"));
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> InitialCenters(const Matrix<Scalar>& points, int k,
                                              InitMethod method, uint64_t seed,
                                              const StopCheck& check) {
  if (absl::Status s = ValidatePoints(points); !s.ok()) return s;
  if (absl::Status s = ValidateClusterCount(points.cols(), k); !s.ok()) return s;
  return ChooseInitialCenters(points, k, method, seed, check);
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ChooseInitialCenters(const Matrix<Scalar>& points, int k,
                                                    InitMethod method, uint64_t seed,
                                                    const StopCheck& check) {
  Rng rng(seed);
  if (method == InitMethod::kRandomSubset) return RandomSubset(points, k, rng);
  return KMeansPlusPlus(points, k, rng, check);
}

template absl::StatusOr<Matrix<float>> ChooseInitialCenters<float>(const Matrix<float>&, int,
                                                                   InitMethod, uint64_t,
                                                                   const StopCheck&);
template absl::StatusOr<Matrix<double>> ChooseInitialCenters<double>(const Matrix<double>&, int,
                                                                     InitMethod, uint64_t,
                                                                     const StopCheck&);
template absl::StatusOr<Matrix<float>> InitialCenters<float>(const Matrix<float>&, int, InitMethod,
                                                             uint64_t, const StopCheck&);
template absl::StatusOr<Matrix<double>> InitialCenters<double>(const Matrix<double>&, int,
                                                               InitMethod, uint64_t,
                                                               const StopCheck&);

}  // namespace kmt
