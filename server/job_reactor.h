// A resident job (the Job RPC) on gRPC's callback API: one request at a time
// is read, computed and answered. Shard chunks are copied on the thread that
// read them; steps run on the worker pool, as batches do. The shard lives as
// long as the reactor, so its memory is given back however the stream ends.
#ifndef KMT_SERVER_JOB_REACTOR_H_
#define KMT_SERVER_JOB_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <vector>

#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/reactor_order.h"
#include "server/limits.h"
#include "server/metrics.h"
#include "server/resident_memory.h"
#include "server/resident_shard.h"
#include "server/worker_pool.h"

namespace kmt {

// What every job of a server shares.
struct JobEnvironment {
  Limits limits;
  WorkerPool* pool;
  Metrics* metrics;
  ResidentMemory* memory;
  const std::atomic<bool>* draining;  ///< set: new requests are answered UNAVAILABLE
  std::atomic<int>* open_streams;     ///< streams not yet done, each job counted once
};

class JobReactor final : public grpc::ServerBidiReactor<v1::JobRequest, v1::JobResponse> {
 public:
  JobReactor(const JobEnvironment* environment, grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  // A cancelled call may leave a pending read without a reaction until the
  // call is finished: with only a read pending (no step, no write), finish.
  void OnCancel() override;
  void OnDone() override;

 private:
  // Runs a step on the shard and writes its response; on a worker.
  void Step();
  // Finishes the call, once.
  void End(const absl::Status& status);
  // Starts the next read, unless the call has ended.
  void Read();
  // Starts writing response_.
  void Write();
  // Puts the step's next labels, at most kLabelsPerResponse, into
  // response_, as the step asked (repeated or raw), and how many follow.
  void PutLabels();

  const JobEnvironment* const env_;
  grpc::CallbackServerContext* const context_;
  const std::chrono::system_clock::time_point arrived_ = std::chrono::system_clock::now();
  std::optional<ResidentShard> shard_;
  v1::JobRequest request_;
  v1::JobResponse response_;
  // A step's labels, written kLabelsPerResponse at a time before the next
  // read; raw_labels_: as int32 bytes.
  static constexpr int kLabelsPerResponse = 1 << 20;
  std::vector<int32_t> labels_;
  size_t labels_sent_ = 0;
  bool raw_labels_ = false;
  ReactorOrder order_;

  std::mutex mu_;
  bool reading_ = false;  // a read is pending and nothing else is in flight
  bool ended_ = false;    // Finish was called
};

}  // namespace kmt

#endif  // KMT_SERVER_JOB_REACTOR_H_
