// Mini-batch k-means (Sculley, "Web-scale k-means clustering", 2010) on
// resident shards, with scikit-learn 1.2's MiniBatchKMeans rules: the
// driver draws each step's batch as row indices (numpy's RandomState
// stream, client/numpy_random.h), the shards answer the sums of their rows
// of it under the current centers (a sample-sums step: no points travel),
// and the driver moves each center by its per-center learning rate, c_j <-
// (c_j W_j + S_j) / (W_j + w_j), reassigns centers that took in little to
// points of the batch, and stops on scikit-learn's tolerance on the
// centers' shift or on no improvement of the smoothed batch inertia. Given
// the RandomState's state after scikit-learn's initialisation, a fit draws
// scikit-learn's batches and reassignments, step for step.
#ifndef KMT_CLIENT_MINIBATCH_JOB_H_
#define KMT_CLIENT_MINIBATCH_JOB_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/numpy_random.h"
#include "client/replica_shards.h"
#include "client/shard_set.h"
#include "core/cluster_sums.h"
#include "core/init.h"
#include "core/types.h"

namespace kmt {

// The state the rules carry from step to step (scikit-learn's _counts,
// _ewa_inertia, _ewa_inertia_min, _no_improvement, _n_since_last_reassign).
struct MiniBatchState {
  std::vector<double> counts;  ///< k: the weight each center has taken in (W_j)
  bool has_ewa = false;        ///< whether ewa_inertia holds a value yet
  double ewa_inertia = 0;      ///< the smoothed mean batch inertia
  double ewa_inertia_min = 0;
  int64_t no_improvement = 0;  ///< steps since ewa_inertia_min last fell
  int64_t since_reassign = 0;  ///< points since the last reassignment
};

struct MiniBatchOptions {
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
  bool weighted = false;  ///< the shards are weighted
  /// The shards hold float64 points: centers and counts in double (else
  /// float, rounded after every update as scikit-learn's float32 arrays).
  bool float64 = false;
  Matrix<double> centers;   ///< d x k initial centers
  NumpyRandomState random;  ///< the stream the batches are drawn from
  bool labels = true;       ///< after the steps, every point's label and the objective
  /// Called with a line per step (scikit-learn's verbose lines), if set.
  std::function<void(const std::string&)> log;
  /// Called before every round, if set: a non-OK status ends the job with it.
  StopCheck check;
};

struct MiniBatchResult {
  Matrix<double> centers;  ///< d x k (a float32 job's hold float values)
  MiniBatchState state;    ///< the rules' state after the last step
  int64_t steps_run = 0;
  NumpyRandomState random;  ///< the stream after the last draw
  int64_t reassigned = 0;   ///< centers moved to batch points, over all steps
  Labels labels;            ///< n, if asked: nearest final center
  double objective = 0;     ///< of the final centers over all points, if labels
  double steps_seconds = 0, labels_seconds = 0, load_seconds = 0;
};

// One step's update of `centers` (d x k) and `state` by the batch's sums
// under them: Sculley's per-center rate for each center the batch's points
// reached, rounded to float where !float64 (scikit-learn's float32 arrays).
// Returns the centers to reassign, in increasing order, if `reassign`
// (scikit-learn's rule: weight below ratio times the largest, at most half
// the batch's size of them); their weights are set to the least of the
// others'. The caller moves them to points of the batch.
std::vector<int> MiniBatchUpdate(const ClusterSums& sums, bool reassign, double reassignment_ratio,
                                 int64_t batch_size, bool float64, Matrix<double>* centers,
                                 MiniBatchState* state);

// scikit-learn's _random_reassign: whether this step reassigns (every 10 k
// points, or while a center has taken in nothing); counts the batch.
bool MiniBatchReassigns(int k, int64_t batch_size, MiniBatchState* state);

// scikit-learn's _mini_batch_convergence after step `step` (from 0): the
// smoothed mean batch inertia, then the tolerance on the shift, then
// max_no_improvement; `why` says which stopped it.
bool MiniBatchConverged(const MiniBatchOptions& options, int64_t step, int64_t n, double shift,
                        double batch_inertia, MiniBatchState* state, std::string* why);

// Runs the steps on the loaded shards (d dimensions).
absl::StatusOr<MiniBatchResult> RunMiniBatchJob(const MiniBatchOptions& options, int d,
                                                ShardSet& shards);

// The same on n points in d dimensions that this process reads from
// `source` and loads on replicas (ReplicaShards::Load); float64 points
// make a float64 job.
absl::StatusOr<MiniBatchResult> RunMiniBatchJobOnReplicas(ReplicaShardOptions replicas,
                                                          MiniBatchOptions options, int64_t n,
                                                          int d, PointSource source);
absl::StatusOr<MiniBatchResult> RunMiniBatchJobOnReplicas(ReplicaShardOptions replicas,
                                                          MiniBatchOptions options, int64_t n,
                                                          int d, PointSource64 source);

}  // namespace kmt

#endif  // KMT_CLIENT_MINIBATCH_JOB_H_
