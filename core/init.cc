#include "core/init.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/random.h"
#include "core/seeding.h"
#include "core/validation.h"

namespace kmt {

template <typename Weight>
std::vector<int64_t> RandomSubsetIndices(int64_t n, int k, uint64_t seed, const Weight* weights) {
  Rng rng(seed);
  std::vector<int64_t> chosen;
  chosen.reserve(k);
  if (weights == nullptr) {
    // A partial Fisher-Yates shuffle of 0, ..., n - 1 that keeps only the
    // positions it swapped: k draws whatever n.
    absl::flat_hash_map<int64_t, int64_t> moved;
    const auto at = [&](int64_t i) {
      const auto it = moved.find(i);
      return it == moved.end() ? i : it->second;
    };
    for (int j = 0; j < k; ++j) {
      const int64_t pick = j + static_cast<int64_t>(rng.Below(n - j));
      const int64_t taken = at(pick);
      moved[pick] = at(j);
      chosen.push_back(taken);
    }
    return chosen;
  }
  std::vector<std::pair<double, int64_t>> keys;
  keys.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const double u = 1.0 - rng.Uniform();  // (0, 1]
    if (weights[i] > 0) keys.emplace_back(std::log(u) / static_cast<double>(weights[i]), i);
  }
  const size_t take = std::min<size_t>(k, keys.size());
  std::partial_sort(keys.begin(), keys.begin() + take, keys.end(),
                    [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  for (size_t j = 0; j < take; ++j) chosen.push_back(keys[j].second);
  return chosen;
}

template std::vector<int64_t> RandomSubsetIndices<float>(int64_t, int, uint64_t, const float*);
template std::vector<int64_t> RandomSubsetIndices<double>(int64_t, int, uint64_t, const double*);

namespace {

template <typename Scalar>
Matrix<Scalar> Columns(const Matrix<Scalar>& points, const std::vector<int64_t>& indices) {
  Matrix<Scalar> centers(points.rows(), static_cast<Eigen::Index>(indices.size()));
  for (size_t j = 0; j < indices.size(); ++j) centers.col(j) = points.col(indices[j]);
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
      return Columns(points,
                     RandomSubsetIndices<Scalar>(points.cols(), k, seed,
                                                 weights != nullptr ? weights->data() : nullptr));
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
