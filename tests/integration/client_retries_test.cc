// The client library's retries against an address where nothing listens.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cluster_client.h"
#include "learn/task_generator.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

// A loopback port that was free a moment ago: connections to it are
// refused, so every stream fails before a batch is written.
std::string AddressWhereNothingListens() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(fd);
  return absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
}

TEST(ClientRetries, GivesUpOnAnAddressWhereNothingListens) {
  Client client({.target = AddressWhereNothingListens(), .max_attempts = 3});
  const Matrix<float> points = GenerateTask<float>({.n = 64, .d = 2, .k = 3}, 1).points;
  int sent = 0, answered = 0;
  const absl::Status status = client.Cluster(
      [&](v1::ClusterRequest* r) {
        *r = Request(absl::StrCat(sent), "lloyd-onehot", points, 3, 5);
        return ++sent <= 3;
      },
      [&](v1::ClusterResponse&&) { ++answered; });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  // Whether a batch was written before the stream failed decides which count
  // ran out first, the batch's or the streams'.
  EXPECT_TRUE(absl::StrContains(status.message(), "unanswered after 3 attempts") ||
              absl::StrContains(status.message(), "3 streams in a row failed"))
      << status;
  EXPECT_EQ(answered, 0);
}

// Every call ends, with the deadline's error or the connection's, when
// threads each open clients with deadlines shorter than a connection
// attempt to an address where nothing listens (a server gone under the
// soak's traffic). With gRPC's own retries on, some call got no reaction
// at all, even past its deadline and TryCancel, within a minute of this;
// a stuck call shows as the test's timeout.
TEST(ClientRetries, EveryCallEndsWhenDeadlinesAreShorterThanAConnection) {
  const std::string target = AddressWhereNothingListens();
  const Matrix<float> points = GenerateTask<float>({.n = 4096, .d = 8, .k = 6}, 1).points;
  const v1::ClusterRequest request = Request("short", "lloyd-onehot", points, 6, 10);
  constexpr int kThreads = 4, kCalls = 5000;
  std::atomic<int> ended{0}, unexpected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        Client client({.target = target,
                       .max_attempts = 1,
                       .stream_timeout = absl::Microseconds(100 + 100 * (i % 3))});
        bool sent = false;
        const absl::Status status = client.Cluster(
            [&](v1::ClusterRequest* r) {
              if (sent) return false;
              *r = request;
              return sent = true;
            },
            [&](v1::ClusterResponse&&) { ++unexpected; });
        if (!absl::IsDeadlineExceeded(status) && !absl::IsUnavailable(status)) ++unexpected;
        ++ended;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ended, kThreads * kCalls);
  EXPECT_EQ(unexpected, 0);
}

}  // namespace
}  // namespace kmt
