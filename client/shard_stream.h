// One shard of a resident job on one replica: its Job stream, the load of
// its points in chunks with their acknowledgements (through a memory file
// to a replica on this machine, else over the wire), the replay of the
// seeding steps it had taken in before it moved, its steps, and the rule
// that tells a replica's failure from the job's own errors (ReplicaGone).
// ReplicaShards (replica_shards.h) holds one a shard and places them on the
// replicas; kmt.dask's workers hold theirs through the Python extension
// (kmt._driver.Replica.load).
#ifndef KMT_CLIENT_SHARD_STREAM_H_
#define KMT_CLIENT_SHARD_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/point_moments.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/raw_payload.h"
#include "proto/transport_security.h"

namespace kmt {

// Per-point weights in the precision of the points they weigh: float for
// float32 points, double for float64 ones. Empty: every weight 1.
using PointWeights = std::variant<std::vector<float>, std::vector<double>>;
// Whether `weights` holds any.
bool HasWeights(const PointWeights& weights);
// The weights if they are in Scalar's precision, else null.
template <typename Scalar>
const std::vector<Scalar>* WeightsIn(const PointWeights& weights) {
  return std::get_if<std::vector<Scalar>>(&weights);
}

// Copies points [first, first + count) of the dataset, row-major, into
// `out` (count * d values: a chunk's buffer, or a memory file the replica
// reads them from); called from several threads at once.
using PointSource = std::function<absl::Status(int64_t first, int64_t count, float* out)>;
// The same for float64 points.
using PointSource64 = std::function<absl::Status(int64_t first, int64_t count, double* out)>;

// Rows of a sparse dataset as compressed sparse rows (scipy.sparse's
// canonical CSR): row i's nonzeros at indptr[i] .. indptr[i + 1] of indices
// and values, indptr from 0, columns strictly increasing within a row.
template <typename Scalar>
struct CsrRows {
  std::vector<int64_t> indptr;   ///< rows + 1 offsets, the first 0
  std::vector<int32_t> indices;  ///< the columns, in [0, d)
  std::vector<Scalar> values;    ///< the nonzero values, finite
};

// Sparse points: `indptr`, the n + 1 offsets of the whole dataset's rows
// (the first 0), sizes the chunks by their nonzeros and gives each shard's
// nonzero count before its first chunk; `rows` copies rows [first, first +
// count) into `out` (empty when called), their indptr from 0. Called from
// several threads at once.
template <typename Scalar>
struct CsrSource {
  std::vector<int64_t> indptr;
  std::function<absl::Status(int64_t first, int64_t count, CsrRows<Scalar>* out)> rows;
};

// Where a job's points come from, which also decides its shards' kind:
// dense float32 or float64, sparse float32 or float64.
using ShardSource = std::variant<PointSource, PointSource64, CsrSource<float>, CsrSource<double>>;
// Whether the source's points are float64; sparse.
bool IsFloat64(const ShardSource& source);
bool IsSparse(const ShardSource& source);

// How a job's shards are loaded, the same for each of them.
struct ShardLoadOptions {
  int d = 0;
  /// Per-point weights of the whole source (n values) in the points'
  /// precision; empty: 1 each.
  PointWeights weights;
  /// The shard keeps its last labels to count each step's label changes.
  bool count_label_changes = true;
  /// How float32 points travel: RawType::kFloat32, or kFloat16 (kBFloat16)
  /// for points that are binary16 (bfloat16) values, read widened from the
  /// source and sent in two bytes a value.
  RawType points_type = RawType::kFloat32;
  /// d values the replica subtracts from every float32 point as it arrives
  /// (ShardChunk.points_offset); only with a narrow points_type.
  std::vector<float> points_offset;
  /// Points per chunk, in bytes: of the dense values, or of a sparse
  /// chunk's offsets, columns and nonzero values.
  int64_t chunk_bytes = 4 << 20;
  /// Dense points sent as they are go to a replica on this machine
  /// (IsLocalTarget) through a memory file (proto/shared_points.h); where
  /// the replica refuses them they go over the wire on a new stream, and
  /// `log` says why.
  bool shared_points = true;
  absl::Duration stream_timeout = absl::InfiniteDuration();  ///< each stream's deadline
  std::function<void(const std::string&)> log;               ///< news, if set
};

// One shard's place in its source and what it had taken in.
struct ShardPlace {
  int64_t first = 0;  ///< its first point in the source
  int64_t count = 0;  ///< its points, at least 1
  /// The seeding steps whose centers it had taken into its distances
  /// (KeepForReplay's), replayed after the load.
  const std::vector<v1::JobRequest>* replays = nullptr;
  /// If set, the moments of its points as the replica holds them (shifted
  /// by points_offset) are added here as they are read.
  PointMoments* moments = nullptr;
};

// Whether `status`, the failure of a shard's load or step, says that its
// replica is gone: its stream broke with a code that a replica that died,
// restarted or is draining (a drained replica ends each job stream
// UNAVAILABLE at its next request) gives: UNAVAILABLE, CANCELLED, ABORTED,
// UNKNOWN or INTERNAL. A failure to read the points (the source's), an error
// the replica answered, and RESOURCE_EXHAUSTED (a replica without room, or
// asking its clients to back off: it is up and says so) are the job's own.
bool ReplicaGone(const absl::Status& status);

// A seeding step that took centers in, kept to be replayed on the shard if
// it moves: its add_centers alone, in the same groups, so that the
// distances come back to the bit. Other requests add nothing.
void KeepForReplay(const v1::JobRequest& request, std::vector<v1::JobRequest>* replays);

// A stub for the replica at `address`, on a channel of its own without
// message size limits (a step carries the k x d centers; the replica's own
// limit applies).
std::unique_ptr<v1::KMeansTransformer::Stub> ReplicaStub(const std::string& address,
                                                         const ChannelSecurity& security);

class ShardStream {
 public:
  // Opens a Job stream on `stub` (the replica at `address`) and loads the
  // shard: its points read from `source` in chunks, through a memory file
  // where the replica is on this machine and takes them (else over the wire
  // on a new stream), their acknowledgements read a few chunks behind, then
  // its replays. A failure that ReplicaGone calls the replica's leaves the
  // replica for the caller to give up.
  static absl::StatusOr<std::unique_ptr<ShardStream>> Load(v1::KMeansTransformer::Stub* stub,
                                                           const std::string& address,
                                                           const ShardSource& source,
                                                           const ShardLoadOptions& options,
                                                           const ShardPlace& place);
  // Ends the job on the replica (its shard is freed) unless the stream
  // broke: the writes end (EndWrites) and the replica's status is read, so
  // that a job that ended as its client intended ends OK there, not
  // CANCELLED. A stream with a request unanswered, or whose status does not
  // come within 10 s, is cancelled.
  ~ShardStream();
  ShardStream(const ShardStream&) = delete;
  ShardStream& operator=(const ShardStream&) = delete;

