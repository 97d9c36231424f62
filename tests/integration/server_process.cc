#include "tests/integration/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace kmt {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

// Waits up to `timeout` for the child `*pid` to exit; its exit code (-1 on
// timeout or death by a signal), *pid then -1.
int WaitFor(pid_t* pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (*pid > 0 && absl::Now() < deadline) {
    int status;
    if (waitpid(*pid, &status, WNOHANG) == *pid) {
      *pid = -1;
      return ExitCode(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

void KillAndReap(pid_t pid) {
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

// Whether a TCP connection to the loopback port is refused.
bool Refused(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool refused = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 &&
                       errno == ECONNREFUSED;
  close(fd);
  return refused;
}

}  // namespace

std::string TempDir(const std::string& name) {
  // Removed when the test program exits.
  static struct Registry {
    std::vector<std::string> dirs;
    ~Registry() {
      std::error_code ignored;
      for (const std::string& dir : dirs) std::filesystem::remove_all(dir, ignored);
    }
  } registry;
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir =
      std::string(base ? base : "/tmp") + "/kmt-" + name + "-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  registry.dirs.push_back(dir);
  return dir;
}

absl::StatusOr<absl::Duration> StressDuration() {
  const char* env = std::getenv("KMT_STRESS_SECONDS");
  if (env == nullptr || *env == '\0') return absl::Seconds(10);
  double seconds = 0;
  if (!absl::SimpleAtod(env, &seconds) || !(seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("KMT_STRESS_SECONDS=", env, ": not a positive number of seconds"));
  }
  return absl::Seconds(seconds);
}

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& flags) {
  static int started = 0;
  auto server = std::unique_ptr<ServerProcess>(new ServerProcess);
  server->dir_ = TempDir("server" + std::to_string(started++));
  const std::string port_file = server->dir_ + "/port";
  // The exact models unless the flags name a model directory: the default
  // one, relative to where the test runs, does not exist there.
  std::vector<std::string> argv = {KMT_SERVER_BINARY,
                                   "--listen=127.0.0.1:0",
                                   "--port_file=" + port_file,
                                   "--metrics_listen=127.0.0.1:0",
                                   "--metrics_port_file=" + server->dir_ + "/metrics_port",
                                   "--model_dir="};
  argv.insert(argv.end(), flags.begin(), flags.end());
  server->pid_ = Spawn(argv, server->dir_ + "/stdout", server->dir_ + "/stderr");
  if (server->pid_ < 0) return nullptr;
  for (int i = 0; i < 300; ++i) {
    const std::string port = ReadFile(port_file);
    if (!port.empty() && port.back() == '\n') {
      server->port_ = std::stoi(port);
      server->metrics_port_ = std::stoi(ReadFile(server->dir_ + "/metrics_port"));
      return server;
    }
    int status;
    if (waitpid(server->pid_, &status, WNOHANG) == server->pid_) {
      server->pid_ = -1;
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return nullptr;
}

ServerProcess::~ServerProcess() { KillAndReap(pid_); }

void ServerProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int ServerProcess::Wait(absl::Duration timeout) { return WaitFor(&pid_, timeout); }

int ServerProcess::Terminate(absl::Duration timeout) {
  Signal(SIGTERM);
  return Wait(timeout);
}

bool ServerProcess::Drain(absl::Duration timeout) {
  Signal(SIGTERM);
  const absl::Time deadline = absl::Now() + timeout;
  while (!Refused(port_)) {
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

std::string ServerProcess::Log() const { return ReadFile(dir_ + "/stderr"); }

std::string ServerBinary() { return KMT_SERVER_BINARY; }

std::unique_ptr<ProgramProcess> ProgramProcess::Start(const std::vector<std::string>& argv) {
  static int started = 0;
  auto program = std::unique_ptr<ProgramProcess>(new ProgramProcess);
  program->dir_ = TempDir("program" + std::to_string(started++));
  program->pid_ = Spawn(argv, program->dir_ + "/stdout", program->dir_ + "/stderr");
  if (program->pid_ < 0) return nullptr;
  return program;
}

ProgramProcess::~ProgramProcess() { KillAndReap(pid_); }

void ProgramProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int ProgramProcess::Wait(absl::Duration timeout) { return WaitFor(&pid_, timeout); }

std::string ProgramProcess::Out() const { return ReadFile(dir_ + "/stdout"); }
std::string ProgramProcess::Err() const { return ReadFile(dir_ + "/stderr"); }

int RunProgram(const std::vector<std::string>& argv, std::string* out, std::string* err) {
  static int runs = 0;
  const std::string dir = TempDir("run" + std::to_string(runs++));
  const pid_t pid = Spawn(argv, dir + "/stdout", dir + "/stderr");
  if (pid < 0) return -1;
  int status;
  waitpid(pid, &status, 0);
  if (out) *out = ReadFile(dir + "/stdout");
  if (err) *err = ReadFile(dir + "/stderr");
  return ExitCode(status);
}

std::string MetricsText(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return {};
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return {};
  }
  std::string text;
  char buffer[65536];
  for (ssize_t got; (got = read(fd, buffer, sizeof(buffer))) > 0;) text.append(buffer, got);
  close(fd);
  const size_t body = text.find("\r\n\r\n");
  if (body == std::string::npos) return {};
  return text.substr(body + 4);
}

std::map<std::string, double> ScrapeMetrics(int port) {
  std::map<std::string, double> series;
  for (absl::string_view line : absl::StrSplit(MetricsText(port), '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double value;
    if (space != absl::string_view::npos && absl::SimpleAtod(line.substr(space + 1), &value)) {
      series[std::string(line.substr(0, space))] = value;
    }
  }
  return series;
}

}  // namespace kmt
