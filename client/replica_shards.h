// A resident job's shards held on replicas by this process: the points (and
// their weights, if they have them) split into contiguous shards, each
// loaded on one replica's Job stream (a ShardStream, client/shard_stream.h;
// several per replica with `streams_per_server`) and kept there for the
// job. A step's requests are
// written to every shard's stream before any answer is read, so the
// replicas compute at once. When a stream breaks (its replica died,
// restarted, or was drained: a draining replica ends each stream
// UNAVAILABLE at its next request) the shard is loaded on the live replica
// with the fewest shards, given back the seeding centers it had taken in,
// and asked the step again with the same centers, so the result does not
// change. The source (ShardSource) says the shards' kind: points read as
// float64 are loaded as float64 shards, points read as compressed sparse
// rows (CsrSource) as sparse shards (ShardChunk.points_csr), which travel
// and are held as their nonzeros.
#ifndef KMT_CLIENT_REPLICA_SHARDS_H_
#define KMT_CLIENT_REPLICA_SHARDS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/shard_set.h"
#include "client/shard_stream.h"
#include "proto/raw_payload.h"
#include "proto/transport_security.h"

namespace kmt {

struct ReplicaShardOptions {
  std::vector<std::string> servers;  ///< replica addresses, host:port; one channel each
  int streams_per_server = 1;        ///< shards (and streams) per replica
  /// Per-point weights (n values, finite, >= 0, not all 0) in the points'
  /// precision; empty: 1 each.
  PointWeights weights;
  /// The shards keep their last labels (4 bytes per point on the replicas)
  /// to count each iteration's label changes, so that a run stopped by an
  /// unchanged assignment says so.
  bool count_label_changes = true;
  /// How float32 points travel: RawType::kFloat32, or kFloat16 (kBFloat16)
  /// for points that are binary16 (bfloat16) values, read widened from the
  /// source and sent in two bytes a value. Float64 points travel as float64.
  RawType points_type = RawType::kFloat32;
  /// d values the replicas subtract from every float32 point as it arrives
  /// (ShardChunk.points_offset), in float32: the points are sent unshifted,
  /// as narrow points must be. Empty: none. Only with a narrow points_type:
  /// a server that predates the field would ignore it, but not the narrow
  /// points it cannot read (its shard never fills, and the job fails).
  std::vector<float> points_offset;
  /// Read each shard's moments at its first load, for MeanVariance (of the
  /// points shifted by points_offset, as the replicas hold them).
  bool moments = false;
  /// Points per shard message, in bytes: of the dense values, or of a
  /// sparse chunk's offsets, columns and nonzero values.
  int64_t chunk_bytes = 4 << 20;
  /// Dense points sent as they are (float32 or float64, no points_type) go
  /// to a replica on this machine (IsLocalTarget) through a memory file the
  /// server copies them from (ShardChunk.points_shared), chunk_bytes at a
  /// time, four chunks in the file at once, instead of over the wire; where
  /// the replica refuses them they go over the wire (and `log` says why).
  /// False: always over the wire.
  bool shared_points = true;
  /// Moves of any one shard after failures before the job fails; a replica
  /// that fails (or is drained) moves each of its shards once, however many
  /// it holds.
  int max_moves = 3;
  absl::Duration stream_timeout = absl::InfiniteDuration();  ///< deadline of each stream
  ChannelSecurity security;  ///< TLS settings (proto/transport_security.h); plaintext by default
  /// Called with a line of news (a shard moved), if set.
  std::function<void(const std::string&)> log;
};

class ReplicaShards : public ShardSet {
 public:
  ~ReplicaShards() override;

  // Splits n points in d dimensions read from `source` (each read once,
  // unless a shard moves) into shards and loads them all at once: float32
  // or float64 shards (their weights, if any, in the same precision), dense
  // or sparse (n is then source.indptr.size() - 1) as the source is. A
  // replica that refuses its shard for lack of room fails the load with
  // that RESOURCE_EXHAUSTED status (its message gives the numbers).
  static absl::StatusOr<std::unique_ptr<ReplicaShards>> Load(ReplicaShardOptions options, int64_t n,
                                                             int d, ShardSource source);

  std::vector<int64_t> Sizes() const override;
  absl::StatusOr<std::vector<v1::JobResponse>> Round(
      const std::vector<std::optional<v1::JobRequest>>& requests) override;
  absl::Status Restart() override;
  int moves() const override;
  bool runs_steps_in_place() const override { return true; }

  // The points' mean per-dimension variance, their moments merged in shard
  // order (needs `moments`).
  double MeanVariance() const;

 private:
  class Impl;
  explicit ReplicaShards(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The replica addresses of a --server target: "host:port", a list
// "ipv4:a:p,b:q", or "dns:///name:port" resolved to every address it has.
absl::StatusOr<std::vector<std::string>> ReplicaAddresses(const std::string& target);

}  // namespace kmt

#endif  // KMT_CLIENT_REPLICA_SHARDS_H_