  // A step's request, written before any answer is read: a step's requests
  // go to every shard before the first answer is read, so the replicas
  // compute at once.
  absl::Status Send(const v1::JobRequest& request);
  // The next step's response, its labels gathered from the responses that
  // follow it. A step's error arrives inside it; a broken stream as the
  // status, which ReplicaGone reads.
  absl::StatusOr<v1::JobResponse> Receive();
  // Ends the writes; the replica then ends the job. Ending many streams'
  // writes before destroying them closes them all in one round trip.
  void EndWrites();

  // What the load sent: its chunks, their bytes and the largest one's
  // (ShardChunks', serialized).
  int64_t chunks() const { return chunks_; }
  int64_t chunk_bytes_sent() const { return chunk_bytes_sent_; }
  int64_t largest_chunk_bytes() const { return largest_chunk_bytes_; }

 private:
  ShardStream(v1::KMeansTransformer::Stub* stub, absl::Duration timeout);
  absl::Status Fail();

  grpc::ClientContext context_;
  int64_t unanswered_ = 0;  // requests written whose response is not read
  bool writes_done_ = false;
  int64_t chunks_ = 0, chunk_bytes_sent_ = 0, largest_chunk_bytes_ = 0;
  std::unique_ptr<grpc::ClientReaderWriter<v1::JobRequest, v1::JobResponse>> stream_;
  absl::Status failure_;

  friend class ShardLoader;
};

}  // namespace kmt

#endif  // KMT_CLIENT_SHARD_STREAM_H_
