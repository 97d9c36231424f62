// The real kmt-server binary as a child process on a free loopback port, and
// a helper to run the real kmt CLI.
#ifndef KMT_TESTS_INTEGRATION_SERVER_PROCESS_H_
#define KMT_TESTS_INTEGRATION_SERVER_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kmt {

class ServerProcess {
 public:
  // Starts the server with these extra flags (the exact models only unless
  // they set --model_dir); returns once it listens.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& flags);
  ~ServerProcess();

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Sends SIGTERM and waits up to `timeout`; the exit code, or -1.
  int Terminate(absl::Duration timeout);
  // Sends SIGTERM and returns once the port refuses connections: the drain
  // has begun (at once with --not_serving_delay=0s), and every stream's next
  // request is answered UNAVAILABLE. False if that takes over `timeout`.
  bool Drain(absl::Duration timeout);
  void Signal(int signal);
  // Waits for exit; the exit code, or -1 on timeout or death by a signal.
  int Wait(absl::Duration timeout);
  // What the server wrote to stderr so far.
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::string dir_;
};

// A program running in the background, its standard output and error
// going to files; killed with SIGKILL if it still runs when destroyed.
class ProgramProcess {
 public:
  static std::unique_ptr<ProgramProcess> Start(const std::vector<std::string>& argv);
  ~ProgramProcess();

  void Signal(int signal);
  // Waits for exit; the exit code, or -1 on timeout or death by a signal.
  int Wait(absl::Duration timeout);
  // What it wrote to its standard output and error so far.
  std::string Out() const;
  std::string Err() const;

 private:
  pid_t pid_ = -1;
  std::string dir_;
};

// The kmt-server binary the tests run.
std::string ServerBinary();

// Runs a program to completion; returns its exit code and its standard
// output and error.
int RunProgram(const std::vector<std::string>& argv, std::string* out, std::string* err);

// GET /metrics from a server's metrics port on the loopback interface: the
// exposition as served, empty if the port does not answer.
std::string MetricsText(int port);

// The same as {series as exposed, e.g. kmt_errors_total{code="INTERNAL"}:
// value}.
std::map<std::string, double> ScrapeMetrics(int port);

// A fresh directory under the test's temporary directory, removed when the
// test program exits.
std::string TempDir(const std::string& name);

// How long each case of the `stress` tier runs: KMT_STRESS_SECONDS, 10 s
// unless it is set; INVALID_ARGUMENT naming it when it is not a positive
// number.
absl::StatusOr<absl::Duration> StressDuration();

}  // namespace kmt

#endif  // KMT_TESTS_INTEGRATION_SERVER_PROCESS_H_
