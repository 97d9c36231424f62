#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "base/memory.h"
#include "core/simd.h"
#include "proto/channel_tuning.h"
#include "server/admission.h"
#include "server/cluster_service.h"
#include "server/listen_address.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/model_registry.h"
#include "server/model_reloader.h"
#include "server/resident_memory.h"
#include "server/worker_pool.h"

namespace kmt {
namespace {

// Writes a bound port for whoever started the server (tests, scripts); the
// line ends with a newline only once complete.
void WriteNumber(const std::string& path, int number) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << number << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

// Every thread this one creates from now on inherits SCHED_BATCH: it gets
// the same CPU share as under SCHED_OTHER, but waking up does not preempt a
// running thread. With the workers created before, this keeps gRPC's
// threads from interrupting a batch each time a chunk of the next one
// arrives, which cost about 10 context switches per batch and cache misses
// when every core computes (docs/service.md).
void NetworkThreadsWaitForWorkers() {
  const sched_param param{};
  if (sched_setscheduler(0, SCHED_BATCH, &param) != 0) {
    Log("WARNING", absl::StrCat("cannot set SCHED_BATCH for network threads (",
                                std::strerror(errno), "); they may preempt workers"));
  }
}

// How long an idle server's unary calls in flight may take once it stops.
constexpr absl::Duration kIdleGrace = absl::Milliseconds(100);

sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

// Takes SIGTERM or SIGINT (blocked, so pending until taken) and returns its
// number, or 0 if none came by `deadline`.
int WaitForStopSignal(const sigset_t& signals, absl::Time deadline) {
  while (true) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    const timespec timeout = absl::ToTimespec(std::min(left, absl::Hours(1)));
    const int signal = sigtimedwait(&signals, nullptr, &timeout);
    if (signal > 0) return signal;
    if (errno == EAGAIN && absl::Now() >= deadline) return 0;
  }
}

// A second stop signal while draining: the operator wants the process gone
// now, and the streams still open break as if it had died. The exit code
// tells a drain cut short from a completed one (0), as a shell reports a
// process ended by that signal.
[[noreturn]] void StopNow(int signal) {
  Log("WARNING", absl::StrCat("signal ", signal, " again: stopping now, open streams are cut off"));
  std::_Exit(128 + signal);
}

// One line for an address the server cannot listen on: the flag and its
// value when the address is malformed, else the address and the cause.
absl::Status CannotListen(absl::string_view flag, absl::string_view action,
                          const std::string& address, const absl::Status& cause) {
  if (absl::IsInvalidArgument(cause)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", address, " ", cause.message()));
  }
  return absl::Status(cause.code(), absl::StrCat(action, " ", address, ": ", cause.message()));
}

// The user's mistakes that would otherwise surface late, or as a listener
// library's errors: each stops the server before anything starts.
absl::Status CheckOptions(const ServerOptions& options) {
  if (absl::Status dir = CheckModelDirectory(options.model_dir); !dir.ok()) {
    return absl::Status(dir.code(),
                        absl::StrCat("--model_dir=", options.model_dir, ": ", dir.message(),
                                     "; an empty --model_dir= serves the exact models only"));
  }
  if (absl::Status grpc = CheckCanListen(options.listen, options.allow_port_sharing); !grpc.ok()) {
    return CannotListen("--listen", "cannot listen on", options.listen, grpc);
  }
  if (absl::Status metrics = CheckCanListen(options.metrics_listen, /*share_port=*/false);
      !metrics.ok()) {
    return CannotListen("--metrics_listen", "cannot serve metrics on", options.metrics_listen,
                        metrics);
  }
  if (options.model_poll_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model_poll_s=", options.model_poll_s, " is negative; 0 turns polling off"));
  }
  if (options.keep_versions < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--keep_versions=", options.keep_versions,
                                                   " is negative; 0 serves every version"));
  }
  if (options.model_control && !options.tls.cert_file.empty() &&
      (options.tls.client_ca_file.empty() || options.model_control_clients.empty())) {
    return absl::InvalidArgumentError(
        "--model_control over TLS allows only the client certificates --model_control_clients "
        "names, which needs mutual TLS (--tls_client_ca) and at least one name");
  }
  return absl::OkStatus();
}

}  // namespace

