// A server's start on ports another process holds.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/integration/grpc_probe.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

TEST(ServiceStart, APortInUseIsAnErrorUnlessSharingIsAsked) {
  // Sharing takes both servers' consent (SO_REUSEPORT on each socket): a
  // server that does not ask is refused even by one that does.
  const auto first = ServerProcess::Start({"--allow_port_sharing"});
  ASSERT_NE(first, nullptr);
  std::string out, err;
  const std::string grpc_taken = absl::StrCat("--listen=127.0.0.1:", first->port());
  EXPECT_EQ(RunProgram({ServerBinary(), grpc_taken, "--metrics_listen=127.0.0.1:0"}, &out, &err),
            1);
  EXPECT_TRUE(absl::StrContains(err, absl::StrCat("cannot listen on 127.0.0.1:", first->port(),
                                                  ": the port is in use by another process")))
      << err;
  const std::string metrics_taken =
      absl::StrCat("--metrics_listen=127.0.0.1:", first->metrics_port());
  EXPECT_EQ(RunProgram({ServerBinary(), "--listen=127.0.0.1:0", metrics_taken}, &out, &err), 1);
  EXPECT_TRUE(absl::StrContains(
      err, absl::StrCat("cannot serve metrics on 127.0.0.1:", first->metrics_port())))
      << err;
  // Asked for by both, two servers share the port, and the first still serves.
  const auto second = ServerProcess::Start({grpc_taken, "--allow_port_sharing"});
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->port(), first->port());
  EXPECT_EQ(HealthStatus(first->address(), "").value_or(-1), 1);
  EXPECT_EQ(second->Terminate(absl::Seconds(30)), 0);
  EXPECT_EQ(first->Terminate(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kmt
