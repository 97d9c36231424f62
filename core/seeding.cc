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

// The shard's points as its passes read them, in two forms with the same
// members, so that the passes, templates over the form, are written once:
//   size(), dim(): n and d.
//   ForEachBlock(c, visit): visit(first, dist) for every block of points,
//     dist (rows x c) the product form's squared distances of points
//     first.. to each column of `c`, clamped at 0.
//   Direct(i, c): DirectSquaredDistance of point i to c (d values).
//   ForEachNearest(centers, visit): visit(first, rows, labels, sq) for
//     every block of points, each point's nearest column of `centers` (ties
//     to the lowest index) and its squared distance, a copy of a center at
//     0; blocks may be visited from several threads at once.
//   Copy(i, out): point i as d values.
template <typename Scalar>
class DenseShardPoints {
 public:
  DenseShardPoints(const Matrix<Scalar>& points, const Vector<Scalar>& point_sq)
      : points_(points), point_sq_(point_sq) {}

  Eigen::Index size() const { return points_.cols(); }
  Eigen::Index dim() const { return points_.rows(); }

  template <typename Visit>
  void ForEachBlock(const Matrix<Scalar>& c, Visit&& visit) const {
    const Vector<Scalar> c_sq = SquaredNorms<Scalar>(c);
    Matrix<Scalar> dist;
    for (Eigen::Index first = 0; first < points_.cols(); first += kBlock) {
      const Eigen::Index rows = std::min(kBlock, points_.cols() - first);
      SquaredDistances<Scalar>(points_.middleCols(first, rows), point_sq_.segment(first, rows), c,
                               c_sq, &dist);
      visit(first, dist);
    }
  }

  Scalar Direct(Eigen::Index i, const Scalar* c) const {
    return DirectSquaredDistance(points_.col(i).data(), c, points_.rows());
  }

  template <typename Visit>
  void ForEachNearest(const Matrix<Scalar>& centers, Visit&& visit) const {
    // The assignment's own scan (AssignNearest's blocks, products and exact
    // near ties), so that a center taken in costs what a center of Lloyd's
    // assignment does: each point's squared distance is computed on the
    // point's own column (AssignedSquaredDistance), so a copy of a center
    // lies at 0 and the result does not depend on the block or thread a
    // point falls in.
    const NearestCenterScan<Scalar> scan(centers);
    const Eigen::Index n = points_.cols(), block = scan.block();
#pragma omp parallel if (n * centers.cols() * points_.rows() > (1 << 18))
    {
      typename NearestCenterScan<Scalar>::Scratch scratch;
      std::vector<int> labels(block);
      std::vector<Scalar> sq(block);
#pragma omp for schedule(dynamic)
      for (Eigen::Index first = 0; first < n; first += block) {
        const Eigen::Index rows = std::min(block, n - first);
        scan.Scan(points_.middleCols(first, rows), &scratch, labels.data(), sq.data());
        visit(first, rows, labels.data(), sq.data());
      }
    }
  }

  void Copy(Eigen::Index i, Scalar* out) const {
    std::copy_n(points_.col(i).data(), points_.rows(), out);
  }

 private:
  const Matrix<Scalar>& points_;
  const Vector<Scalar>& point_sq_;
};

// Sparse rows: every distance from the nonzeros, O(nnz) a center, but for
// the exact measures, which take the row made dense (O(d), as the dense
// form's do). Not for use from several threads at once (one dense row).
template <typename Scalar>
class SparseShardPoints {
 public:
  SparseShardPoints(const CsrMatrix<Scalar>& points, const Vector<Scalar>& point_sq)
      : points_(points), point_sq_(point_sq) {}

  Eigen::Index size() const { return points_.rows(); }
  Eigen::Index dim() const { return points_.cols(); }

