#include "core/init.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/random.h"
#include "core/seeding.h"
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

// k distinct points drawn one after another with probability in proportion
// to their weights among those not drawn yet: the k largest keys u^(1/w)
// (Efraimidis and Spirakis), u uniform on (0, 1], ties to the lower index.
template <typename Scalar>
Matrix<Scalar> WeightedRandomSubset(const Matrix<Scalar>& points, const Vector<Scalar>& weights,
                                    int k, Rng& rng) {
  std::vector<std::pair<double, Eigen::Index>> keys;
  keys.reserve(points.cols());
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    const double u = 1.0 - rng.Uniform();  // (0, 1]
    if (weights[i] > 0) keys.emplace_back(std::log(u) / static_cast<double>(weights[i]), i);
  }
  std::partial_sort(keys.begin(), keys.begin() + k, keys.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  Matrix<Scalar> centers(points.rows(), k);
  for (int j = 0; j < k; ++j) centers.col(j) = points.col(keys[j].second);
  return centers;
}

// k-means++ on one matrix: the sharded driver over a single shard.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> KMeansPlusPlus(const Matrix<Scalar>& points,
                                              const Vector<Scalar>* weights, int k, uint64_t seed,
                                              int candidates, const StopCheck& check) {
  SeedingShard<Scalar> shard(&points, weights);
  return ShardedKMeansPlusPlus<Scalar>(
      {points.cols()}, static_cast<int>(points.rows()), k, seed, candidates,
      [&](const std::vector<SeedRequest<Scalar>>& requests)
          -> absl::StatusOr<std::vector<SeedAnswer<Scalar>>> {
        absl::StatusOr<SeedAnswer<Scalar>> answer = shard.Step(requests[0]);
        if (!answer.ok()) return answer.status();
        return std::vector<SeedAnswer<Scalar>>{*std::move(answer)};
      },
      check, weights != nullptr);
}

}  // namespace

absl::string_view InitMethodName(InitMethod method) {
  switch (method) {
    case InitMethod::kRandomSubset:
      return "random";
    case InitMethod::kKMeansPlusPlus:
      return "kmeans++";
    case InitMethod::kPlainKMeansPlusPlus:
      return "plain-kmeans++";
  }
  return "";  // Unreachable; keeps -Wreturn-type quiet.
}

absl::StatusOr<InitMethod> ParseInitMethod(absl::string_view name) {
  for (InitMethod m :
       {InitMethod::kRandomSubset, InitMethod::kKMeansPlusPlus, InitMethod::kPlainKMeansPlusPlus}) {
    if (name == InitMethodName(m)) return m;
  }
  // scikit-learn's spelling.
  if (name == "k-means++") return InitMethod::kKMeansPlusPlus;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown initialisation '", name,
                   "', expected random, kmeans++ (or k-means++) or plain-kmeans++"));
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
                                                    const StopCheck& check,
                                                    const Vector<Scalar>* weights) {
  if (weights != nullptr) {
    const Eigen::Index positive = (weights->array() > 0).count();
    if (positive < k) {
      return absl::InvalidArgumentError(
          absl::StrCat("only ", positive, " points have a positive weight, fewer than k = ", k));
    }
  }
  switch (method) {
    case InitMethod::kRandomSubset: {
      Rng rng(seed);
      return weights != nullptr ? WeightedRandomSubset(points, *weights, k, rng)
                                : RandomSubset(points, k, rng);
    }
    case InitMethod::kKMeansPlusPlus:
      return KMeansPlusPlus(points, weights, k, seed, GreedySeedingCandidates(k), check);
    case InitMethod::kPlainKMeansPlusPlus:
      return KMeansPlusPlus(points, weights, k, seed, 1, check);
  }
  return absl::InvalidArgumentError("unknown initialisation");  // Unreachable.
}

template absl::StatusOr<Matrix<float>> ChooseInitialCenters<float>(const Matrix<float>&, int,
                                                                   InitMethod, uint64_t,
                                                                   const StopCheck&,
                                                                   const Vector<float>*);
template absl::StatusOr<Matrix<double>> ChooseInitialCenters<double>(const Matrix<double>&, int,
                                                                     InitMethod, uint64_t,
                                                                     const StopCheck&,
                                                                     const Vector<double>*);
template absl::StatusOr<Matrix<float>> InitialCenters<float>(const Matrix<float>&, int, InitMethod,
                                                             uint64_t, const StopCheck&);
template absl::StatusOr<Matrix<double>> InitialCenters<double>(const Matrix<double>&, int,
                                                               InitMethod, uint64_t,
                                                               const StopCheck&);

}  // namespace kmt
