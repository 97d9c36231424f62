#include "core/seeding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/distances.h"
#include "core/random.h"
#include "core/validation.h"

namespace kmt {
namespace {

// Points per block of distances: the block's distances to a few candidates
// stay small, so the state of a shard is its points and three numbers each.
constexpr Eigen::Index kBlock = 16384;

// Calls visit(first, dist) for every block of points, dist (rows x c) the
// squared distances of points first.. to each column of `c`.
template <typename Scalar, typename Visit>
void ForEachBlock(const Matrix<Scalar>& points, const Vector<Scalar>& point_sq,
                  const Matrix<Scalar>& c, Visit&& visit) {
  const Vector<Scalar> c_sq = SquaredNorms<Scalar>(c);
  Matrix<Scalar> dist;
  for (Eigen::Index first = 0; first < points.cols(); first += kBlock) {
    const Eigen::Index rows = std::min(kBlock, points.cols() - first);
    SquaredDistances<Scalar>(points.middleCols(first, rows), point_sq.segment(first, rows), c, c_sq,
                             &dist);
    visit(first, dist);
  }
}

}  // namespace

template <typename Scalar>
Eigen::Index SeedingShard<Scalar>::Find(double target) {
  const Eigen::Index n = points_.cols();
  if (!cumulative_current_) {
    cumulative_.resize(n);
    std::partial_sum(closest_.data(), closest_.data() + n, cumulative_.begin());
    cumulative_current_ = true;
  }
  Eigen::Index i =
      std::upper_bound(cumulative_.begin(), cumulative_.end(), target) - cumulative_.begin();
  if (i < n) return i;
  // Past the end by round-off: the last point with a positive distance.
  i = n - 1;
  while (i > 0 && closest_[i] == 0) --i;
  return i;
}

template <typename Scalar>
void SeedingShard<Scalar>::Take(const Eigen::Ref<const Matrix<Scalar>>& center) {
  const Eigen::Index d = points_.rows();
  const Matrix<Scalar> c = center;
  const Scalar c_sq = c.squaredNorm();
  // The shard's first center replaces the weights a weighted shard started
  // from.
  const bool replace = !seeded_ && weights_ != nullptr;
  ForEachBlock<Scalar>(points_, point_sq_, c, [&](Eigen::Index first, const auto& dist) {
    for (Eigen::Index i = 0; i < dist.rows(); ++i) {
      // The product form can leave a copy of the center a small positive
      // distance; near-zero distances are decided exactly, so a point equal
      // to a chosen center weighs 0 and is never drawn.
      Scalar sq = dist(i, 0);
      if (sq <= SquaredDistanceRoundOff<Scalar>(d, point_sq_[first + i], c_sq)) {
        sq = DirectSquaredDistance(points_.col(first + i).data(), c.data(), d);
      }
      // Weighted: w times the squared distance.
      const double distance = weights_ == nullptr ? static_cast<double>(sq)
                                                  : static_cast<double>((*weights_)[first + i]) *
                                                        static_cast<double>(sq);
      if (replace || distance < closest_[first + i]) closest_[first + i] = distance;
    }
  });
  cumulative_current_ = false;
  seeded_ = true;
}

template <typename Scalar>
void SeedingShard<Scalar>::TakeNearest(const Matrix<Scalar>& centers) {
  // The assignment's own scan (AssignNearest's blocks, products and exact
  // near ties), so that a center taken in costs what a center of Lloyd's
  // assignment does: each point's nearest of the group and its squared
  // distance, computed on the point's own column (AssignedSquaredDistance),
  // so a copy of a center lies at 0 and the result does not depend on the
  // block or thread a point falls in. Then the running minimum, ties to the
  // center taken first.
  const NearestCenterScan<Scalar> scan(centers);
  const Eigen::Index n = points_.cols(), block = scan.block();
  const bool replace = !seeded_ && weights_ != nullptr;
  const int64_t first_label = taken_;
#pragma omp parallel if (n * centers.cols() * points_.rows() > (1 << 18))
  {
    typename NearestCenterScan<Scalar>::Scratch scratch;
    std::vector<int> labels(block);
    std::vector<Scalar> sq(block);
#pragma omp for schedule(dynamic)
    for (Eigen::Index first = 0; first < n; first += block) {
      const Eigen::Index rows = std::min(block, n - first);
      scan.Scan(points_.middleCols(first, rows), &scratch, labels.data(), sq.data());
      for (Eigen::Index i = 0; i < rows; ++i) {
        // Weighted: w times the squared distance.
        const double distance = weights_ == nullptr ? static_cast<double>(sq[i])
                                                    : static_cast<double>((*weights_)[first + i]) *
                                                          static_cast<double>(sq[i]);
        if (replace || distance < closest_[first + i]) {
          closest_[first + i] = distance;
          nearest_[first + i] = static_cast<int32_t>(first_label + labels[i]);
        }
      }
    }
  }
  cumulative_current_ = false;
  seeded_ = true;
}

template <typename Scalar>
absl::StatusOr<double> SeedingShard<Scalar>::AddCenters(const Matrix<Scalar>& centers) {
  if (centers.cols() > 0) {
    if (absl::Status s = ValidateCenterValues(centers, points_.rows()); !s.ok()) return s;
    if (nearest_.empty()) {
      nearest_.assign(points_.cols(), -1);
      // The draws' running sums are rebuilt if a seed step draws again: in
      // their room the shard keeps the nearest centers.
      cumulative_ = {};
    }
    TakeNearest(centers);
    taken_ += centers.cols();
  }
  return closest_.sum();
}

template <typename Scalar>
std::vector<double> SeedingShard<Scalar>::TakenCenterWeights() const {
  std::vector<double> out(taken_, 0.0);
  for (size_t i = 0; i < nearest_.size(); ++i) {
    if (nearest_[i] < 0) continue;
    out[nearest_[i]] += weights_ != nullptr ? static_cast<double>((*weights_)[i]) : 1.0;
  }
  return out;
}

template <typename Scalar>
absl::StatusOr<std::vector<int64_t>> SeedingShard<Scalar>::Oversample(double oversampling,
                                                                      double potential,
                                                                      uint64_t seed, int64_t round,
                                                                      int64_t first_point) const {
  if (!std::isfinite(oversampling) || oversampling <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("oversampling ", oversampling, " is not in (0, inf)"));
  }
  if (!std::isfinite(potential) || potential < 0) {
    return absl::InvalidArgumentError(absl::StrCat("potential ", potential, " is not in [0, inf)"));
  }
  if (round < 0 || first_point < 0) {
    return absl::InvalidArgumentError(absl::StrCat("round ", round, " and first point ",
                                                   first_point, ": neither may be negative"));
  }
  if (!seeded_) {
    return absl::FailedPreconditionError("sampling needs a center added to the distances first");
  }
  std::vector<int64_t> taken;
  if (potential == 0) return taken;  // every point is a copy of a center
  for (Eigen::Index i = 0; i < closest_.size(); ++i) {
    if (closest_[i] <= 0) continue;
    const double p = oversampling * closest_[i] / potential;
    if (p >= 1 || CounterUniform(seed, static_cast<uint64_t>(round), 0,
                                 static_cast<uint64_t>(first_point + i)) < p) {
      taken.push_back(i);
    }
  }
  return taken;
}

