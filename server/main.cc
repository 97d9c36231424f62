// kmt-server: serves k-means transformers over gRPC (kmt.v1.KMeansTransformer,
// grpc.health.v1, reflection). SIGTERM or SIGINT: health turns NOT_SERVING,
// new batches are answered UNAVAILABLE, accepted ones finish within the
// grace period, then the process exits 0; with no stream open it stops at
// once, and a second signal ends the drain (exit code 128 + the signal).
// The flags fill ServerOptions (server/server.h) here and are read nowhere
// else.
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "base/allocator.h"
#include "base/command_line.h"
#include "core/engine_flags.h"
#include "server/log.h"
#include "server/server.h"

ABSL_FLAG(std::string, listen, kmt::ServerOptions{}.listen,
          "gRPC listen address (port 0 picks a free one)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve TLS (with --tls_key); the files are watched, so a "
          "rotated certificate is served without a restart");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA: require every client to present a certificate it signed (mutual TLS)");
ABSL_FLAG(int, tls_refresh_seconds, kmt::ServerTls{}.refresh_seconds,
          "how often the TLS files are read again");
ABSL_FLAG(bool, allow_port_sharing, kmt::ServerOptions{}.allow_port_sharing,
          "let several processes listen on the same gRPC port (SO_REUSEPORT), splitting the "
          "connections between them; by default a port in use is an error at start");
ABSL_FLAG(std::string, port_file, "", "if set, the bound gRPC port is written to this file");
ABSL_FLAG(std::string, metrics_listen, kmt::ServerOptions{}.metrics_listen,
          "Prometheus /metrics address (port 0 picks a free one)");
ABSL_FLAG(std::string, metrics_port_file, "",
          "if set, the bound metrics port is written to this file");
ABSL_FLAG(std::string, model_dir, kmt::ServerOptions{}.model_dir,
          "directory of learned models: NAME/VERSION/model.kmt, or flat *.kmt files (version 1 "
          "of the model each names); one that does not exist is an error, empty serves the "
          "exact models only");
ABSL_FLAG(double, model_poll_s, kmt::ServerOptions{}.model_poll_s,
          "how often, in seconds, --model_dir is read again: new and changed model files load "
          "and removed ones retire without a restart; 0 reads it at start only");
ABSL_FLAG(int, keep_versions, kmt::ServerOptions{}.keep_versions,
          "serve only the latest N available versions of each model in --model_dir and retire "
          "older ones (their files are not read); 0 serves every version");
ABSL_FLAG(std::vector<std::string>, require_models, {},
          "comma-separated model names that must load at start, or the server does not start");
ABSL_FLAG(bool, model_control, kmt::ServerOptions{}.model_control,
          "serve the LoadModel and UnloadModel RPCs (with TLS only to the client certificates "
          "--model_control_clients names); by default they are refused");
ABSL_FLAG(std::vector<std::string>, model_control_clients, {},
          "comma-separated names (a subject alternative name or the common name) of the client "
          "certificates allowed to call LoadModel and UnloadModel under mutual TLS");
ABSL_FLAG(int64_t, max_points, kmt::Limits{}.max_points, "most points in one batch");
ABSL_FLAG(int, max_d, kmt::Limits{}.max_d, "most dimensions");
ABSL_FLAG(int, max_sparse_d, kmt::Limits{}.max_sparse_d,
          "most features of sparse points (points_csr), held as their nonzeros");
ABSL_FLAG(int, max_k, kmt::Limits{}.max_k, "most clusters");
ABSL_FLAG(int, max_iterations, kmt::Limits{}.max_iterations, "most layers (iterations) per batch");
ABSL_FLAG(int64_t, max_dense_points, kmt::Limits{}.max_dense_points,
          "most points for runs of the O(n^2) dense evaluator (softmax beta, learned models)");
ABSL_FLAG(int64_t, max_resident_bytes, kmt::Limits{}.max_resident_bytes,
          "most bytes the shards of resident jobs (Job streams) may hold at once; 0: a share of "
          "the memory this process may use (its cgroup's limit, else the machine's)");
ABSL_FLAG(int64_t, max_held_bytes, kmt::Limits{}.max_held_bytes,
          "most bytes the Cluster batches received and not yet answered may hold; a batch "
          "past it is refused RESOURCE_EXHAUSTED with a retry pushback; 0: a quarter of the "
          "memory this process may use (its cgroup's limit, else the machine's), at most what "
          "--max_resident_bytes leaves of it");
ABSL_FLAG(bool, shared_points, kmt::Limits{}.shared_points,
          "let a client on this machine hand a resident shard's points over through its memory "
          "(a memfd the server reads, one copy instead of the wire's); false: over the wire");
