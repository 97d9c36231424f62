// Whole-dataset clustering on resident shards (client/shard_set.h): the
// driver that both the CLI (`kmt cluster --mode=whole`) and the Python
// package (kmt.KMeans, kmt.fit_resident and kmt.dask, through the kmt._driver
// extension) run. Greedy (or plain) k-means++ over all shards
// (core/seeding.h), k-means‖ (a few rounds that each sample about k points
// over all shards, weighted greedy k-means++ on those candidates here), or
// the k points "random" draws; then exact Lloyd's iterations that send only
// the centers and sum the shards' counts, weights, sums and objectives in
// shard order, stopped by scikit-learn's rules; scikit-learn's relocation of
// empty clusters from the shards' farthest points; n_init starts, the
// lowest objective kept; and a last step for the labels. Every step is a
// ShardSet::Round, so a shard that moves after a failure changes no bit.
// A float64 job (shards loaded from float64 points) runs all of it in
// double: its centers travel as float64 and are updated in double, as one
// float64 Cluster request's are.
#ifndef KMT_CLIENT_RESIDENT_JOB_H_
#define KMT_CLIENT_RESIDENT_JOB_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/replica_shards.h"
#include "client/shard_set.h"
#include "core/cluster_sums.h"
#include "core/empty_clusters.h"
#include "core/init.h"
#include "core/transformer.h"
#include "core/types.h"
#include "proto/job_matrices.h"
#include "proto/raw_payload.h"

