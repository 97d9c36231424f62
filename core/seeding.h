// k-means++, greedy (each new center the best of 2 + floor(ln k) candidates
// drawn with probability proportional to the squared distance to the chosen
// centers, as scikit-learn does) or plain (one candidate: each new center is
// the draw), over points split into shards. Each shard
// keeps its points' squared distances to the nearest chosen center; a
// coordinator draws over the shards' running sums in shard order and keeps
// the candidate that lowers the summed potential most. The core's k-means++
// on one matrix is this driver over one shard, and a resident job spread over
// replicas runs it over theirs, so both choose the same centers for the same
// seed (up to the order in which potentials are summed). The same shards
// serve k-means‖ (Bahmani et al., "Scalable K-Means++", arXiv 1203.6402):
// a few rounds, each taking a whole group of centers into the distances and
// sampling every point independently in proportion to its distance.
#ifndef KMT_CORE_SEEDING_H_
#define KMT_CORE_SEEDING_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/distances.h"
#include "core/init.h"
#include "core/sparse.h"
#include "core/types.h"

namespace kmt {

// One shard's part of a seeding round, done in this order.
template <typename Scalar>
struct SeedRequest {
  Matrix<Scalar> add;            ///< d x m centers taken into the distances
  std::vector<int64_t> indices;  ///< points to return, by index in the shard
  std::vector<double> targets;   ///< points to return, by position in the running sum
  Matrix<Scalar> candidates;     ///< d x c candidates whose potentials to return
};

template <typename Scalar>
struct SeedAnswer {
  double potential = 0;   ///< the shard's sum of distances after `add`
  Matrix<Scalar> points;  ///< d x (indices + targets): the points asked for, in order
  std::vector<double> candidate_potentials;  ///< per candidate: the potential with it added
};

// One shard: n points, a d x n matrix or n sparse rows of d features (kept
// by reference; they must outlive the shard), and each point's squared
// distance to the nearest center added so far (+inf before the first),
// times its weight if `weights` (n values, kept by reference too) weigh the
// points: such a shard draws by weight before any center (the first), by
// w D^2 after.
//
// Sparse rows are measured from their nonzeros, O(nnz) a center: the
// product form ||x||^2 + ||c||^2 - 2 <x, c> where the dense shard takes it
// (a seed step's centers and candidates), the sparse assignment
// (AssignNearestSparse, its product distances) where the dense shard takes
// the assignment's scan (AddCenters). Distances within the product form's
// round-off of zero are measured exactly on the row made dense, with the
// dense shard's functions, so a copy of a center lies at 0 in both. The
// draws and samples are then the dense shard's, but for points whose
// distances part by round-off where a draw or sample falls.
template <typename Scalar>
class SeedingShard {
 public:
  explicit SeedingShard(const Matrix<Scalar>* points, const Vector<Scalar>* weights = nullptr)
      : SeedingShard(points, weights, SquaredNorms<Scalar>(*points)) {}
  explicit SeedingShard(const CsrMatrix<Scalar>* points, const Vector<Scalar>* weights = nullptr)
      : SeedingShard(points, weights, points->RowSquaredNorms()) {}

  // Checks the request against the shard (d, indices in range, targets
  // finite and not negative) and runs it.
  absl::StatusOr<SeedAnswer<Scalar>> Step(const SeedRequest<Scalar>& request);

  // k-means‖'s round, first part: takes every column of `centers` (d x m)
  // into the distances in one blocked pass and returns the potential. The
  // shard numbers the centers these calls take in, in order, and keeps
  // each point's nearest of them (4 bytes per point; ties to the first
  // taken). Taking the same groups in the same order gives the same
  // distances and nearest centers to the bit.
  absl::StatusOr<double> AddCenters(const Matrix<Scalar>& centers);

  // For each center AddCenters took in, in order, the weight (the count, for
  // unweighted points) of the points nearest to it: k-means‖'s candidate
  // weights, without a pass over the points.
  std::vector<double> TakenCenterWeights() const;

  // k-means‖'s round, second part: the indices of the points taken, each
  // independently with probability min(1, oversampling * D_i / potential)
  // (D_i its running distance, `potential` the sum over all shards), by
  // CounterUniform(seed, round, 0, first_point + i), so that the sample
  // depends on the points and these numbers only. Needs a center added.
  absl::StatusOr<std::vector<int64_t>> Oversample(double oversampling, double potential,
                                                  uint64_t seed, int64_t round,
                                                  int64_t first_point) const;

  // Whether a center has been taken into the distances.
  bool seeded() const { return seeded_; }

  // Bytes this state holds per point, beyond the points themselves.
  static constexpr int64_t kBytesPerPoint = sizeof(Scalar) + 2 * sizeof(double);

 private:
  using Points = std::variant<const Matrix<Scalar>*, const CsrMatrix<Scalar>*>;

