// kmt-server: serves k-means transformers over gRPC (kmt.v1.KMeansTransformer,
// grpc.health.v1, reflection). SIGTERM or SIGINT: health turns NOT_SERVING,
// new batches are answered UNAVAILABLE, accepted ones finish within the
// grace period, then the process exits 0.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <sched.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/allocator.h"
#include "base/command_line.h"
#include "base/cpus.h"
#include "base/memory.h"
#include "proto/channel_tuning.h"
#include "proto/transport_security.h"
#include "server/cluster_service.h"
#include "server/limits.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/model_registry.h"
#include "server/resident_memory.h"
#include "server/worker_pool.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051", "gRPC listen address (port 0 picks a free one)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve TLS (with --tls_key); the files are watched, so a "
          "rotated certificate is served without a restart");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA: require every client to present a certificate it signed (mutual TLS)");
ABSL_FLAG(int, tls_refresh_seconds, 10, "how often the TLS files are read again");
ABSL_FLAG(bool, allow_port_sharing, false,
          "let several processes listen on the same gRPC port (SO_REUSEPORT), splitting the "
          "connections between them; by default a port in use is an error at start");
ABSL_FLAG(std::string, port_file, "", "if set, the bound gRPC port is written to this file");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:9464",
          "Prometheus /metrics address (port 0 picks a free one)");
ABSL_FLAG(std::string, metrics_port_file, "",
          "if set, the bound metrics port is written to this file");
ABSL_FLAG(std::string, model_dir, "models", "directory of learned model files (*.kmt)");
ABSL_FLAG(int64_t, max_points, kmt::Limits{}.max_points, "most points in one batch");
ABSL_FLAG(int, max_d, kmt::Limits{}.max_d, "most dimensions");
ABSL_FLAG(int, max_k, kmt::Limits{}.max_k, "most clusters");
ABSL_FLAG(int, max_iterations, kmt::Limits{}.max_iterations, "most layers (iterations) per batch");
ABSL_FLAG(int64_t, max_dense_points, kmt::Limits{}.max_dense_points,
          "most points for runs of the O(n^2) dense evaluator (softmax beta, learned models)");
ABSL_FLAG(int64_t, max_resident_bytes, kmt::Limits{}.max_resident_bytes,
          "most bytes the shards of resident jobs (Job streams) may hold at once; 0: a share of "
          "the memory this process may use (its cgroup's limit, else the machine's)");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "largest request message accepted");
ABSL_FLAG(int, workers, kmt::UsableCpus(),
          "batches computed at once (default: the CPUs this process may run on)");
ABSL_FLAG(int, threads_per_batch, 1, "threads one batch may use");
ABSL_FLAG(bool, io_preempts_workers, false,
          "let the threads doing network I/O (gRPC's, the metrics server's) preempt a worker "
          "computing a batch; by default they run under SCHED_BATCH: the same CPU share, but "
          "data arriving waits for the worker's time slice instead of interrupting it");
ABSL_FLAG(int, max_in_flight_per_stream, 16, "batches a stream may have read and not yet answered");
ABSL_FLAG(absl::Duration, not_serving_delay, absl::Seconds(2),
          "after SIGTERM, how long health reports NOT_SERVING while batches are still "
          "taken, so that load balancers stop sending before the server stops taking");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(30),
          "after that, how long accepted batches may take to finish");
ABSL_FLAG(absl::Duration, drain_linger, absl::Seconds(1),
          "while draining, how long a stream whose batches are all answered waits before "
          "ending, so the client reads the last answers before gRPC closes the connection");

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

