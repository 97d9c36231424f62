// The server's Prometheus metrics, served at /metrics on their own port.
// Names follow the Prometheus naming guide: one prefix (kmt_), base units,
// _total on counters; labels stay low-cardinality (model, code): a model
// name the server never listed is recorded as "unknown", and versions are
// never a label (kmt_model_default_version holds one number per model). The series alerts
// watch exist from the start at 0, so that rate() and increase() see the
// first event after a restart. Process metrics (CPU, memory, file
// descriptors, threads) come with them, under Prometheus's standard names.
#ifndef KMT_SERVER_METRICS_H_
#define KMT_SERVER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/kmeans_transformer.pb.h"
#include "server/model_registry.h"

namespace kmt {

// Why a batch was refused before it reached a worker: the budget of
// requests held was full (the client is told when to send it again), the
// batch alone is larger than that budget, or the server is draining.
inline constexpr const char* kRefusalReasons[] = {"held_bytes", "larger_than_budget", "draining"};

// The size class of a request of `bytes`, the `size` label of
// kmt_queue_seconds: "small" under 1 MiB (a few thousand points of low
// dimension), "medium" under 16 MiB, "large" up to the message limit.
const char* SizeClass(int64_t bytes);

class Metrics {
 public:
  // Starts the /metrics endpoint on `listen` ("host:port", port 0 picks one).
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const std::string& listen,
                                                        const ModelRegistry& registry,
                                                        const std::string& version);

  // Stops the endpoint, without waiting for its listener's next poll.
  ~Metrics();

  int port() const;

  // One answered batch: its response (with its queue and compute time) and
  // the seconds from receipt to answer.
  void RecordBatch(const v1::ClusterRequest& request, const v1::ClusterResponse& response,
                   double seconds);
  // A Cluster stream that ended with this status code (OK, or the deadline
  // or cancellation that ended it).
  void RecordStreamEnd(int code);
  void StreamStarted() { streams_->Increment(); }
  void StreamEnded() { streams_->Decrement(); }
  // Resident jobs: a Job stream that ended with this status code, open Job
  // streams, and the bytes their shards hold out of the server's cap.
  void RecordJobEnd(int code);
  void JobStarted() { jobs_->Increment(); }
  void JobEnded() { jobs_->Decrement(); }
  // The models served now, after a scan of the model directory: how many
  // by kind, the versions by state, each model's default version, and the
  // series alerts watch for models new since the last call.
  void SetModels(const ModelRegistry& registry);
  // A model file refused, by reason (kLoadFailureReasons); a version loaded.
  void RecordLoadFailure(const std::string& reason);
  void RecordModelLoaded() { model_loads_->Increment(); }
  // Admission (server/admission.h): the bytes requests not yet answered
  // hold out of the budget, and a batch refused, by reason
  // (kRefusalReasons).
  void SetHeldBytes(int64_t held, int64_t budget) {
    held_bytes_->Set(static_cast<double>(held));
    held_budget_->Set(static_cast<double>(budget));
  }
  void RecordRefused(const std::string& reason);
  // A chunk of a resident shard's dense points taken, by how it came:
  // "shared" (read from the client's memory, ShardChunk.points_shared) or
  // "wire" (in the message).
  void RecordPointsLoaded(bool shared, int64_t bytes) {
    (shared ? shared_points_bytes_ : wire_points_bytes_)->Increment(static_cast<double>(bytes));
  }
  void SetResidentBytes(int64_t held, int64_t cap) {
    resident_bytes_->Set(static_cast<double>(held));
    resident_cap_->Set(static_cast<double>(cap));
  }

 private:
  Metrics(const ModelRegistry& registry, const std::string& listen);

  const ModelRegistry& models_;
  const std::string listen_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> process_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Histogram>* queue_;
  prometheus::Family<prometheus::Histogram>* compute_;
  prometheus::Family<prometheus::Histogram>* objective_;
  prometheus::Family<prometheus::Histogram>* layers_;
  prometheus::Family<prometheus::Counter>* batches_;
  prometheus::Family<prometheus::Counter>* points_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Family<prometheus::Counter>* stream_ends_;
  prometheus::Family<prometheus::Counter>* guard_layers_;
  prometheus::Family<prometheus::Counter>* guard_answers_;
  prometheus::Gauge* streams_;
  prometheus::Gauge* jobs_;
  prometheus::Family<prometheus::Counter>* job_ends_;
  prometheus::Gauge* held_bytes_;
  prometheus::Gauge* held_budget_;
  prometheus::Family<prometheus::Counter>* refused_;
  prometheus::Gauge* resident_bytes_;
  prometheus::Gauge* resident_cap_;
  prometheus::Counter* shared_points_bytes_;
  prometheus::Counter* wire_points_bytes_;
  prometheus::Family<prometheus::Gauge>* models_loaded_;
  prometheus::Family<prometheus::Gauge>* model_versions_;
  prometheus::Family<prometheus::Gauge>* default_version_;
  prometheus::Family<prometheus::Counter>* load_failures_;
  prometheus::Counter* model_loads_;
};

}  // namespace kmt

#endif  // KMT_SERVER_METRICS_H_