ABSL_FLAG(int, max_message_bytes, kmt::ServerOptions{}.max_message_bytes,
          "largest request message accepted");
ABSL_FLAG(int, workers, kmt::ServerOptions{}.workers,
          "batches computed at once (default: the CPUs this process may run on)");
ABSL_FLAG(int, threads_per_batch, kmt::ServerOptions{}.threads_per_batch,
          "threads one batch may use");
ABSL_FLAG(bool, io_preempts_workers, kmt::ServerOptions{}.io_preempts_workers,
          "let the threads doing network I/O (gRPC's, the metrics server's) preempt a worker "
          "computing a batch; by default they run under SCHED_BATCH: the same CPU share, but "
          "data arriving waits for the worker's time slice instead of interrupting it");
ABSL_FLAG(int, max_in_flight_per_stream, kmt::ServerOptions{}.max_in_flight_per_stream,
          "batches a stream may have read and not yet answered");
ABSL_FLAG(absl::Duration, not_serving_delay, kmt::ServerOptions{}.not_serving_delay,
          "after SIGTERM, how long health reports NOT_SERVING while batches are still "
          "taken, so that load balancers stop sending before the server stops taking; "
          "skipped when no stream is open");
ABSL_FLAG(absl::Duration, shutdown_grace, kmt::ServerOptions{}.shutdown_grace,
          "after that, how long accepted batches may take to finish");
ABSL_FLAG(absl::Duration, drain_linger, kmt::ServerOptions{}.drain_linger,
          "while draining, how long a stream whose batches are all answered waits before "
          "ending, so the client reads the last answers before gRPC closes the connection");

namespace kmt {
namespace {

ServerOptions OptionsFromFlags() {
  return {.listen = absl::GetFlag(FLAGS_listen),
          .tls = {.cert_file = absl::GetFlag(FLAGS_tls_cert),
                  .key_file = absl::GetFlag(FLAGS_tls_key),
                  .client_ca_file = absl::GetFlag(FLAGS_tls_client_ca),
                  .refresh_seconds = absl::GetFlag(FLAGS_tls_refresh_seconds)},
          .allow_port_sharing = absl::GetFlag(FLAGS_allow_port_sharing),
          .port_file = absl::GetFlag(FLAGS_port_file),
          .metrics_listen = absl::GetFlag(FLAGS_metrics_listen),
          .metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file),
          .model_dir = absl::GetFlag(FLAGS_model_dir),
          .model_poll_s = absl::GetFlag(FLAGS_model_poll_s),
          .keep_versions = absl::GetFlag(FLAGS_keep_versions),
          .require_models = absl::GetFlag(FLAGS_require_models),
          .model_control = absl::GetFlag(FLAGS_model_control),
          .model_control_clients = absl::GetFlag(FLAGS_model_control_clients),
          .limits = {.max_points = absl::GetFlag(FLAGS_max_points),
                     .max_d = absl::GetFlag(FLAGS_max_d),
                     .max_sparse_d = absl::GetFlag(FLAGS_max_sparse_d),
                     .max_k = absl::GetFlag(FLAGS_max_k),
                     .max_iterations = absl::GetFlag(FLAGS_max_iterations),
                     .max_dense_points = absl::GetFlag(FLAGS_max_dense_points),
                     .max_resident_bytes = absl::GetFlag(FLAGS_max_resident_bytes),
                     .max_held_bytes = absl::GetFlag(FLAGS_max_held_bytes),
                     .shared_points = absl::GetFlag(FLAGS_shared_points)},
          .max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes),
          .workers = absl::GetFlag(FLAGS_workers),
          .threads_per_batch = absl::GetFlag(FLAGS_threads_per_batch),
          .io_preempts_workers = absl::GetFlag(FLAGS_io_preempts_workers),
          .max_in_flight_per_stream = absl::GetFlag(FLAGS_max_in_flight_per_stream),
          .not_serving_delay = absl::GetFlag(FLAGS_not_serving_delay),
          .shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace),
          .drain_linger = absl::GetFlag(FLAGS_drain_linger)};
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::BlockStopSignals();
  kmt::ParseCommandLine(
      "Serves k-means transformers over gRPC: exact Lloyd constructions for any\n"
      "(d, k) and the learned models in --model_dir.",
      argc, argv, kmt::EngineFlags());
  kmt::KeepBatchMemory();
  const absl::Status status = kmt::RunServer(kmt::OptionsFromFlags(), KMT_VERSION);
  if (!status.ok()) {
    kmt::Log("ERROR", status.message());
    return 1;
  }
  return 0;
}
