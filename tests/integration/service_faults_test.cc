// A replica killed under the CLI's per-batch run: the client resends what it
// had not been answered and nothing is lost.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(ServiceFaults, AReplicaKilledDuringAPerBatchRunLosesNothing) {
  const Dataset& data = HundredThousand();
  const auto run = [&](const std::string& servers, const std::string& dir, ServerProcess* victim) {
    std::string out, err;
    int code = -1;
    std::atomic<bool> done{false};
    std::thread cli([&] {
      code =
          RunProgram({CliBinary(), "cluster", "--mode=per-batch", "--server=" + servers,
                      "--input=" + data.csv, "--k=6", "--iterations=300", "--seed=7",
                      "--batch_size=1024", "--streams=2", "--max_attempts=5",
                      "--labels_out=" + dir + "/labels", "--centers_out=" + dir + "/centers.csv"},
                     &out, &err);
    });
    if (victim != nullptr) {
      // Mid-run: once the victim has answered some batches.
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      EXPECT_FALSE(done) << "the run ended before the kill";
      victim->Signal(SIGKILL);
    }
    cli.join();
    EXPECT_EQ(code, 0) << err;
    EXPECT_NE(out.find("98 batches, 100000 points, 0 failed"), std::string::npos) << out << err;
    return std::pair{FileBytes(dir + "/labels"), FileBytes(dir + "/centers.csv")};
  };
  const auto a = ServerProcess::Start({"--workers=1"});
  const auto b = ServerProcess::Start({"--workers=1"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::string both = absl::StrCat("ipv4:", a->address(), ",", b->address());
  const auto calm = run(both, TempDir("calm"), nullptr);
  const auto killed = run(both, TempDir("killed"), a.get());
  EXPECT_EQ(a->Wait(absl::Seconds(5)), -1);  // died by the signal
  EXPECT_FALSE(calm.first.empty());
  EXPECT_TRUE(calm.first == killed.first) << "labels differ";
  EXPECT_TRUE(calm.second == killed.second) << "centers differ";
}

}  // namespace
}  // namespace kmt
