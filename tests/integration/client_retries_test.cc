// The client library's retries against an address where nothing listens.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cluster_client.h"
#include "learn/task_generator.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

TEST(ClientRetries, GivesUpOnAnAddressWhereNothingListens) {
  // A port that was free a moment ago: connections are refused, so every
  // stream fails before a batch is written.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(fd);
  const int port = ntohs(address.sin_port);
  Client client({.target = absl::StrCat("127.0.0.1:", port), .max_attempts = 3});
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

}  // namespace
}  // namespace kmt
