#include "server/metrics.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/simd.h"
#include "server/listen_address.h"
#include "server/process_metrics.h"

namespace kmt {
namespace {

// Batch latency, and its queue and compute parts: a small batch (512
// points, 20 layers) takes about 0.3 ms, a batch at the default limit (1M
// points, d = 32, k = 64, 20 layers) about a second, dense-evaluator runs and
// big k longer: 0.25 ms to 60 s, roughly x2.5 per bucket, so p50/p99 stay
// resolvable at either end.
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};

// Objective per point is a squared distance in the caller's units: data
// scaled to [0, 1] gives 1e-4..1, raw features anything, so the buckets span
// 1e-6 to 1e6 without assuming a scale. Ten per decade (each 1.26 times the
// last): histogram_quantile interpolates within a bucket, so a quantile
// reads within about 10% of the true one (with one per decade, p50 read up
// to 80% off on batches whose spread varies).
prometheus::Histogram::BucketBoundaries ObjectiveBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (int tenth = -60; tenth <= 60; ++tenth) buckets.push_back(std::pow(10.0, tenth / 10.0));
  return buckets;
}
const prometheus::Histogram::BucketBoundaries kObjectiveBuckets = ObjectiveBuckets();

// Layers run per batch: 0 is the assign path, 10-50 typical fits, up to the
// default limit of 1000.
const prometheus::Histogram::BucketBoundaries kLayerBuckets = {0,  1,   2,   5,   10,  20,
                                                               50, 100, 200, 500, 1000};

