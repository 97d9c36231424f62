// Mini-batch k-means' steps (Sculley, "Web-scale k-means clustering",
// 2010) with scikit-learn 1.2's MiniBatchKMeans rules, over batches of row
// indices drawn from numpy's RandomState stream (core/numpy_random.h):
// each step's batch is assigned to the current centers by the caller (the
// driver over resident shards, client/minibatch_job.h, or a shard on
// itself, server/resident_shard.h), each center then moves by its
// per-center learning rate, c_j <- (c_j W_j + S_j) / (W_j + w_j), centers
// that took in little are moved to points of the batch, and the steps stop
// on scikit-learn's tolerance on the centers' shift or on no improvement of
// the smoothed batch inertia.
#ifndef KMT_CORE_MINIBATCH_H_
#define KMT_CORE_MINIBATCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cluster_sums.h"
#include "core/init.h"
#include "core/numpy_random.h"
#include "core/types.h"

namespace kmt {

// What the rules carry from step to step (scikit-learn's _counts,
// _ewa_inertia, _ewa_inertia_min, _no_improvement, _n_since_last_reassign),
// with the centers and the stream.
struct MiniBatchState {
  Matrix<double> centers;      ///< d x k (a float32 job's hold float values)
  std::vector<double> counts;  ///< k: the weight each center has taken in (W_j)
  bool has_ewa = false;        ///< whether ewa_inertia holds a value yet
  double ewa_inertia = 0;      ///< the smoothed mean batch inertia
  double ewa_inertia_min = 0;
  int64_t no_improvement = 0;  ///< steps since ewa_inertia_min last fell
  int64_t since_reassign = 0;  ///< points since the last reassignment
  NumpyRandomState random;     ///< the stream the batches are drawn from
  int64_t steps_run = 0;       ///< steps taken
  int64_t reassigned = 0;      ///< centers moved to batch points, over all steps
};

struct MiniBatchRules {
  int k = 8;                  ///< clusters
  int64_t batch_size = 1024;  ///< points per mini-batch (scikit-learn's _batch_size)
  int64_t steps = 0;          ///< most steps (scikit-learn's n_steps: max_iter * n // batch_size)
  /// Stop after a step whose total squared center shift is at most this
  /// (scikit-learn's _tol: tol times the mean per-dimension variance); 0:
  /// never.
  double center_tol = 0;
  /// Stop after this many steps without a lower smoothed inertia; -1: never.
  int64_t max_no_improvement = 10;
  /// Centers whose weight is below this times the largest are moved to
  /// points of the batch; 0: never.
  double reassignment_ratio = 0.01;
  /// Centers and counts in double (else float, rounded after every update
  /// as scikit-learn's float32 arrays).
  bool float64 = false;
  /// Called with a line per step (scikit-learn's verbose lines), if set.
  std::function<void(const std::string&)> log;
};

// The batch's sums under the centers (d x k): the rows' counts, weights and
// weighted coordinate sums per nearest center, and their weighted objective.
using MiniBatchSums = std::function<absl::StatusOr<ClusterSums>(
    const std::vector<int64_t>& rows, const Matrix<double>& centers, double* objective)>;
// The points of rows (d x rows.size()).
using MiniBatchRows =
    std::function<absl::StatusOr<Matrix<double>>(const std::vector<int64_t>& rows)>;

// Checks the rules against n points and the state's centers (d x k).
absl::Status CheckMiniBatch(const MiniBatchRules& rules, int64_t n, const MiniBatchState& state);

// Runs the steps on n points from `state` (its counts k zeros for a fresh
// fit), asking `check` (if set) before each.
absl::Status RunMiniBatchSteps(const MiniBatchRules& rules, int64_t n, const MiniBatchSums& sums,
                               const MiniBatchRows& fetch, const StopCheck& check,
                               MiniBatchState* state);

// One step's update of the state's centers and counts by the batch's sums
// under them: Sculley's per-center rate for each center the batch's points
// reached, rounded to float where !float64 (scikit-learn's float32 arrays).
// Returns the centers to reassign, in increasing order, if `reassign`
// (scikit-learn's rule: weight below ratio times the largest, at most half
// the batch's size of them); their weights are set to the least of the
// others'. The caller moves them to points of the batch.
std::vector<int> MiniBatchUpdate(const ClusterSums& sums, bool reassign, double reassignment_ratio,
                                 int64_t batch_size, bool float64, MiniBatchState* state);

// scikit-learn's _random_reassign: whether this step reassigns (every 10 k
// points, or while a center has taken in nothing); counts the batch.
bool MiniBatchReassigns(int k, int64_t batch_size, MiniBatchState* state);

// scikit-learn's _mini_batch_convergence after step `step` (from 0): the
// smoothed mean batch inertia, then the tolerance on the shift, then
// max_no_improvement; `why` says which stopped it.
bool MiniBatchConverged(const MiniBatchRules& rules, int64_t step, int64_t n, double shift,
                        double batch_inertia, MiniBatchState* state, std::string* why);

}  // namespace kmt

#endif  // KMT_CORE_MINIBATCH_H_