  template <typename Visit>
  void ForEachBlock(const Matrix<Scalar>& c, Visit&& visit) const {
    const Vector<Scalar> c_sq = SquaredNorms<Scalar>(c);
    // Coordinate l of every column of c contiguous (column l of the
    // transpose), so that a nonzero x_l adds x_l times one column to the
    // products.
    const Matrix<Scalar> transposed = c.transpose();
    const Eigen::Index n = points_.rows(), m = c.cols();
    const int64_t* indptr = points_.indptr().data();
    const int32_t* index = points_.indices().data();
    const Scalar* value = points_.values().data();
    Matrix<Scalar> dist;
    for (Eigen::Index first = 0; first < n; first += kBlock) {
      const Eigen::Index rows = std::min(kBlock, n - first);
      dist.resize(rows, m);
      const int64_t work = (indptr[first + rows] - indptr[first]) * m;
#pragma omp parallel if (work > (1 << 18))
      {
        Vector<Scalar> cross(m);
#pragma omp for schedule(static)
        for (Eigen::Index r = 0; r < rows; ++r) {
          const Eigen::Index i = first + r;
          cross.setZero();
          for (int64_t p = indptr[i]; p < indptr[i + 1]; ++p) {
            cross.noalias() += value[p] * transposed.col(index[p]);
          }
          // CrossToSquaredDistances' operations, in its order.
          for (Eigen::Index j = 0; j < m; ++j) {
            dist(r, j) = std::max(Scalar(0), (Scalar(-2) * cross[j] + point_sq_[i]) + c_sq[j]);
          }
        }
      }
      visit(first, dist);
    }
  }

  Scalar Direct(Eigen::Index i, const Scalar* c) const {
    return DirectSquaredDistance(DenseRow(i), c, points_.cols());
  }

  template <typename Visit>
  void ForEachNearest(const Matrix<Scalar>& centers, Visit&& visit) const {
    // The sparse assignment with its product distances (near ties measured
    // on the dense row); those within the product form's round-off of 0
    // then measured as the dense scan measures every point
    // (AssignedSquaredDistance on the dense row), so that a copy of a center
    // lies at 0. One block: the labels and distances of all n points, held
    // for the pass: 4 + sizeof(Scalar) bytes a point, beside the rows' 8
    // or 12 bytes a nonzero.
    Labels labels;
    Vector<Scalar> sq;
    AssignNearestSparse(points_, centers, &labels, &sq, nullptr, nullptr,
                        SparseDistances::kProduct);
    const Vector<Scalar> c_sq = SquaredNorms<Scalar>(centers);
    const Eigen::Index d = points_.cols();
    for (Eigen::Index i = 0; i < points_.rows(); ++i) {
      if (sq[i] <= SquaredDistanceRoundOff<Scalar>(d, point_sq_[i], c_sq[labels[i]])) {
        sq[i] = AssignedSquaredDistance(DenseRow(i), centers.col(labels[i]).data(), d);
      }
    }
    visit(Eigen::Index{0}, points_.rows(), labels.data(), sq.data());
  }

  void Copy(Eigen::Index i, Scalar* out) const { points_.Row(i, out); }

 private:
  // Row i made dense in the one scratch row (d values, made on first use).
  const Scalar* DenseRow(Eigen::Index i) const {
    if (row_.size() != points_.cols()) row_.resize(points_.cols());
    points_.Row(i, row_.data());
    return row_.data();
  }

  const CsrMatrix<Scalar>& points_;
  const Vector<Scalar>& point_sq_;
  mutable Vector<Scalar> row_;
};

}  // namespace

template <typename Scalar>
template <typename F>
decltype(auto) SeedingShard<Scalar>::WithPoints(F&& f) const {
  if (const Matrix<Scalar>* const* dense = std::get_if<const Matrix<Scalar>*>(&points_)) {
    return f(DenseShardPoints<Scalar>(**dense, point_sq_));
  }
  return f(SparseShardPoints<Scalar>(*std::get<const CsrMatrix<Scalar>*>(points_), point_sq_));
}

