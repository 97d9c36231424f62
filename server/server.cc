#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/memory.h"
#include "core/simd.h"
#include "proto/channel_tuning.h"
#include "server/cluster_service.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/model_registry.h"
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

sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

}  // namespace

void BlockStopSignals() {
  const sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

absl::Status RunServer(const ServerOptions& options, const std::string& version) {
  // Signals are taken by one thread with sigwait (blocked in every other,
  // which inherit the mask from this one), so shutdown runs as ordinary
  // code, not in a handler.
  BlockStopSignals();
  const sigset_t signals = StopSignals();

  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load(options.model_dir, &refused);
  for (const std::string& line : refused) Log("ERROR", "refused " + line);

  Limits limits = options.limits;
  limits.max_resident_bytes = ResidentCap(limits.max_resident_bytes, UsableMemoryBytes());
  const int workers = std::max(1, options.workers);
  // The workers first: they keep the process's scheduling policy; the
  // threads started after them may not (NetworkThreadsWaitForWorkers).
  WorkerPool pool(workers, std::max(1, options.threads_per_batch));
  if (!options.io_preempts_workers) NetworkThreadsWaitForWorkers();
  absl::StatusOr<std::unique_ptr<Metrics>> metrics =
      Metrics::Start(options.metrics_listen, registry, version);
  if (!metrics.ok()) return metrics.status();
  WriteNumber(options.metrics_port_file, (*metrics)->port());
  ClusterService service(&registry, limits, &pool, metrics->get(),
                         std::max(1, options.max_in_flight_per_stream), options.drain_linger);

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
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen,
                     ": the port is in use by another process or the address is not one of this "
                     "machine's (--allow_port_sharing lets servers share a port)"));
  }
  server->GetHealthCheckService()->SetServingStatus(v1::KMeansTransformer::service_full_name(),
                                                    true);
  WriteNumber(options.port_file, port);
  Log("INFO", absl::StrCat("serving ", registry.models().size(), " models on port ", port,
                           ", metrics on port ", (*metrics)->port(), ", with ", workers,
                           " workers; resident jobs may hold ", limits.max_resident_bytes,
                           " bytes; ", DescribeSimd()));

  std::thread stopper([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    Log("INFO", absl::StrCat("signal ", signal, ": NOT_SERVING; draining in ",
                             absl::FormatDuration(options.not_serving_delay), ", for up to ",
                             absl::FormatDuration(options.shutdown_grace)));
    server->GetHealthCheckService()->SetServingStatus(false);
    absl::SleepFor(options.not_serving_delay);
    service.StartDraining();
    server->Shutdown(absl::ToChronoTime(absl::Now() + options.shutdown_grace));
  });
  server->Wait();
  stopper.join();
  Log("INFO", "stopped");
  return absl::OkStatus();
}

}  // namespace kmt