int Serve() {
  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load(absl::GetFlag(FLAGS_model_dir), &refused);
  for (const std::string& line : refused) Log("ERROR", "refused " + line);

  const Limits limits{.max_points = absl::GetFlag(FLAGS_max_points),
                      .max_d = absl::GetFlag(FLAGS_max_d),
                      .max_k = absl::GetFlag(FLAGS_max_k),
                      .max_iterations = absl::GetFlag(FLAGS_max_iterations),
                      .max_dense_points = absl::GetFlag(FLAGS_max_dense_points),
                      .max_resident_bytes = ResidentCap(absl::GetFlag(FLAGS_max_resident_bytes),
                                                        UsableMemoryBytes())};
  // The workers first: they keep the process's scheduling policy; the
  // threads started after them may not (NetworkThreadsWaitForWorkers).
  WorkerPool pool(std::max(1, absl::GetFlag(FLAGS_workers)),
                  std::max(1, absl::GetFlag(FLAGS_threads_per_batch)));
  if (!absl::GetFlag(FLAGS_io_preempts_workers)) NetworkThreadsWaitForWorkers();
  absl::StatusOr<std::unique_ptr<Metrics>> metrics =
      Metrics::Start(absl::GetFlag(FLAGS_metrics_listen), registry, KMT_VERSION);
  if (!metrics.ok()) {
    Log("ERROR", std::string(metrics.status().message()));
    return 1;
  }
  WriteNumber(absl::GetFlag(FLAGS_metrics_port_file), (*metrics)->port());
  ClusterService service(&registry, limits, &pool, metrics->get(),
                         std::max(1, absl::GetFlag(FLAGS_max_in_flight_per_stream)),
                         absl::GetFlag(FLAGS_drain_linger));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentials({.cert_file = absl::GetFlag(FLAGS_tls_cert),
                         .key_file = absl::GetFlag(FLAGS_tls_key),
                         .client_ca_file = absl::GetFlag(FLAGS_tls_client_ca),
                         .refresh_seconds = std::max(1, absl::GetFlag(FLAGS_tls_refresh_seconds))});
  if (!credentials.ok()) {
    Log("ERROR", std::string(credentials.status().message()));
    return 1;
  }
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), *credentials, &port);
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.SetMaxSendMessageSize(-1);
  ApplyChannelTuning(&builder);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT,
                             absl::GetFlag(FLAGS_allow_port_sharing) ? 1 : 0);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    Log("ERROR", absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_listen),
                              ": the port is in use by another process or the address is not "
                              "one of this machine's (--allow_port_sharing lets servers share a "
                              "port)"));
    return 1;
  }
  server->GetHealthCheckService()->SetServingStatus(v1::KMeansTransformer::service_full_name(),
                                                    true);
  WriteNumber(absl::GetFlag(FLAGS_port_file), port);
  Log("INFO", absl::StrCat("serving ", registry.models().size(), " models on port ", port,
                           ", metrics on port ", (*metrics)->port(), ", with ",
                           absl::GetFlag(FLAGS_workers), " workers; resident jobs may hold ",
                           limits.max_resident_bytes, " bytes"));

  // Signals are taken by one thread with sigwait (blocked everywhere else,
  // see main), so shutdown runs as ordinary code, not in a handler.
  std::thread stopper([&] {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    int signal = 0;
    sigwait(&signals, &signal);
    const absl::Duration delay = absl::GetFlag(FLAGS_not_serving_delay);
    const absl::Duration grace = absl::GetFlag(FLAGS_shutdown_grace);
    Log("INFO",
        absl::StrCat("signal ", signal, ": NOT_SERVING; draining in ", absl::FormatDuration(delay),
                     ", for up to ", absl::FormatDuration(grace)));
    server->GetHealthCheckService()->SetServingStatus(false);
    absl::SleepFor(delay);
    service.StartDraining();
    server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  });
  server->Wait();
  stopper.join();
  Log("INFO", "stopped");
  return 0;
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::ParseCommandLine(
      "Serves k-means transformers over gRPC: exact Lloyd constructions for any\n"
      "(d, k) and the learned models in --model_dir.",
      argc, argv);
  kmt::KeepBatchMemory();
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return kmt::Serve();
}