template <typename Scalar>
Eigen::Index SeedingShard<Scalar>::Find(double target) {
  const Eigen::Index n = closest_.size();
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
template <typename P>
void SeedingShard<Scalar>::Take(const P& points, const Eigen::Ref<const Matrix<Scalar>>& center) {
  const Eigen::Index d = points.dim();
  const Matrix<Scalar> c = center;
  const Scalar c_sq = c.squaredNorm();
  // The shard's first center replaces the weights a weighted shard started
  // from.
  const bool replace = !seeded_ && weights_ != nullptr;
  points.ForEachBlock(c, [&](Eigen::Index first, const auto& dist) {
    for (Eigen::Index i = 0; i < dist.rows(); ++i) {
      // The product form can leave a copy of the center a small positive
      // distance; near-zero distances are decided exactly, so a point equal
      // to a chosen center weighs 0 and is never drawn.
      Scalar sq = dist(i, 0);
      if (sq <= SquaredDistanceRoundOff<Scalar>(d, point_sq_[first + i], c_sq)) {
        sq = points.Direct(first + i, c.data());
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
template <typename P>
void SeedingShard<Scalar>::TakeNearest(const P& points, const Matrix<Scalar>& centers) {
  // Each point's nearest of the group and its squared distance, then the
  // running minimum, ties to the center taken first.
  const bool replace = !seeded_ && weights_ != nullptr;
  const int64_t first_label = taken_;
  points.ForEachNearest(
      centers, [&](Eigen::Index first, Eigen::Index rows, const int* labels, const Scalar* sq) {
        for (Eigen::Index i = 0; i < rows; ++i) {
          // Weighted: w times the squared distance.
          const double distance =
              weights_ == nullptr
                  ? static_cast<double>(sq[i])
                  : static_cast<double>((*weights_)[first + i]) * static_cast<double>(sq[i]);
          if (replace || distance < closest_[first + i]) {
            closest_[first + i] = distance;
            nearest_[first + i] = static_cast<int32_t>(first_label + labels[i]);
          }
        }
      });
  cumulative_current_ = false;
  seeded_ = true;
}

template <typename Scalar>
absl::StatusOr<double> SeedingShard<Scalar>::AddCenters(const Matrix<Scalar>& centers) {
  if (centers.cols() > 0) {
    const Eigen::Index d = WithPoints([](const auto& points) { return points.dim(); });
    if (absl::Status s = ValidateCenterValues(centers, d); !s.ok()) return s;
    if (nearest_.empty()) {
      nearest_.assign(closest_.size(), -1);
      // The draws' running sums are rebuilt if a seed step draws again: in
      // their room the shard keeps the nearest centers.
      cumulative_ = {};
    }
    WithPoints([&](const auto& points) { TakeNearest(points, centers); });
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
  return LabelWeights(labels, weights, candidates.cols());
}

template <typename Scalar>
absl::StatusOr<SeedAnswer<Scalar>> SeedingShard<Scalar>::Step(const SeedRequest<Scalar>& r) {
  return WithPoints([&](const auto& points) { return StepOn(points, r); });
}

template <typename Scalar>
template <typename P>
absl::StatusOr<SeedAnswer<Scalar>> SeedingShard<Scalar>::StepOn(const P& points,
                                                                const SeedRequest<Scalar>& r) {
  const Eigen::Index d = points.dim(), n = points.size();
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
  for (Eigen::Index c = 0; c < r.add.cols(); ++c) Take(points, r.add.col(c));
  answer.potential = closest_.sum();
  answer.points.resize(d, static_cast<Eigen::Index>(r.indices.size() + r.targets.size()));
  Eigen::Index out = 0;
  for (int64_t i : r.indices) points.Copy(i, answer.points.col(out++).data());
  for (double t : r.targets) points.Copy(Find(t), answer.points.col(out++).data());
  if (r.candidates.cols() > 0) {
    answer.candidate_potentials.assign(r.candidates.cols(), 0.0);
    points.ForEachBlock(r.candidates, [&](Eigen::Index first, const auto& dist) {
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
