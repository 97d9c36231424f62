// Mini-batch k-means on resident shards (the steps and rules of
// core/minibatch.h, scikit-learn 1.2's MiniBatchKMeans): the driver draws
// each step's batch as row indices (numpy's RandomState stream,
// core/numpy_random.h), the shards answer the sums of their rows of it
// under the current centers (a sample-sums step: no points travel), and the
// driver applies the update, the reassignment and the stopping rules. A job
// held in one shard runs all its steps on it in one request instead. Given
// the RandomState's state after scikit-learn's initialisation, a fit draws
// scikit-learn's batches and reassignments, step for step; a last pass
// gives every point's label.
#ifndef KMT_CLIENT_MINIBATCH_JOB_H_
#define KMT_CLIENT_MINIBATCH_JOB_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/replica_shards.h"
#include "client/shard_set.h"
#include "core/init.h"
#include "core/minibatch.h"
#include "core/numpy_random.h"
#include "core/types.h"

namespace kmt {

struct MiniBatchOptions {
  MiniBatchRules rules;   ///< k, the batch size, the steps, the stopping rules, the log
  bool weighted = false;  ///< the shards are weighted
  /// The shards hold sparse points: their sums come as rows of the
  /// clusters' columns (SampleSumsStep.sparse_sums).
  bool sparse = false;
  Matrix<double> centers;   ///< d x k initial centers
  NumpyRandomState random;  ///< the stream the batches are drawn from
  /// A job held in one shard runs its steps on that shard (one
  /// MiniBatchStepsStep), not a round trip each; the rules' log then has
  /// no line per step.
  bool steps_on_server = true;
  bool labels = true;  ///< after the steps, every point's label and the objective
  /// Called before every round, if set: a non-OK status ends the job with it.
  StopCheck check;
};

struct MiniBatchResult {
  MiniBatchState state;          ///< the centers, counts, stream and steps after the last step
  Labels labels;                 ///< n, if asked: nearest final center
  double objective = 0;          ///< of the final centers over all points, if labels
  bool steps_on_server = false;  ///< whether one shard ran the steps itself
  double steps_seconds = 0, labels_seconds = 0, load_seconds = 0;
};

// Runs the steps on the loaded shards (d dimensions).
absl::StatusOr<MiniBatchResult> RunMiniBatchJob(const MiniBatchOptions& options, int d,
                                                ShardSet& shards);

// The same on n points in d dimensions that this process reads from
// `source` and loads on replicas (ReplicaShards::Load); float64 points
// make a float64 job, sparse ones a job on sparse shards.
absl::StatusOr<MiniBatchResult> RunMiniBatchJobOnReplicas(ReplicaShardOptions replicas,
                                                          MiniBatchOptions options, int64_t n,
                                                          int d, ShardSource source);

}  // namespace kmt

#endif  // KMT_CLIENT_MINIBATCH_JOB_H_
