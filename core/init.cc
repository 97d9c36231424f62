#include "core/init.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/input_scaling.h"
#include "core/random.h"
#include "core/seeding.h"
#include "core/transformer.h"
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

// The columns of `points` at `indices`, and their weights if `weights` is
// not null.
template <typename Scalar>
void Gather(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
            const std::vector<int64_t>& indices, Matrix<Scalar>* out, Vector<Scalar>* out_weights) {
  *out = Columns(points, indices);
  if (weights == nullptr) return;
  out_weights->resize(static_cast<Eigen::Index>(indices.size()));
  for (size_t j = 0; j < indices.size(); ++j) (*out_weights)(j) = (*weights)(indices[j]);
}

// A uniform sample of at most `most` of `candidates`, in their order.
std::vector<int64_t> Sample(const std::vector<int64_t>& candidates, int64_t most, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(candidates.size());
  if (n <= most) return candidates;
  std::vector<int64_t> picked =
      RandomSubsetIndices<float>(n, static_cast<int>(most), seed, nullptr);
  std::sort(picked.begin(), picked.end());
  for (int64_t& p : picked) p = candidates[p];
  return picked;
}

// Two-level's steps 1 and 3: kTwoLevelIterations Lloyd's iterations of k
// clusters from a random subset of `points`, empty clusters split.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> SampleLloyd(const Matrix<Scalar>& points,
                                           const Vector<Scalar>* weights, int k, uint64_t seed,
                                           const StopCheck& check) {
  absl::StatusOr<Matrix<Scalar>> start =
      ChooseInitialCenters(points, k, InitMethod::kRandomSubset, seed, check, weights);
  if (!start.ok()) return start.status();
  const RunOptions options{
      .layers = kTwoLevelIterations,
      .layer_objectives = false,
      .before_layer = [&check](int) { return check ? check() : absl::OkStatus(); },
      .empty_clusters = EmptyClusterPolicy::kSplitLargest};
  absl::StatusOr<RunResult<Scalar>> run =
      Evaluate<Scalar>({.k = k, .point_weights = weights}, points, points,
                       InputMap<Scalar>(InputScaling::kNone, points), *start, options);
  if (!run.ok()) return run.status();
  return std::move(run->centers);
}

// The two-level initialisation (init.h's three steps).
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> TwoLevel(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                                        int k, uint64_t seed, const StopCheck& check) {
  Rng rng(seed);
  const auto next_seed = [&rng] { return rng.Below(std::numeric_limits<uint64_t>::max()); };
  // The points that may be drawn: those of positive weight.
  std::vector<int64_t> drawable;
  drawable.reserve(points.cols());
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    if (weights == nullptr || (*weights)(i) > 0) drawable.push_back(i);
  }
  Matrix<Scalar> sample;
  Vector<Scalar> sample_weights;
  const Vector<Scalar>* sampled_weights = weights != nullptr ? &sample_weights : nullptr;

  // 1. The coarse centers, and every point's coarse cluster.
  const int coarse_k = TwoLevelCoarseCount(k);
  Gather(points, weights,
         Sample(drawable, int64_t{kTwoLevelPointsPerCenter} * coarse_k, next_seed()), &sample,
         &sample_weights);
  absl::StatusOr<Matrix<Scalar>> coarse =
      SampleLloyd(sample, sampled_weights, coarse_k, next_seed(), check);
  if (!coarse.ok()) return coarse.status();
  Labels labels;
  AssignNearest(points, *coarse, &labels);

  // 2. The fine counts.
  std::vector<std::vector<int64_t>> members(coarse_k);
  std::vector<double> sizes(coarse_k, 0.0);
  for (const int64_t i : drawable) {
    members[labels[i]].push_back(i);
    sizes[labels[i]] += weights != nullptr ? static_cast<double>((*weights)(i)) : 1.0;
  }
  std::vector<int64_t> capacities(coarse_k);
  for (int c = 0; c < coarse_k; ++c) capacities[c] = static_cast<int64_t>(members[c].size());
  const std::vector<int> counts = TwoLevelFineCounts(sizes, capacities, k);

  // 3. The fine centers.
  Matrix<Scalar> centers(points.rows(), k);
  Eigen::Index filled = 0;
  for (int c = 0; c < coarse_k; ++c) {
    // Drawn for every coarse cluster, so that each one's draws do not
    // depend on the others' counts.
    const uint64_t sample_seed = next_seed(), start_seed = next_seed();
    if (counts[c] == 0) continue;
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    Gather(points, weights,
           Sample(members[c], int64_t{kTwoLevelPointsPerCenter} * counts[c], sample_seed), &sample,
           &sample_weights);
    absl::StatusOr<Matrix<Scalar>> fine =
        SampleLloyd(sample, sampled_weights, counts[c], start_seed, check);
    if (!fine.ok()) return fine.status();
    centers.middleCols(filled, counts[c]) = *fine;
    filled += counts[c];
  }
  assert(filled == k);
  return centers;
}

}  // namespace

int TwoLevelCoarseCount(int k) {
  int r = static_cast<int>(std::sqrt(static_cast<double>(k)));
  while (int64_t{r + 1} * (r + 1) <= k) ++r;
  while (r > 1 && int64_t{r} * r > k) --r;
  return std::max(r, 1);
}

std::vector<int> TwoLevelFineCounts(const std::vector<double>& sizes,
                                    const std::vector<int64_t>& capacities, int k) {
  assert(sizes.size() == capacities.size());
  std::vector<int> counts(sizes.size(), 0);
  // (size / (count + 1), cluster): the next center goes to the top entry.
  using Entry = std::pair<double, int>;
  const auto after = [](const Entry& a, const Entry& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(after)> next(after);
  int dealt = 0;
  for (size_t c = 0; c < sizes.size(); ++c) {
    if (capacities[c] < 1) continue;
    counts[c] = 1;
    ++dealt;
    if (capacities[c] > 1) next.emplace(sizes[c] / 2, static_cast<int>(c));
  }
  assert(dealt <= k);
  while (dealt < k && !next.empty()) {
    const int c = next.top().second;
    next.pop();
    ++counts[c];
    ++dealt;
    if (counts[c] < capacities[c]) next.emplace(sizes[c] / (counts[c] + 1), c);
  }
  assert(dealt == k);
  return counts;
}

absl::string_view InitMethodName(InitMethod method) {
  switch (method) {
    case InitMethod::kRandomSubset:
      return "random";
    case InitMethod::kKMeansPlusPlus:
      return "kmeans++";
    case InitMethod::kPlainKMeansPlusPlus:
      return "plain-kmeans++";
    case InitMethod::kTwoLevel:
      return "two-level";
  }
  return "";  // Unreachable; keeps -Wreturn-type quiet.
}

absl::StatusOr<InitMethod> ParseInitMethod(absl::string_view name) {
  for (InitMethod m : {InitMethod::kRandomSubset, InitMethod::kKMeansPlusPlus,
                       InitMethod::kPlainKMeansPlusPlus, InitMethod::kTwoLevel}) {
    if (name == InitMethodName(m)) return m;
  }
  // scikit-learn's spelling.
  if (name == "k-means++") return InitMethod::kKMeansPlusPlus;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown initialisation '", name,
                   "', expected random, kmeans++ (or k-means++), plain-kmeans++ or two-level"));
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
    case InitMethod::kTwoLevel:
      return TwoLevel(points, weights, k, seed, check);
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