  SeedingShard(Points points, const Vector<Scalar>* weights, Vector<Scalar> point_sq)
      : points_(points),
        weights_(weights),
        point_sq_(std::move(point_sq)),
        closest_(weights != nullptr
                     ? Vector<double>(weights->template cast<double>())
                     : Vector<double>::Constant(point_sq_.size(),
                                                std::numeric_limits<double>::infinity())) {}

  // Calls f(points), the points as the passes read them (seeding.cc: a
  // dense and a sparse form with the same members), so that every pass is
  // written once.
  template <typename F>
  decltype(auto) WithPoints(F&& f) const;

  // Step on `points`.
  template <typename P>
  absl::StatusOr<SeedAnswer<Scalar>> StepOn(const P& points, const SeedRequest<Scalar>& request);
  // Takes one center into the distances, in one pass of blocked products
  // (the greedy seed steps').
  template <typename P>
  void Take(const P& points, const Eigen::Ref<const Matrix<Scalar>>& center);
  // Takes the columns of `centers` into the distances and nearest_, numbered
  // from taken_, in one pass of the assignment's scan (AddCenters').
  template <typename P>
  void TakeNearest(const P& points, const Matrix<Scalar>& centers);

  // The point whose range [sum before it, sum with it) of the running sum of
  // distances holds `target`: the first with running sum > target, so never
  // a point at distance 0 while another is farther; the last point at a
  // positive distance if none (round-off).
  Eigen::Index Find(double target);

  Points points_;
  const Vector<Scalar>* weights_;
  Vector<Scalar> point_sq_;
  Vector<double> closest_;
  std::vector<double> cumulative_;  // running sum of closest_, built on demand
  bool cumulative_current_ = false;
  bool seeded_ = false;  // a center has been added
  // AddCenters' state: each point's nearest center of those it took in (-1:
  // nearer to one a seed step added), and how many it took in.
  std::vector<int32_t> nearest_;
  int64_t taken_ = 0;
};

// For each of the d x c candidates, the weight of the points (d x n, weighed
// by `weights` or 1 each) nearest to it, ties to the lowest index: what
// k-means‖ weighs its candidates by.
template <typename Scalar>
std::vector<double> NearestCandidateWeights(const Matrix<Scalar>& points,
                                            const Vector<Scalar>* weights,
                                            const Matrix<Scalar>& candidates);

// The weight (`weights`, or 1 each) of the points under each of k labels:
// NearestCandidateWeights' tally, both forms.
template <typename Scalar>
std::vector<double> LabelWeights(const Labels& labels, const Vector<Scalar>* weights, int64_t k) {
  std::vector<double> out(k, 0.0);
  for (size_t i = 0; i < labels.size(); ++i) {
    out[labels[i]] += weights != nullptr ? static_cast<double>((*weights)[i]) : 1.0;
  }
  return out;
}

// NearestCandidateWeights for sparse points (n rows of d features): the labels are
// AssignNearestSparse's, which equal the dense path's, so the weights are
// the dense overload's on the same points, at O(nnz) a candidate. Defined
// here rather than among the dispatched kernels (simd_kernels.h names one
// function a name): the assignment it calls is sparse.cc's.
template <typename Scalar>
std::vector<double> NearestCandidateWeights(const CsrMatrix<Scalar>& points,
                                            const Vector<Scalar>* weights,
                                            const Matrix<Scalar>& candidates) {
  Labels labels;
  AssignNearestSparse(points, candidates, &labels, nullptr, nullptr, nullptr,
                      SparseDistances::kProduct);
  return LabelWeights(labels, weights, candidates.cols());
}

// Runs one request per shard, every shard at once, and returns the answers
// in shard order.
template <typename Scalar>
using SeedRound = std::function<absl::StatusOr<std::vector<SeedAnswer<Scalar>>>(
    const std::vector<SeedRequest<Scalar>>&)>;

// Candidates per center of greedy k-means++: 2 + floor(ln k).
inline int GreedySeedingCandidates(int k) { return 2 + static_cast<int>(std::floor(std::log(k))); }

// k-means++ over shards of `shard_sizes` points (in total at least k) in d
// dimensions with `trials` candidates per center (GreedySeedingCandidates(k),
// or 1 for plain k-means++); returns d x k centers, each a copy of a point.
// Two rounds per center; `check` is called before each center after the
// first. `weighted`: the shards weigh their points, and the first center is
// drawn by weight (one more round) rather than uniformly.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ShardedKMeansPlusPlus(const std::vector<int64_t>& shard_sizes, int d,
                                                     int k, uint64_t seed, int trials,
                                                     const SeedRound<Scalar>& round,
                                                     const StopCheck& check = {},
                                                     bool weighted = false);

}  // namespace kmt

#endif  // KMT_CORE_SEEDING_H_
