// ClusterSession (client/cluster_client.h) against real servers: requests
// one at a time on one stream, answered as separate streams answer them,
// the stream renewed every batches_per_stream requests, a batch's error in
// its response, and a request sent again on a live replica when the one
// holding the stream dies.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cluster_client.h"
#include "learn/task_generator.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

const char kStreamsOk[] = "kmt_streams_total{code=\"OK\"}";
const char kStreamsOpen[] = "kmt_streams_in_flight";

// A metric of the server once it reaches `want`, or its last value after
// five seconds: the server counts a stream as it ends, just after the
// client has seen the end.
double MetricOnceAt(const ServerProcess& server, const std::string& series, double want) {
  double value = -1;
  for (int i = 0; i < 250; ++i) {
    const std::map<std::string, double> metrics = ScrapeMetrics(server.metrics_port());
    const auto found = metrics.find(series);
    value = found == metrics.end() ? 0 : found->second;
    if (value == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return value;
}

std::vector<v1::ClusterRequest> Requests(int count) {
  std::vector<v1::ClusterRequest> requests;
  for (int i = 0; i < count; ++i) {
    const Matrix<float> points =
        GenerateTask<float>({.n = 300, .d = 5, .k = 4}, static_cast<uint64_t>(i + 1)).points;
    requests.push_back(Request(absl::StrCat("step ", i), "lloyd-onehot", points, 4, 3));
  }
  return requests;
}

void ExpectSameAnswer(const v1::ClusterResponse& got, const v1::ClusterResponse& want) {
  ASSERT_FALSE(got.has_error()) << got.error().message();
  EXPECT_EQ(got.request_id(), want.request_id());
  EXPECT_EQ(std::vector<int>(got.labels().begin(), got.labels().end()),
            std::vector<int>(want.labels().begin(), want.labels().end()));
  EXPECT_EQ(std::vector<float>(got.centers().begin(), got.centers().end()),
            std::vector<float>(want.centers().begin(), want.centers().end()));
  EXPECT_EQ(got.objective(), want.objective());
}

TEST(ClusterSession, AnswersOnOneStreamAsSeparateStreamsDo) {
  const std::unique_ptr<ServerProcess> server = ServerProcess::Start({});
  ASSERT_NE(server, nullptr);
  const std::vector<v1::ClusterRequest> requests = Requests(5);
  std::vector<v1::ClusterResponse> alone;
  for (const v1::ClusterRequest& r : requests) {
    const Exchange e = Stream(server->address(), {r});
    ASSERT_TRUE(e.status.ok()) << e.status.error_message();
    ASSERT_EQ(e.responses.size(), 1u);
    alone.push_back(e.responses[0]);
  }
  const double before = MetricOnceAt(*server, kStreamsOk, requests.size());
  ASSERT_EQ(before, requests.size());

  Client client({.target = server->address()});
  ClusterSession session(&client);
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    const absl::StatusOr<v1::ClusterResponse> got = session.Send(requests[i]);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameAnswer(*got, alone[i]);
    // The one stream stays open between the requests.
    EXPECT_EQ(MetricOnceAt(*server, kStreamsOpen, 1), 1);
  }
  EXPECT_TRUE(session.End().ok());
  EXPECT_EQ(MetricOnceAt(*server, kStreamsOk, before + 1), before + 1);
  EXPECT_EQ(client.resent(), 0);
}

TEST(ClusterSession, RenewsItsStreamEveryBatchesPerStreamRequests) {
  const std::unique_ptr<ServerProcess> server = ServerProcess::Start({});
  ASSERT_NE(server, nullptr);
  Client client({.target = server->address(), .batches_per_stream = 2});
  {
    ClusterSession session(&client);
    for (const v1::ClusterRequest& r : Requests(5)) {
      const absl::StatusOr<v1::ClusterResponse> got = session.Send(r);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_FALSE(got->has_error()) << got->error().message();
    }
    // Two streams of two requests have ended; the fifth request's is open.
    EXPECT_EQ(MetricOnceAt(*server, kStreamsOk, 2), 2);
  }
  EXPECT_EQ(MetricOnceAt(*server, kStreamsOk, 3), 3);
}

TEST(ClusterSession, ABatchErrorComesInItsResponseAndTheStreamGoesOn) {
  const std::unique_ptr<ServerProcess> server = ServerProcess::Start({});
  ASSERT_NE(server, nullptr);
  Client client({.target = server->address()});
  ClusterSession session(&client);
  v1::ClusterRequest bad = Requests(1)[0];
  bad.set_k(301);
  const absl::StatusOr<v1::ClusterResponse> refused = session.Send(bad);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(refused->error().message(), "n = 300 points is fewer than k = 301 clusters");
  const absl::StatusOr<v1::ClusterResponse> fine = session.Send(Requests(1)[0]);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_FALSE(fine->has_error()) << fine->error().message();
  EXPECT_TRUE(session.End().ok());
  EXPECT_EQ(MetricOnceAt(*server, kStreamsOk, 1), 1);
}

// Two replicas behind one round-robin target: the replica that holds the
// session's stream is killed between two requests, and the second request
// is answered by the other one, as it would have answered it.
TEST(ClusterSession, SendsARequestAgainOnALiveReplicaWhenItsStreamDies) {
  std::unique_ptr<ServerProcess> a = ServerProcess::Start({});
  std::unique_ptr<ServerProcess> b = ServerProcess::Start({});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::vector<v1::ClusterRequest> requests = Requests(2);
  const Exchange want = Stream(b->address(), {requests[1]});
  ASSERT_EQ(want.responses.size(), 1u);

  Client client(
      {.target = absl::StrCat("ipv4:", a->address(), ",", b->address()), .max_attempts = 5});
  ClusterSession session(&client);
  ASSERT_TRUE(session.Send(requests[0]).ok());
  // The replica holding the stream counts it open from before its answer.
  const bool on_a = ScrapeMetrics(a->metrics_port())[kStreamsOpen] == 1;
  std::unique_ptr<ServerProcess>& holder = on_a ? a : b;
  ASSERT_EQ(MetricOnceAt(*holder, kStreamsOpen, 1), 1);
  holder->Signal(SIGKILL);
  EXPECT_EQ(holder->Wait(absl::Seconds(10)), -1);  // killed: no exit code
  const absl::StatusOr<v1::ClusterResponse> got = session.Send(requests[1]);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameAnswer(*got, want.responses[0]);
  EXPECT_GE(client.resent(), 1);
}

TEST(ClusterSession, GivesUpAfterMaxAttemptsWhereNothingAnswers) {
  std::unique_ptr<ServerProcess> server = ServerProcess::Start({});
  ASSERT_NE(server, nullptr);
  const std::string address = server->address();
  server->Signal(SIGKILL);
  server->Wait(absl::Seconds(10));
  Client client({.target = address, .max_attempts = 3});
  ClusterSession session(&client);
  const absl::StatusOr<v1::ClusterResponse> got = session.Send(Requests(1)[0]);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_NE(got.status().message().find("batch 'step 0' unanswered after 3 attempts"),
            std::string::npos)
      << got.status();
  EXPECT_EQ(client.resent(), 2);
}

}  // namespace
}  // namespace kmt