void BlockStopSignals() {
  const sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

absl::Status RunServer(const ServerOptions& options, const std::string& version) {
  // Signals are taken by this thread with sigtimedwait (blocked in every
  // other, which inherit the mask from this one), so shutdown runs as
  // ordinary code, not in a handler.
  BlockStopSignals();
  const sigset_t signals = StopSignals();
  if (absl::Status checked = CheckOptions(options); !checked.ok()) return checked;

  // The first scan before anything listens: readiness waits for it.
  ModelRegistry registry(options.model_dir, options.keep_versions);
  const ScanReport first = registry.Scan();
  for (const std::string& name : options.require_models) {
    if (absl::StatusOr<std::shared_ptr<const RegistryEntry>> model = registry.Resolve(name, 0);
        !model.ok()) {
      for (const auto& [line, reason] : first.refused) Log("ERROR", "refused " + line);
      return absl::FailedPreconditionError(
          absl::StrCat("--require_models: ", model.status().message()));
    }
  }

  Limits limits = options.limits;
  const int64_t usable = UsableMemoryBytes();
  limits.max_resident_bytes = ResidentCap(limits.max_resident_bytes, usable);
  const absl::StatusOr<int64_t> held =
      HeldBudget(limits.max_held_bytes, limits.max_resident_bytes, usable);
  if (!held.ok()) return held.status();
  limits.max_held_bytes = *held;
  const int workers = std::max(1, options.workers);
  // The workers first: they keep the process's scheduling policy; the
  // threads started after them may not (NetworkThreadsWaitForWorkers).
  WorkerPool pool(workers, std::max(1, options.threads_per_batch));
  if (!options.io_preempts_workers) NetworkThreadsWaitForWorkers();
  absl::StatusOr<std::unique_ptr<Metrics>> metrics =
      Metrics::Start(options.metrics_listen, registry, version);
  if (!metrics.ok()) return metrics.status();
  WriteNumber(options.metrics_port_file, (*metrics)->port());
  ModelReloader reloader(&registry, metrics->get());
  reloader.Published(first);
  ModelControl control{
      .enabled = options.model_control,
      .clients = {options.model_control_clients.begin(), options.model_control_clients.end()},
      .tls = !options.tls.cert_file.empty()};
  ClusterService service(&registry, limits, &pool, metrics->get(),
                         std::max(1, options.max_in_flight_per_stream), options.drain_linger,
                         std::move(control), &reloader);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  ServerTls tls = options.tls;
  tls.refresh_seconds = std::max(1, tls.refresh_seconds);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentials(tls);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(options.listen, *credentials, &port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(-1);
  ApplyChannelTuning(&builder);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, options.allow_port_sharing ? 1 : 0);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    // CheckOptions bound the address a moment ago: another process took it
    // since, or gRPC refused what a plain socket accepts (its log says why).
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, ": gRPC could not bind the address"));
  }
  reloader.SetHealth(server->GetHealthCheckService());
  server->GetHealthCheckService()->SetServingStatus(v1::KMeansTransformer::service_full_name(),
                                                    true);
  reloader.StartPolling(absl::Seconds(options.model_poll_s));
  WriteNumber(options.port_file, port);
  Log("INFO", absl::StrCat("serving ", registry.models().size(), " models on port ", port,
                           ", metrics on port ", (*metrics)->port(), ", with ", workers,
                           " workers; resident jobs may hold ", limits.max_resident_bytes,
                           " bytes, requests not yet answered ", limits.max_held_bytes, " bytes; ",
                           DescribeSimd()));

  // Signals are taken here, in order: the first starts the drain, a second
  // ends the process whatever is left.
  const int signal = WaitForStopSignal(signals, absl::InfiniteFuture());
  reloader.Stop();
  server->GetHealthCheckService()->SetServingStatus(false);
  absl::Duration grace = options.shutdown_grace;
  if (service.Idle()) {
    // Nothing to drain: no delay for load balancers, and the connections
    // clients keep open are closed, not taken through HTTP/2's graceful
    // GOAWAY, which takes seconds; a unary call in flight (a health check,
    // ListModels) has a moment to be answered.
    Log("INFO", absl::StrCat("signal ", signal, ": no stream open, stopping"));
    grace = std::min(grace, kIdleGrace);
  } else {
    Log("INFO", absl::StrCat("signal ", signal, ": NOT_SERVING; draining in ",
                             absl::FormatDuration(options.not_serving_delay), ", for up to ",
                             absl::FormatDuration(grace), "; a second signal stops at once"));
    if (const int again = WaitForStopSignal(signals, absl::Now() + options.not_serving_delay)) {
      StopNow(again);
    }
  }
  service.StartDraining();
  std::atomic<bool> drained{false};
  std::thread shutdown([&] {
    server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    drained = true;
  });
  while (!drained) {
    if (const int again = WaitForStopSignal(signals, absl::Now() + absl::Milliseconds(20))) {
      StopNow(again);
    }
  }
  shutdown.join();
  server->Wait();
  Log("INFO", "stopped");
  return absl::OkStatus();
}

}  // namespace kmt
