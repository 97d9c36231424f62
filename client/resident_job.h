// Whole-dataset clustering on resident shards: the points (and their
// weights, if they have them) are split into contiguous shards, each loaded
// on one replica's Job stream (several per replica with
// `streams_per_server`) and kept there for the job. Then greedy (or plain)
// k-means++ over all shards (core/seeding.h), or k-means‖ (a few rounds that
// each sample about k points over all shards, weighted greedy k-means++ on
// those candidates in the client), exact Lloyd's iterations that
// send only the centers and sum the shards' counts, weights, sums and
// objectives in shard order, stopped by scikit-learn's rule over all shards,
// and a last step for the labels. When a stream fails (its replica died or
// restarted) the shard is loaded on another replica and the step is asked
// again with the same centers, so the result does not change.
#ifndef KMT_CLIENT_RESIDENT_JOB_H_
#define KMT_CLIENT_RESIDENT_JOB_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/point_moments.h"
#include "core/transformer.h"
#include "core/types.h"
#include "proto/transport_security.h"

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
};

// The --init name of k-means‖ (quote it in a shell).
inline constexpr char kKMeansParallelName[] = "kmeans||";

struct ResidentJobOptions {
  std::vector<std::string> servers;  ///< replica addresses, host:port; one channel each
  int streams_per_server = 1;        ///< shards (and streams) per replica
  int k = 10;                        ///< clusters
  int iterations = 20;               ///< most Lloyd's iterations (scikit-learn's max_iter)
  /// Scikit-learn's rule over all shards: stop after the iteration whose
  /// total squared center shift is at most tol times the points' mean
  /// per-dimension variance, or whose assignment changed no label; 0: only
  /// at a fixed point.
  double tol = 0;
  /// Per-point weights (n values, finite, >= 0, not all 0); empty: 1 each.
  std::vector<float> weights;
  /// The shards keep their last labels (4 bytes per point on the replicas)
  /// to count each iteration's label changes, so that a run stopped by an
  /// unchanged assignment says so; without, the shift rule stops it at the
  /// same iteration (an unchanged assignment leaves the centers as they were).
  bool count_label_changes = true;
  uint64_t seed = 1;                                                 ///< the initialisation's draws
  ResidentSeeding seeding = ResidentSeeding::kGreedyKMeansPlusPlus;  ///< without initial centers
  /// k-means‖'s sampling rounds; more are run while there are fewer than k
  /// candidates and a point lies away from them. With l = k, 2 rounds take
  /// about 2 Lloyd's iterations' distances (docs/operations.md).
  int kmeans_parallel_rounds = 2;
  /// k-means‖ samples about this times k points per round (l = k).
  double kmeans_parallel_oversampling = 1;
  bool labels = true;             ///< collect every point's label
  int64_t chunk_bytes = 4 << 20;  ///< points per shard message, in bytes
  int max_moves = 3;              ///< shard moves after failures before the job fails
  absl::Duration stream_timeout = absl::InfiniteDuration();  ///< deadline of each stream
  ChannelSecurity security;  ///< TLS settings (proto/transport_security.h); plaintext by default
  /// Called with a line of progress or news (a shard moved), if set.
  std::function<void(const std::string&)> log;
};

struct ResidentJobResult {
  Matrix<float> centers;           ///< d x k final centers
  Labels labels;                   ///< n, if asked: nearest final center
  double objective = 0;            ///< of the final centers, over all points
  double initial_objective = 0;    ///< of the initial centers
  std::vector<double> objectives;  ///< after each iteration
  int iterations_run = 0;
  Convergence convergence = Convergence::kNone;  ///< why it stopped before `iterations`, if it did
  /// For each assignment after the first, the labels it changed over all
  /// shards; -1 where a shard could not compare (it had just moved, or
  /// count_label_changes is off).
  std::vector<int64_t> labels_changed;
  int64_t empty_cluster_events = 0;  ///< (iteration, cluster) pairs without weight, kept
  int shards = 0;                    ///< shards the points were split into
  int shard_moves = 0;               ///< shards loaded again on another replica after a failure
  int init_rounds = 0;               ///< k-means‖: sampling rounds run
  int64_t init_candidates = 0;  ///< k-means‖: the candidates k-means++ chose the k centers from
  // Wall-clock seconds of each phase.
  double load_seconds = 0, init_seconds = 0, labels_seconds = 0;
  std::vector<double> iteration_seconds;
};

// Copies points [first, first + count) of the dataset, row-major, into
// `values`; called from several threads at once.
using PointSource =
    std::function<absl::Status(int64_t first, int64_t count, std::vector<float>* values)>;

// Clusters n points in d dimensions read from `source` (each read once,
// unless a shard moves), starting from `initial` (d x k) if given, else from
// `options.seeding` over all of them. A replica
// that refuses its shard for lack of room ends the job with that
// RESOURCE_EXHAUSTED status (its message gives the numbers).
absl::StatusOr<ResidentJobResult> RunResidentJob(const ResidentJobOptions& options, int64_t n,
                                                 int d, const PointSource& source,
                                                 const std::optional<Matrix<float>>& initial);

// The replica addresses of a --server target: "host:port", a list
// "ipv4:a:p,b:q", or "dns:///name:port" resolved to every address it has.
absl::StatusOr<std::vector<std::string>> ReplicaAddresses(const std::string& target);

}  // namespace kmt

#endif  // KMT_CLIENT_RESIDENT_JOB_H_