std::string CodeName(int code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// The canonical codes, OK (0) to UNAUTHENTICATED (16).
constexpr int kLastCode = static_cast<int>(absl::StatusCode::kUnauthenticated);

// CivetWeb's listener sees that it should stop only between two polls of
// its socket, each up to 2 s: connecting to the endpoint until it has
// stopped ends the wait, so a server with nothing left to do exits at once.
void KnockUntil(const std::string& listen, int port, const std::atomic<bool>& stopped) {
  const std::optional<HostPort> address = SplitHostPort(listen);
  if (!address) return;
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  if (getaddrinfo(address->host.c_str(), std::to_string(port).c_str(), &hints, &resolved) != 0) {
    return;
  }
  while (!stopped) {
    const int fd =
        socket(resolved->ai_family, resolved->ai_socktype | SOCK_CLOEXEC, resolved->ai_protocol);
    if (fd >= 0) {
      connect(fd, resolved->ai_addr, resolved->ai_addrlen);
      close(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  freeaddrinfo(resolved);
}

}  // namespace

Metrics::Metrics(const ModelRegistry& registry, const std::string& listen)
    : models_(registry),
      listen_(listen),
      registry_(std::make_shared<prometheus::Registry>()),
      process_(std::make_shared<ProcessCollector>()) {
  latency_ = &prometheus::BuildHistogram()
                  .Name("kmt_request_duration_seconds")
                  .Help("Time from receiving a batch to its response being ready.")
                  .Register(*registry_);
  queue_ = &prometheus::BuildHistogram()
                .Name("kmt_queue_seconds")
                .Help(
                    "Time a successful batch waited for a worker after it was received, by "
                    "model and size class (small < 1 MiB <= medium < 16 MiB <= large).")
                .Register(*registry_);
  compute_ = &prometheus::BuildHistogram()
                  .Name("kmt_compute_seconds")
                  .Help(
                      "Time a worker spent on a successful batch: validation, "
                      "initialisation and the layers.")
                  .Register(*registry_);
  objective_ = &prometheus::BuildHistogram()
                    .Name("kmt_objective_per_point")
                    .Help("k-means objective of a batch's final centers, divided by its points.")
                    .Register(*registry_);
  layers_ = &prometheus::BuildHistogram()
                 .Name("kmt_layers")
                 .Help("Layers (Lloyd's iterations for exact models) run per batch.")
                 .Register(*registry_);
  batches_ = &prometheus::BuildCounter()
                  .Name("kmt_batches_total")
                  .Help("Batches answered, by model and status code.")
                  .Register(*registry_);
  points_ = &prometheus::BuildCounter()
                 .Name("kmt_points_total")
                 .Help("Points clustered in successful batches.")
                 .Register(*registry_);
  errors_ = &prometheus::BuildCounter()
                 .Name("kmt_errors_total")
                 .Help("Failed batches, by status code.")
                 .Register(*registry_);
  stream_ends_ = &prometheus::BuildCounter()
                      .Name("kmt_streams_total")
                      .Help("Cluster streams ended, by final status code.")
                      .Register(*registry_);
  guard_layers_ = &prometheus::BuildCounter()
                       .Name("kmt_guard_layers_total")
                       .Help(
                           "Layers of guarded runs of learned models, by the step each kept: "
                           "the learned one or the exact Lloyd's step.")
                       .Register(*registry_);
  guard_answers_ = &prometheus::BuildCounter()
                        .Name("kmt_guard_answers_total")
                        .Help(
                            "Guarded batches of learned models, by the trajectory that "
                            "answered: the learned one, or exact Lloyd's from the same initial "
                            "centers where it ended lower.")
                        .Register(*registry_);
  streams_ = &prometheus::BuildGauge()
                  .Name("kmt_streams_in_flight")
                  .Help("Cluster streams open now.")
                  .Register(*registry_)
                  .Add({});
  job_ends_ = &prometheus::BuildCounter()
                   .Name("kmt_jobs_total")
                   .Help("Resident-job streams ended, by final status code.")
                   .Register(*registry_);
  jobs_ = &prometheus::BuildGauge()
               .Name("kmt_jobs_in_flight")
               .Help("Resident jobs (Job streams) open now.")
               .Register(*registry_)
               .Add({});
  held_bytes_ = &prometheus::BuildGauge()
                     .Name("kmt_held_bytes")
                     .Help("Bytes of Cluster batches received and not yet answered.")
                     .Register(*registry_)
                     .Add({});
  held_budget_ = &prometheus::BuildGauge()
                      .Name("kmt_held_limit_bytes")
                      .Help("The budget on kmt_held_bytes (--max_held_bytes, resolved).")
                      .Register(*registry_)
                      .Add({});
  refused_ = &prometheus::BuildCounter()
                  .Name("kmt_refused_total")
                  .Help(
                      "Batches refused before reaching a worker, by reason: held_bytes (the "
                      "budget was full; the client was told when to send again), "
                      "larger_than_budget, draining.")
                  .Register(*registry_);
  for (const char* reason : kRefusalReasons) refused_->Add({{"reason", reason}});
  resident_bytes_ = &prometheus::BuildGauge()
                         .Name("kmt_resident_bytes")
                         .Help("Bytes the shards of resident jobs hold now.")
                         .Register(*registry_)
                         .Add({});
  {
    auto& points = prometheus::BuildCounter()
                       .Name("kmt_resident_points_bytes_total")
                       .Help(
                           "Bytes of resident shards' dense points taken, by how they came: "
                           "shared (read from a client's memory on this machine) or wire.")
                       .Register(*registry_);
    shared_points_bytes_ = &points.Add({{"via", "shared"}});
    wire_points_bytes_ = &points.Add({{"via", "wire"}});
  }
  resident_cap_ = &prometheus::BuildGauge()
                       .Name("kmt_resident_limit_bytes")
                       .Help("The cap on the bytes resident jobs' shards may hold.")
                       .Register(*registry_)
                       .Add({});
  models_loaded_ =
      &prometheus::BuildGauge()
           .Name("kmt_models_loaded")
           .Help("Models served (with a version available), by kind (exact or learned).")
           .Register(*registry_);
  model_versions_ = &prometheus::BuildGauge()
                         .Name("kmt_model_versions")
                         .Help(
                             "Versions of the model directory's models, by state: loading, "
                             "available, failed or retired.")
                         .Register(*registry_);
  default_version_ = &prometheus::BuildGauge()
                          .Name("kmt_model_default_version")
                          .Help(
                              "The version a request that names none runs, by model; 0 while "
                              "the model has no version available.")
                          .Register(*registry_);
  load_failures_ = &prometheus::BuildCounter()
                        .Name("kmt_model_load_failures_total")
                        .Help("Model files refused, by reason.")
                        .Register(*registry_);
  for (const char* reason : kLoadFailureReasons) load_failures_->Add({{"reason", reason}});
  model_loads_ = &prometheus::BuildCounter()
                      .Name("kmt_model_loads_total")
                      .Help("Model versions loaded from the model directory, new or replaced.")
                      .Register(*registry_)
                      .Add({});
  SetModels(registry);
  for (int code = 1; code <= kLastCode; ++code) errors_->Add({{"code", CodeName(code)}});
  for (const absl::StatusCode code :
       {absl::StatusCode::kOk, absl::StatusCode::kCancelled, absl::StatusCode::kDeadlineExceeded}) {
    stream_ends_->Add({{"code", CodeName(static_cast<int>(code))}});
  }
  // A Job stream ends with what ended it: besides those three, a shard the
  // cap refuses (RESOURCE_EXHAUSTED), a bad chunk, a draining server.
  for (int code = 0; code <= kLastCode; ++code) job_ends_->Add({{"code", CodeName(code)}});
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& listen,
                                                        const ModelRegistry& registry,
                                                        const std::string& version) {
  std::unique_ptr<Metrics> metrics(new Metrics(registry, listen));
  prometheus::BuildGauge()
      .Name("kmt_build_info")
      .Help("Always 1; the labels say which build is running.")
      .Register(*metrics->registry_)
      .Add({{"version", version}, {"simd", SimdChoiceName(ActiveSimdChoice())}})
      .Set(1);
  try {
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(listen);
  } catch (const std::exception&) {
    // RunServer bound the address a moment ago (CheckCanListen); what a
    // plain socket takes and CivetWeb refuses is mostly IPv6.
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen,
                     ": CivetWeb could not listen there (builds without IPv6 take IPv4 only)"));
  }
  metrics->exposer_->RegisterCollectable(metrics->registry_);
  metrics->exposer_->RegisterCollectable(metrics->process_);
  return metrics;
}

Metrics::~Metrics() {
  if (exposer_ == nullptr) return;
  std::atomic<bool> stopped{false};
  std::thread knock([&, port = port()] { KnockUntil(listen_, port, stopped); });
  exposer_.reset();
  stopped = true;
  knock.join();
}

int Metrics::port() const { return exposer_->GetListeningPorts().front(); }

void Metrics::RecordBatch(const v1::ClusterRequest& request, const v1::ClusterResponse& response,
                          double seconds) {
  const std::string model = models_.Known(request.model()) ? request.model() : "unknown";
  const std::string code = CodeName(response.error().code());
  latency_->Add({{"model", model}, {"code", code}}, kLatencyBuckets).Observe(seconds);
  batches_->Add({{"model", model}, {"code", code}}).Increment();
  if (response.has_error()) {
    errors_->Add({{"code", code}}).Increment();
    return;
  }
  queue_
      ->Add({{"model", model}, {"size", SizeClass(static_cast<int64_t>(request.ByteSizeLong()))}},
            kLatencyBuckets)
      .Observe(response.timing().queue_seconds());
  compute_->Add({{"model", model}}, kLatencyBuckets).Observe(response.timing().compute_seconds());
  points_->Add({{"model", model}}).Increment(static_cast<double>(request.n()));
  objective_->Add({{"model", model}}, kObjectiveBuckets)
      .Observe(response.objective() / static_cast<double>(request.n()));
  layers_->Add({{"model", model}}, kLayerBuckets).Observe(response.iterations_run());
  if (request.guard()) {
    guard_layers_->Add({{"model", model}, {"step", "learned"}})
        .Increment(response.guard_learned_layers());
    guard_layers_->Add({{"model", model}, {"step", "lloyd"}})
        .Increment(response.guard_lloyd_layers());
    guard_answers_
        ->Add({{"model", model},
               {"trajectory", response.guard_lloyd_answered() ? "lloyd" : "learned"}})
        .Increment();
  }
}

void Metrics::SetModels(const ModelRegistry& registry) {
  int exact = 0, learned = 0;
  for (const std::shared_ptr<const RegistryEntry>& m : registry.models()) {
    const std::string& name = m->info.name();
    ++(m->served<float>().exact() ? exact : learned);
    batches_->Add({{"model", name}, {"code", "OK"}});
    points_->Add({{"model", name}});
    if (m->served<float>().guarded_weights() != nullptr) {
      for (const char* step : {"learned", "lloyd"}) {
        guard_layers_->Add({{"model", name}, {"step", step}});
        guard_answers_->Add({{"model", name}, {"trajectory", step}});
      }
    }
  }
  models_loaded_->Add({{"kind", "exact"}}).Set(exact);
  models_loaded_->Add({{"kind", "learned"}}).Set(learned);
  const std::map<v1::ModelVersionState, int> counts = registry.VersionCounts();
  for (const v1::ModelVersionState state : {v1::MODEL_VERSION_LOADING, v1::MODEL_VERSION_AVAILABLE,
                                            v1::MODEL_VERSION_FAILED, v1::MODEL_VERSION_RETIRED}) {
    const auto count = counts.find(state);
    model_versions_->Add({{"state", std::string(VersionStateName(state))}})
        .Set(count == counts.end() ? 0 : count->second);
  }
  const v1::ListModelsResponse listed = registry.List();
  for (const v1::ModelInfo& m : listed.models()) {
    default_version_->Add({{"model", m.name()}}).Set(static_cast<double>(m.default_version()));
  }
  for (const v1::ModelInfo& m : listed.unavailable())
    default_version_->Add({{"model", m.name()}}).Set(0);
}

void Metrics::RecordLoadFailure(const std::string& reason) {
  load_failures_->Add({{"reason", reason}}).Increment();
}

void Metrics::RecordRefused(const std::string& reason) {
  refused_->Add({{"reason", reason}}).Increment();
}

const char* SizeClass(int64_t bytes) {
  if (bytes < (int64_t{1} << 20)) return "small";
  if (bytes < (int64_t{16} << 20)) return "medium";
  return "large";
}

void Metrics::RecordJobEnd(int code) { job_ends_->Add({{"code", CodeName(code)}}).Increment(); }

void Metrics::RecordStreamEnd(int code) {
  stream_ends_->Add({{"code", CodeName(code)}}).Increment();
}

}  // namespace kmt
