// The shards of one resident job as its driver (client/resident_job.h) sees
// them: contiguous parts of the dataset, each held on a replica's Job
// stream, asked one step at a time. Who holds a shard and how it comes back
// after a failure is the implementation's: gRPC streams opened by this
// process (client/replica_shards.h), or, from Python, streams held by Dask's
// workers (python/kmt/dask).
#ifndef KMT_CLIENT_SHARD_SET_H_
#define KMT_CLIENT_SHARD_SET_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

class ShardSet {
 public:
  virtual ~ShardSet() = default;

  // The points of each shard, in the dataset's order: shard s holds the
  // points that follow those of shards 0, ..., s - 1.
  virtual std::vector<int64_t> Sizes() const = 0;

  // One step: a request per shard (none where it is empty), every shard
  // asked at once; the answers in shard order (an empty answer where none
  // was asked). A shard that fails for its replica's sake is loaded again,
  // with the seeding centers it had taken in, and asked again, so that the
  // answers do not change; a step's own error is returned naming the shard.
  virtual absl::StatusOr<std::vector<v1::JobResponse>> Round(
      const std::vector<std::optional<v1::JobRequest>>& requests) = 0;

  // Every shard loaded afresh, with no seeding state: a new k-means++
  // starts from no chosen center.
  virtual absl::Status Restart() = 0;

  // Shards loaded again on another replica after a failure, so far.
  virtual int moves() const = 0;

  // Whether an assign step's labels stay where the shards are (Dask keeps
  // them on its workers): the driver then gathers none.
  virtual bool labels_stay() const { return false; }

  // Whether a shard takes the steps that run a whole loop where it is
  // (LloydStepsStep): the driver then asks a job held in one shard for
  // its Lloyd's iterations in one step.
  virtual bool runs_steps_in_place() const { return false; }
};

}  // namespace kmt

#endif  // KMT_CLIENT_SHARD_SET_H_
