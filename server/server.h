// kmt-server's settings in one struct and the server they describe. main
// fills ServerOptions from the flags (each flag's default is the field's
// default here) and nothing below it reads a flag; RunServer builds the
// service from the options and serves until SIGTERM or SIGINT: health turns
// NOT_SERVING, new batches are answered UNAVAILABLE after not_serving_delay,
// and accepted ones finish within shutdown_grace. With no stream open the
// server stops at once; a second signal ends a drain.
#ifndef KMT_SERVER_SERVER_H_
#define KMT_SERVER_SERVER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/cpus.h"
#include "proto/channel_tuning.h"
#include "proto/transport_security.h"
#include "server/limits.h"

namespace kmt {

struct ServerOptions {
  std::string listen = "0.0.0.0:50051";  ///< gRPC listen address (port 0 picks a free one)
  /// TLS from PEM files, watched for rotation (proto/transport_security.h);
  /// no certificate: plaintext.
  ServerTls tls;
  /// Let several processes listen on the same port (SO_REUSEPORT), splitting
  /// the connections between them; false: a port in use is an error.
  bool allow_port_sharing = false;
  std::string port_file;                        ///< if set, the bound gRPC port is written here
  std::string metrics_listen = "0.0.0.0:9464";  ///< Prometheus /metrics address (port 0: any)
  std::string metrics_port_file;                ///< if set, the bound metrics port is written here
  /// Directory of learned model files (*.kmt); one that does not exist is
  /// an error at start, empty serves the exact models only.
  std::string model_dir = "models";
  /// How often, in seconds, the model directory is read again for new,
  /// changed and removed model files; 0: only at start.
  double model_poll_s = 5;
  /// Of each model's versions, serve only the latest this many available
  /// and retire older ones (TF Serving's `latest` policy); 0: every version.
  int keep_versions = 0;
  /// Models that must load at start: the server does not start without
  /// them (a version available each).
  std::vector<std::string> require_models;
  /// Serve LoadModel and UnloadModel; false: they are PERMISSION_DENIED.
  bool model_control = false;
  /// With TLS, the client certificates (a subject alternative name or the
  /// common name) allowed to call them; nobody else is.
  std::vector<std::string> model_control_clients;
  Limits limits;                             ///< per batch and on resident jobs (server/limits.h)
  int max_message_bytes = kMaxMessageBytes;  ///< largest request message accepted
  int workers = UsableCpus();  ///< batches computed at once; the CPUs usable by default
  int threads_per_batch = 1;   ///< threads one batch may use
  /// Let the threads doing network I/O (gRPC's, the metrics server's)
  /// preempt a worker computing a batch; false: they run under SCHED_BATCH,
  /// the same CPU share, but data arriving waits for the worker's time slice
  /// instead of interrupting it.
  bool io_preempts_workers = false;
  int max_in_flight_per_stream = 16;  ///< batches a stream may have read and not yet answered
  /// After SIGTERM, how long health reports NOT_SERVING while batches are
  /// still taken, so that load balancers stop sending before the server
  /// stops taking; skipped when no stream is open.
  absl::Duration not_serving_delay = absl::Seconds(2);
  /// After that, how long accepted batches may take to finish.
  absl::Duration shutdown_grace = absl::Seconds(30);
  /// While draining, how long a stream whose batches are all answered waits
  /// before ending, so the client reads the last answers before gRPC closes
  /// the connection.
  absl::Duration drain_linger = absl::Seconds(1);
};

// Serves `options` until SIGTERM or SIGINT and returns OK once drained, or
// the reason the server could not start, in one line: a model directory
// that cannot be listed, an address that is malformed or cannot be bound,
// a required model that does not load (other model files refused are
// logged, not fatal). A second signal during the
// drain ends the process at once with exit code 128 + the signal. It blocks
// both signals in the calling thread, which takes them, before it starts any
// thread; call it before the process starts threads of its own.
absl::Status RunServer(const ServerOptions& options, const std::string& version);

// Blocks SIGTERM and SIGINT in the calling thread, and so in every thread it
// starts later, for RunServer's one thread that waits for them. A program
// calls it first, before anything starts a thread (the SIMD choice's timing
// starts OpenMP's), or a thread that does not block them ends the process
// on SIGTERM.
void BlockStopSignals();

}  // namespace kmt

#endif  // KMT_SERVER_SERVER_H_