template <typename Scalar>
std::vector<double> NearestCandidateWeights(const Matrix<Scalar>& points,
                                            const Vector<Scalar>* weights,
                                            const Matrix<Scalar>& candidates) {
  Labels labels;
  AssignNearest(points, candidates, &labels);
  std::vector<double> out(candidates.cols(), 0.0);
  for (size_t i = 0; i < labels.size(); ++i) {
    out[labels[i]] += weights != nullptr ? static_cast<double>((*weights)[i]) : 1.0;
  }
  return out;
}

template <typename Scalar>
absl::StatusOr<SeedAnswer<Scalar>> SeedingShard<Scalar>::Step(const SeedRequest<Scalar>& r) {
  const Eigen::Index d = points_.rows(), n = points_.cols();
  for (const Matrix<Scalar>* m : {&r.add, &r.candidates}) {
    if (m->cols() == 0) continue;
    if (absl::Status s = ValidateCenterValues(*m, d); !s.ok()) return s;
  }
  for (int64_t i : r.indices) {
    if (i < 0 || i >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("point index ", i, " is outside the shard's ", n, " points"));
    }
  }
  for (double t : r.targets) {
    if (!std::isfinite(t) || t < 0) {
      return absl::InvalidArgumentError(absl::StrCat("draw target ", t, " is not in [0, inf)"));
    }
  }
  // Before any center, a weighted shard draws by weight (the first center);
  // an unweighted one has no distances to draw by.
  if (((!r.targets.empty() && weights_ == nullptr) || r.candidates.cols() > 0) && !seeded_ &&
      r.add.cols() == 0) {
    return absl::FailedPreconditionError(
        "draws and candidates need a center added to the distances first");
  }
  if (!r.targets.empty() && n == 0) {
    return absl::InvalidArgumentError("draw targets for a shard without points");
  }

  SeedAnswer<Scalar> answer;
  // One center at a time, so that a shard that takes several at once (a
  // replica taking over a shard) gets the same distances to the bit.
  for (Eigen::Index c = 0; c < r.add.cols(); ++c) Take(r.add.col(c));
  answer.potential = closest_.sum();
  answer.points.resize(d, static_cast<Eigen::Index>(r.indices.size() + r.targets.size()));
  Eigen::Index out = 0;
  for (int64_t i : r.indices) answer.points.col(out++) = points_.col(i);
  for (double t : r.targets) answer.points.col(out++) = points_.col(Find(t));
  if (r.candidates.cols() > 0) {
    answer.candidate_potentials.assign(r.candidates.cols(), 0.0);
    ForEachBlock<Scalar>(
        points_, point_sq_, r.candidates, [&](Eigen::Index first, const auto& dist) {
          const auto closest = closest_.segment(first, dist.rows());
          for (Eigen::Index c = 0; c < dist.cols(); ++c) {
            if (weights_ == nullptr) {
              answer.candidate_potentials[c] +=
                  closest.cwiseMin(dist.col(c).template cast<double>()).sum();
            } else {
              answer.candidate_potentials[c] +=
                  closest
                      .cwiseMin(weights_->segment(first, dist.rows())
                                    .template cast<double>()
                                    .cwiseProduct(dist.col(c).template cast<double>()))
                      .sum();
            }
          }
        });
  }
  return answer;
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ShardedKMeansPlusPlus(const std::vector<int64_t>& shard_sizes, int d,
                                                     int k, uint64_t seed, int trials,
                                                     const SeedRound<Scalar>& round,
                                                     const StopCheck& check, bool weighted) {
  const size_t shards = shard_sizes.size();
  const int64_t n = std::accumulate(shard_sizes.begin(), shard_sizes.end(), int64_t{0});
  if (k < 1 || n < k) {
    return absl::InvalidArgumentError(absl::StrCat("k = ", k, " needs 1 <= k <= n = ", n));
  }
  if (trials < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(trials, " k-means++ candidates per center, expected at least 1"));
  }
  Rng rng(seed);
  std::vector<SeedRequest<Scalar>> requests(shards);
  const auto run = [&]() -> absl::StatusOr<std::vector<SeedAnswer<Scalar>>> {
    absl::StatusOr<std::vector<SeedAnswer<Scalar>>> answers = round(requests);
    if (answers.ok() && answers->size() != shards) {
      return absl::InternalError(
          absl::StrCat(answers->size(), " seeding answers for ", shards, " shards"));
    }
    requests.assign(shards, SeedRequest<Scalar>{});
    return answers;
  };

  // A draw by the shards' potentials: a position in the running sum over
  // the shards in order, then the point within the shard that holds it.
  std::vector<double> shard_potential(shards);
  const auto draw = [&](double target) -> std::pair<size_t, size_t> {
    size_t s = 0;
    while (s + 1 < shards && (shard_sizes[s] == 0 || target >= shard_potential[s])) {
      target -= shard_potential[s++];
    }
    while (shard_sizes[s] == 0) --s;  // past the end by round-off: the last point
    const double local = std::clamp(target, 0.0, shard_potential[s]);
    const std::pair<size_t, size_t> at = {s,
                                          requests[s].indices.size() + requests[s].targets.size()};
    requests[s].targets.push_back(local);
    return at;
  };

  // The first center: a point drawn uniformly, or by weight.
  Matrix<Scalar> centers(d, k);
  if (weighted) {
    absl::StatusOr<std::vector<SeedAnswer<Scalar>>> answers = run();  // the weights' sums
    if (!answers.ok()) return answers.status();
    for (size_t s = 0; s < shards; ++s) shard_potential[s] = (*answers)[s].potential;
    const double total = std::accumulate(shard_potential.begin(), shard_potential.end(), 0.0);
    const auto [s, column] = draw(rng.Uniform() * total);
    answers = run();
    if (!answers.ok()) return answers.status();
    centers.col(0) = (*answers)[s].points.col(column);
  } else {
    int64_t first = static_cast<int64_t>(rng.Below(n));
    size_t s = 0;
    while (first >= shard_sizes[s]) first -= shard_sizes[s++];
    requests[s].indices = {first};
    absl::StatusOr<std::vector<SeedAnswer<Scalar>>> answers = run();
    if (!answers.ok()) return answers.status();
    centers.col(0) = (*answers)[s].points.col(0);
  }
  for (SeedRequest<Scalar>& r : requests) r.add = centers.col(0);
  for (int j = 1; j < k; ++j) {
    if (j == 1) {
      absl::StatusOr<std::vector<SeedAnswer<Scalar>>> answers = run();
      if (!answers.ok()) return answers.status();
      for (size_t s = 0; s < shards; ++s) shard_potential[s] = (*answers)[s].potential;
    }
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    const double potential = std::accumulate(shard_potential.begin(), shard_potential.end(), 0.0);
    std::vector<std::pair<size_t, size_t>> drawn(trials);  // (shard, answer column)
    for (int t = 0; t < trials; ++t) drawn[t] = draw(rng.Uniform() * potential);
    absl::StatusOr<std::vector<SeedAnswer<Scalar>>> answers = run();
    if (!answers.ok()) return answers.status();
    Matrix<Scalar> candidates(d, trials);
    for (int t = 0; t < trials; ++t) {
      candidates.col(t) = (*answers)[drawn[t].first].points.col(drawn[t].second);
    }
    for (SeedRequest<Scalar>& r : requests) r.candidates = candidates;
    answers = run();
    if (!answers.ok()) return answers.status();
    std::vector<double> totals(trials, 0.0);
    for (const SeedAnswer<Scalar>& a : *answers) {
      if (a.candidate_potentials.size() != static_cast<size_t>(trials)) {
        return absl::InternalError("a shard answered the wrong number of candidate potentials");
      }
      for (int t = 0; t < trials; ++t) totals[t] += a.candidate_potentials[t];
    }
    const int best =
        static_cast<int>(std::min_element(totals.begin(), totals.end()) - totals.begin());
    centers.col(j) = candidates.col(best);
    for (size_t s = 0; s < shards; ++s) {
      shard_potential[s] = (*answers)[s].candidate_potentials[best];
    }
    for (SeedRequest<Scalar>& r : requests) r.add = centers.col(j);
  }
  return centers;
}

#define KMT_INSTANTIATE(S)                                                                         \
  template class SeedingShard<S>;                                                                  \
  template std::vector<double> NearestCandidateWeights<S>(const Matrix<S>&, const Vector<S>*,      \
                                                          const Matrix<S>&);                       \
  template absl::StatusOr<Matrix<S>> ShardedKMeansPlusPlus<S>(                                     \
      const std::vector<int64_t>&, int, int, uint64_t, int, const SeedRound<S>&, const StopCheck&, \
      bool);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