namespace kmt {

// How a job without initial centers chooses them.
enum class ResidentSeeding {
  kGreedyKMeansPlusPlus,  ///< greedy k-means++ over all points: two round trips per center
  kPlainKMeansPlusPlus,   ///< plain k-means++ (one draw per center) over all points
  /// k-means‖ (Bahmani et al., "Scalable K-Means++", arXiv 1203.6402): the
  /// first center as k-means++'s, then rounds that each sample every point
  /// with probability min(1, l w D^2 / phi) on the shards, and weighted
  /// greedy k-means++ on the candidates, weighed by their nearest points
  kKMeansParallel,
  /// the k points core/init.h's "random" draws among all (by weight if the
  /// points have weights), fetched from their shards
  kRandom,
};

// The --init name of k-means‖ (quote it in a shell).
inline constexpr char kKMeansParallelName[] = "kmeans||";

struct ResidentJobOptions {
  int k = 10;           ///< clusters
  int iterations = 20;  ///< most Lloyd's iterations (scikit-learn's max_iter)
  /// Scikit-learn's rule: stop after the iteration whose total squared
  /// center shift is at most this (its tol times the points' mean
  /// per-dimension variance); negative: only the rules below. An iteration
  /// that leaves every center as it was (or, where the shards count them,
  /// changes no label) always stops the run.
  double center_tol = 0;
  /// The shards are weighted (their answers carry weights).
  bool weighted = false;
  /// The shards hold float64 points (ShardChunk.points_f64): the centers
  /// are computed in double and travel as float64.
  bool float64 = false;
  /// The shards hold sparse points (ShardChunk.points_csr): an assign
  /// step's centers go as their nonzeros (AssignStep.centers_csr), a
  /// fraction of k x d values at a large d.
  bool sparse = false;
  /// Sparse shards answer an assign step's cluster sums as rows of the
  /// clusters' columns (sparse_sums): RunResidentJobOnReplicas asks for them
  /// where rows are the smaller answer (12 bytes for each of at most the
  /// data's nonzeros, against a shard's 8 k d dense), as at k = 256,
  /// d = 2^17 and 10^7 nonzeros; at k = 20 the dense sums are smaller and
  /// cheaper to make.
  bool sparse_sums = false;
  /// The points' weights, in their precision, needed only by kRandom on
  /// weighted shards.
  PointWeights weights;
  uint64_t seed = 1;  ///< the initialisation's draws; start r of n_init draws from seed + r
  ResidentSeeding seeding = ResidentSeeding::kGreedyKMeansPlusPlus;  ///< without initial centers
  /// k-means‖'s sampling rounds; more are run while there are fewer than k
  /// candidates and a point lies away from them. With l = k, 2 rounds take
  /// about 2 Lloyd's iterations' distances (docs/operations.md).
  int kmeans_parallel_rounds = 2;
  /// k-means‖ samples about this times k points per round (l = k).
  double kmeans_parallel_oversampling = 1;
  /// kKeep or kRelocateFarthest (scikit-learn's rule).
  EmptyClusterPolicy empty_clusters = EmptyClusterPolicy::kKeep;
  /// Starts from `seeding` (each k-means++ after the first loads the shards
  /// again); the lowest final objective is kept. Ignored with `starts`.
  int n_init = 1;
  /// Given starts, each d x k, run in turn (instead of `seeding`): float
  /// or double ones for a float64 job (float widened), float ones for a
  /// float32 job.
  std::vector<std::variant<Matrix<float>, Matrix<double>>> starts;
  bool labels = true;  ///< gather every point's label (unless the shards keep them)
  /// The objective of every iteration (objectives, the log, on_iteration);
  /// false: of the initial and final centers alone, the others NaN, so that
  /// the shards' bounds need not read the points they keep in their
  /// clusters (core/bounds.h).
  bool iteration_objectives = true;
  /// A sparse job held in one shard runs its Lloyd's iterations on that
  /// shard (one LloydStepsStep, the same trajectory), not a round trip
  /// each, unless `log` or `on_iteration` watches each step.
  bool steps_in_place = true;
  /// Called with a line of progress, if set.
  std::function<void(const std::string&)> log;
  /// Called after each iteration's update, if set: the objective under the
  /// centers it started from, the total squared shift it made, and why the
  /// iterations stop there (kNone if they go on).
  std::function<void(int t, double objective, double shift, Convergence why)> on_iteration;
  /// Called before every step, if set: a non-OK status (the caller was
  /// interrupted, a deadline passed) ends the job with it.
  StopCheck check;
};

struct ResidentJobResult {
  /// d x k final centers in the job's precision: float for a float32 job,
  /// double for a float64 one.
  std::variant<Matrix<float>, Matrix<double>> centers;
  /// The final centers in Scalar's precision (a float64 job's rounded to
  /// float).
  template <typename Scalar>
  Matrix<Scalar> centers_as() const {
    return std::visit([](const auto& c) { return Matrix<Scalar>(c.template cast<Scalar>()); },
                      centers);
  }
  Labels labels;                   ///< n, if gathered: nearest final center
  std::vector<int64_t> counts;     ///< k: points nearest each final center
  double objective = 0;            ///< of the final centers, over all points
  double initial_objective = 0;    ///< of the initial centers
  std::vector<double> objectives;  ///< after each iteration
  int iterations_run = 0;
  Convergence convergence = Convergence::kNone;  ///< why it stopped before `iterations`, if it did
  /// For each assignment after the first, the labels it changed over all
  /// shards; -1 where a shard could not compare (it had just moved, or it
  /// does not count label changes).
  std::vector<int64_t> labels_changed;
  int64_t empty_cluster_events = 0;        ///< (iteration, cluster) pairs without weight
  int64_t relocations = 0;                 ///< empty clusters moved to far points
  std::vector<double> restart_objectives;  ///< each start's final objective, with several
  int best_restart = 0;                    ///< the start this result is of
  int shards = 0;                          ///< shards the points are split into
  int shard_moves = 0;          ///< shards loaded again on another replica after a failure
  bool steps_in_place = false;  ///< whether the one shard ran the kept start's iterations
  int init_rounds = 0;          ///< k-means‖: sampling rounds run
  int64_t init_candidates = 0;  ///< k-means‖: the candidates k-means++ chose the k centers from
  // Wall-clock seconds of each phase, over every start.
  double load_seconds = 0, init_seconds = 0, labels_seconds = 0;
  std::vector<double> iteration_seconds;  ///< of the kept start
};

// An assign step's labels, as raw int32 bytes or repeated.
absl::StatusOr<Labels> StepLabels(const v1::JobResponse& answer);

// What the drivers over a ShardSet share (this one and the mini-batch
// one, client/minibatch_job.h):
// Seconds from `start` to now on the steady clock: the results' timings.
double SecondsSince(std::chrono::steady_clock::time_point start);
// Each shard's first point in the dataset, from the shards' sizes.
std::vector<int64_t> ShardFirsts(const std::vector<int64_t>& sizes);
// Adds one shard's answer to an assign or sample-sums step, checked against
// k and d, to `into` (ClusterSums::Add's bits): its center_sums, or a sparse
// shard's center_sums_csr rows (0 elsewhere); the weights are the counts on
// an unweighted shard.
absl::Status AddStepSums(const v1::JobResponse& answer, int d, int k, bool weighted,
                         ClusterSums* into);
// Points an answer carries (`forms`, proto/job_matrices.h), d x m in the
// job's precision: ReadRows, whose refusal is INTERNAL here (the server
// broke the contract, not the caller).
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> AnswerRows(const MatrixForms& forms, int d);

// Clusters the points the loaded `shards` hold (d dimensions) as `options`
// say.
absl::StatusOr<ResidentJobResult> RunResidentJob(const ResidentJobOptions& options, int d,
                                                 ShardSet& shards);

// The job on n points in d dimensions that this process reads from
// `source` and loads on replicas (ReplicaShards::Load). `tol` > 0 is
// scikit-learn's: the run stops at a total squared shift of tol times the
// points' mean per-dimension variance (options.center_tol is then that).
// A float64 source makes a float64 job (options.float64), a sparse one a
// job on sparse shards (no points_offset).
absl::StatusOr<ResidentJobResult> RunResidentJobOnReplicas(ReplicaShardOptions replicas,
                                                           ResidentJobOptions options, double tol,
                                                           int64_t n, int d, ShardSource source);

}  // namespace kmt

#endif  // KMT_CLIENT_RESIDENT_JOB_H_
