// Which of a server's threads may preempt which: the scheduling policy of
// every thread, read from /proc.
#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

// Each thread of a process: its name and scheduling policy, from
// /proc/PID/task/TID/stat (the name is between the first '(' and the last
// ')'; the policy is field 41, the 39th after the name).
std::vector<std::pair<std::string, int>> ThreadPolicies(pid_t pid) {
  std::vector<std::pair<std::string, int>> threads;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;  // ended
    std::istringstream fields(stat.substr(close + 1));
    std::string field;
    int number = 3;  // of the next field
    while (number <= 41 && fields >> field) ++number;
    if (number <= 41) continue;  // cut short: the thread ended while read
    threads.emplace_back(stat.substr(open + 1, close - open - 1), std::stoi(field));
  }
  return threads;
}

TEST(ServiceThreads, NetworkThreadsRunUnderSchedBatchAndWorkersDoNot) {
  auto server = ServerProcess::Start({"--workers=2", "--model_dir=", "--not_serving_delay=0s"});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(SmallBatchAnswered(server->address()));  // every kind of thread has run
  int workers = 0, others = 0;
  for (const auto& [name, policy] : ThreadPolicies(server->pid())) {
    if (name == "kmt-worker") {
      ++workers;
      EXPECT_EQ(policy, SCHED_OTHER) << name;
    } else {
      ++others;
      EXPECT_EQ(policy, SCHED_BATCH) << name;
    }
  }
  EXPECT_EQ(workers, 2);
  EXPECT_GE(others, 3);  // main, gRPC's pollers, the metrics server's
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

TEST(ServiceThreads, WithIoPreemptsWorkersEveryThreadKeepsSchedOther) {
  auto server = ServerProcess::Start(
      {"--workers=2", "--model_dir=", "--not_serving_delay=0s", "--io_preempts_workers"});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(SmallBatchAnswered(server->address()));
  const auto threads = ThreadPolicies(server->pid());
  EXPECT_GE(threads.size(), 5u);
  for (const auto& [name, policy] : threads) EXPECT_EQ(policy, SCHED_OTHER) << name;
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kmt
