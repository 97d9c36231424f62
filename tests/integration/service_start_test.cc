// A server's start: on ports another process holds, on addresses that are
// not host:port, with a model directory that is missing or asked empty.
// Each refusal is one line that names what is wrong, and exit code 1.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/integration/grpc_probe.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

// A loopback port held by a listening socket, as another program's would be.
class HeldPort {
 public:
  HeldPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), size), 0);
    EXPECT_EQ(listen(fd_, 1), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
  }
  ~HeldPort() { close(fd_); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_;
  int port_ = 0;
};

// Runs the server with these flags (on free loopback ports unless they say
// otherwise) to its end; its exit code, and what it wrote to stderr.
int RunServer(const std::vector<std::string>& flags, std::string* err) {
  std::vector<std::string> argv = {ServerBinary(), "--listen=127.0.0.1:0",
                                   "--metrics_listen=127.0.0.1:0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::string out;
  return RunProgram(argv, &out, err);
}

// Expects `err` to be one log line: ERROR and then `message`.
void ExpectOneErrorLine(const std::string& err, const std::string& message) {
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(absl::EndsWith(err, " ERROR " + message + "\n")) << err;
}

TEST(ServiceStart, AGrpcPortInUseIsOneLineThatNamesIt) {
  const HeldPort held;
  std::string err;
  EXPECT_EQ(RunServer({"--model_dir=", "--listen=" + held.address()}, &err), 1);
  ExpectOneErrorLine(err, "cannot listen on " + held.address() + ": the address is in use");
}

TEST(ServiceStart, AMetricsPortInUseIsOneLineThatNamesIt) {
  const HeldPort held;
  std::string err;
  EXPECT_EQ(RunServer({"--model_dir=", "--metrics_listen=" + held.address()}, &err), 1);
  ExpectOneErrorLine(err, "cannot serve metrics on " + held.address() + ": the address is in use");
}

TEST(ServiceStart, AnAddressThatIsNotHostAndPortIsNamedAsSuch) {
  const struct {
    std::string flag, message;
  } cases[] = {
      {"--listen=foo", "--listen=foo is not host:port"},
      {"--listen=127.0.0.1:65536", "--listen=127.0.0.1:65536 is not host:port"},
      {"--listen=::1:50051", "--listen=::1:50051 is not host:port"},
      {"--metrics_listen=9464", "--metrics_listen=9464 is not host:port"},
      {"--listen=192.0.2.1:50051",
       "cannot listen on 192.0.2.1:50051: the address is not one of "
       "this machine's"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.flag);
    std::string err;
    EXPECT_EQ(RunServer({"--model_dir=", c.flag}, &err), 1);
    ExpectOneErrorLine(err, c.message);
  }
}

TEST(ServiceStart, APortInUseIsAnErrorUnlessSharingIsAsked) {
  // Sharing takes both servers' consent (SO_REUSEPORT on each socket): a
  // server that does not ask is refused even by one that does.
  const auto first = ServerProcess::Start({"--allow_port_sharing"});
  ASSERT_NE(first, nullptr);
  std::string err;
  const std::string grpc_taken = absl::StrCat("--listen=127.0.0.1:", first->port());
  EXPECT_EQ(RunServer({"--model_dir=", grpc_taken}, &err), 1);
  ExpectOneErrorLine(
      err, absl::StrCat("cannot listen on 127.0.0.1:", first->port(), ": the address is in use"));
  // Asked for by both, two servers share the port, and the first still serves.
  const auto second = ServerProcess::Start({grpc_taken, "--allow_port_sharing"});
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->port(), first->port());
  EXPECT_EQ(HealthStatus(first->address(), "").value_or(-1), 1);
  EXPECT_EQ(second->Terminate(absl::Seconds(30)), 0);
  EXPECT_EQ(first->Terminate(absl::Seconds(30)), 0);
}

TEST(ServiceStart, AMissingModelDirectoryStopsTheServer) {
  // Named or the default (models, relative to where the server starts:
  // here the test's directory, which has none), a directory that is not
  // there is an error, not a server with the exact models only.
  const std::string missing = TempDir("start") + "/missing";
  const std::string here_models = (std::filesystem::current_path() / "models").string();
  ASSERT_FALSE(std::filesystem::exists(here_models));
  const struct {
    std::vector<std::string> flags;
    std::string message;
  } cases[] = {
      {{"--model_dir=" + missing}, "--model_dir=" + missing + ": " + missing + " does not exist"},
      {{}, "--model_dir=models: " + here_models + " does not exist"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    std::string err;
    EXPECT_EQ(RunServer(c.flags, &err), 1);
    ExpectOneErrorLine(err, c.message + "; an empty --model_dir= serves the exact models only");
  }
}

TEST(ServiceStart, AnEmptyModelDirectoryFlagServesTheExactModels) {
  // --model_dir= asks for the exact models only; an existing directory with
  // no model files serves them too.
  for (const std::string& dir : {std::string(), TempDir("empty-models")}) {
    SCOPED_TRACE("--model_dir=" + dir);
    const auto server = ServerProcess::Start({"--model_dir=" + dir});
    ASSERT_NE(server, nullptr);
    EXPECT_EQ(HealthStatus(server->address(), "").value_or(-1), 1);
    EXPECT_FALSE(absl::StrContains(server->Log(), "ERROR")) << server->Log();
    EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
  }
}

}  // namespace
}  // namespace kmt
