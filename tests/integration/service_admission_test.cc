// The server's budget of requests held and its fair queue, on the real
// server: a batch past the budget is refused with a retry pushback while its
// stream goes on, the client sends it again after the pushback, and a small
// batch goes before the large ones queued ahead of it. A worker is held by a
// long batch on a stream of its own, cancelled when the test is ready, so
// that what is queued is known from the server's kmt_held_bytes.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/types/span.h"
#include "client/cluster_client.h"
#include "learn/task_generator.h"
#include "proto/batch_error.h"
#include "proto/raw_payload.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

// A batch of n x d float32 points as raw bytes: about 4 n d bytes held.
v1::ClusterRequest RawBatch(const std::string& id, int n, int d, int k, int layers) {
  const Matrix<float> points = GenerateTask<float>({.n = n, .d = d, .k = k}, 3).points;
  v1::ClusterRequest r = Request(id, "lloyd-onehot", points, k, layers);
  r.clear_points();
  EncodeFloat32(absl::MakeConstSpan(points.data(), points.size()), r.mutable_points_f32());
  r.set_omit_labels(true);
  return r;
}

int64_t Bytes(const v1::ClusterRequest& r) { return static_cast<int64_t>(r.ByteSizeLong()); }

// Waits until the server holds exactly `bytes` of requests; false if it
// does not within a minute.
bool HoldsBytes(const ServerProcess& server, int64_t bytes) {
  for (int scrape = 0; scrape < 600; ++scrape) {
    if (ScrapeMetrics(server.metrics_port())["kmt_held_bytes"] == static_cast<double>(bytes)) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// A batch that keeps the one worker busy until its stream is cancelled.
class Blocker {
 public:
  explicit Blocker(const std::string& address)
      : batch_(RawBatch("blocker", 200000, 16, 64, 1000)),
        thread_([this, address] { exchange_ = Stream(address, {batch_}, &context_); }) {}
  ~Blocker() { Release(); }
  const v1::ClusterRequest& batch() const { return batch_; }
  void Release() {
    context_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }

 private:
  const v1::ClusterRequest batch_;
  grpc::ClientContext context_;
  Exchange exchange_;
  std::thread thread_;
};

// A server with one worker, held by a Blocker once Start returns.
class Admission : public ::testing::Test {
 protected:
  static constexpr int64_t kBudget = 16 << 20;

  // `flags` beside --workers=1 and the exact models only.
  void Start(std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"--workers=1", "--model_dir="});
    server_ = ServerProcess::Start(flags);
    ASSERT_NE(server_, nullptr);
    blocker_ = std::make_unique<Blocker>(server_->address());
    ASSERT_TRUE(HoldsBytes(*server_, Bytes(blocker_->batch())));
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Blocker> blocker_;  // goes before the server
};

TEST_F(Admission, ABatchPastTheBudgetIsRefusedWithAPushbackAndTheStreamGoesOn) {
  ASSERT_NO_FATAL_FAILURE(Start({"--max_held_bytes=" + std::to_string(kBudget)}));
  // The blocker holds 12.8 MB of the 16 MiB: 5 MB does not fit now, 17 MiB
  // never does, and the small batch does.
  const std::vector<v1::ClusterRequest> requests = {RawBatch("over", 80000, 16, 8, 5),
                                                    RawBatch("never", 280000, 16, 8, 5),
                                                    RawBatch("small", 300, 8, 3, 5)};
  ASSERT_GT(Bytes(requests[0]), kBudget - Bytes(blocker_->batch()));
  ASSERT_GT(Bytes(requests[1]), kBudget);
  std::atomic<int> received{0};
  grpc::ClientContext context;
  Exchange e;
  std::thread client([&] { e = Stream(server_->address(), requests, &context, &received); });
  // The refusals come at once, ahead of the small batch the worker has yet
  // to take.
  while (received < 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  blocker_->Release();
  client.join();
  ASSERT_TRUE(e.status.ok()) << e.status.error_message();
  ASSERT_EQ(e.responses.size(), 3u);
  const absl::Status over = FromBatchError(e.responses[0].error());
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_TRUE(absl::StrContains(over.message(),
                                "of requests not yet answered; this batch of 4.9 "
                                "MiB would pass its budget of 16.0 MiB "
                                "(--max_held_bytes); send it again in "))
      << over;
  ASSERT_TRUE(e.responses[0].error().has_retry_pushback_ms());
  EXPECT_GE(e.responses[0].error().retry_pushback_ms(), 0);
  const absl::Status never = FromBatchError(e.responses[1].error());
  EXPECT_EQ(never.code(), absl::StatusCode::kResourceExhausted) << never;
  EXPECT_EQ(e.responses[1].error().retry_pushback_ms(), -1);
  EXPECT_FALSE(e.responses[2].has_error()) << e.responses[2].error().message();
  std::map<std::string, double> metrics = ScrapeMetrics(server_->metrics_port());
  EXPECT_EQ(metrics["kmt_refused_total{reason=\"held_bytes\"}"], 1);
  EXPECT_EQ(metrics["kmt_refused_total{reason=\"larger_than_budget\"}"], 1);
  EXPECT_EQ(metrics["kmt_held_limit_bytes"], kBudget);
  EXPECT_TRUE(HoldsBytes(*server_, 0));
}

TEST_F(Admission, TheClientSendsARefusedBatchAgainAfterThePushback) {
  ASSERT_NO_FATAL_FAILURE(Start({"--max_held_bytes=" + std::to_string(kBudget)}));
  const v1::ClusterRequest over = RawBatch("over", 80000, 16, 8, 5);
  // Enough pushbacks to outlast the blocker's release, however slow the
  // machine; a pushback is at least 10 ms.
  Client client({.target = server_->address(), .max_pushbacks = 1000});
  absl::Status status;
  std::vector<v1::ClusterResponse> responses;
  std::thread call([&] {
    bool sent = false;
    status = client.Cluster(
        [&](v1::ClusterRequest* r) {
          if (sent) return false;
          *r = over;
          return sent = true;
        },
        [&](v1::ClusterResponse&& r) { responses.push_back(std::move(r)); });
  });
  // Refused at least once while the blocker holds the budget, then the
  // budget frees.
  for (int scrape = 0; scrape < 600; ++scrape) {
    if (ScrapeMetrics(server_->metrics_port())["kmt_refused_total{reason=\"held_bytes\"}"] > 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  blocker_->Release();
  call.join();
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_FALSE(responses[0].has_error()) << responses[0].error().message();
  EXPECT_GE(client.resent(), 1);

  // The same for a session's one stream.
  Blocker again(server_->address());
  ASSERT_TRUE(HoldsBytes(*server_, Bytes(again.batch())));
  const double refused =
      ScrapeMetrics(server_->metrics_port())["kmt_refused_total{reason=\"held_bytes\"}"];
  ClusterSession session(&client);
  absl::StatusOr<v1::ClusterResponse> answer;
  std::thread send([&] { answer = session.Send(over); });
  for (int scrape = 0; scrape < 600; ++scrape) {
    if (ScrapeMetrics(server_->metrics_port())["kmt_refused_total{reason=\"held_bytes\"}"] >
        refused) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  again.Release();
  send.join();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_FALSE(answer->has_error()) << answer->error().message();
}

TEST_F(Admission, TheClientGivesUpAfterItsPushbacksWithTheRefusal) {
  ASSERT_NO_FATAL_FAILURE(Start({"--max_held_bytes=" + std::to_string(kBudget)}));
  Client client({.target = server_->address(), .max_pushbacks = 2});
  const v1::ClusterRequest over = RawBatch("over", 80000, 16, 8, 5);
  ClusterSession session(&client);
  const absl::StatusOr<v1::ClusterResponse> answer = session.Send(over);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->error().code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(client.resent(), 2);
  EXPECT_EQ(ScrapeMetrics(server_->metrics_port())["kmt_refused_total{reason=\"held_bytes\"}"], 3);
}

TEST_F(Admission, ASmallBatchIsAnsweredWhileLargeOnesRunAndQueue) {
  ASSERT_NO_FATAL_FAILURE(Start({}));
  const std::vector<v1::ClusterRequest> large(3, RawBatch("large", 100000, 16, 64, 30));
  std::atomic<int> large_received{0};
  grpc::ClientContext large_context;
  Exchange large_exchange;
  std::thread large_client(
      [&] { large_exchange = Stream(server_->address(), large, &large_context, &large_received); });
  const int64_t held = Bytes(blocker_->batch()) + 3 * Bytes(large[0]);
  ASSERT_TRUE(HoldsBytes(*server_, held));
  // The one worker runs the blocker, which lets the small batch run between
  // two of its layers, ahead of the large batches queued before it.
  grpc::ClientContext small_context;
  small_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  const Exchange small =
      Stream(server_->address(), {RawBatch("small", 512, 32, 10, 20)}, &small_context);
  ASSERT_TRUE(small.status.ok()) << small.status.error_message();
  ASSERT_EQ(small.responses.size(), 1u);
  EXPECT_FALSE(small.responses[0].has_error()) << small.responses[0].error().message();
  EXPECT_EQ(large_received, 0);
  EXPECT_EQ(ScrapeMetrics(server_->metrics_port())["kmt_held_bytes"], held);
  blocker_->Release();
  large_client.join();
  ASSERT_TRUE(large_exchange.status.ok()) << large_exchange.status.error_message();
  ASSERT_EQ(large_exchange.responses.size(), 3u);
  for (const v1::ClusterResponse& r : large_exchange.responses) EXPECT_FALSE(r.has_error());
  std::map<std::string, double> metrics = ScrapeMetrics(server_->metrics_port());
  EXPECT_EQ(metrics["kmt_queue_seconds_count{model=\"lloyd-onehot\",size=\"small\"}"], 1);
  EXPECT_EQ(metrics["kmt_queue_seconds_count{model=\"lloyd-onehot\",size=\"medium\"}"], 3);
}

TEST_F(Admission, SmallBatchesGoBeforeTheLargeOnesQueuedAheadOfThem) {
  // Between batches, not only between layers: large batches queued behind
  // a running one, and small ones queued after them, too large to run
  // inside it (a sixteenth of its bytes at most).
  ASSERT_NO_FATAL_FAILURE(Start({}));
  const std::vector<v1::ClusterRequest> large(3, RawBatch("large", 100000, 16, 64, 30));
  std::atomic<int> large_received{0}, medium_received{0};
  grpc::ClientContext large_context, medium_context;
  Exchange large_exchange, medium_exchange;
  std::thread large_client(
      [&] { large_exchange = Stream(server_->address(), large, &large_context, &large_received); });
  ASSERT_TRUE(HoldsBytes(*server_, Bytes(blocker_->batch()) + 3 * Bytes(large[0])));
  const v1::ClusterRequest medium = RawBatch("medium", 20000, 16, 8, 5);
  ASSERT_GT(Bytes(medium), Bytes(blocker_->batch()) / 16);
  std::thread medium_client([&] {
    medium_exchange = Stream(server_->address(), {medium}, &medium_context, &medium_received);
  });
  ASSERT_TRUE(HoldsBytes(*server_, Bytes(blocker_->batch()) + 3 * Bytes(large[0]) + Bytes(medium)));
  blocker_->Release();
  medium_client.join();
  // With one worker, the large batches run after it: the first of them is
  // answered a whole large batch's compute after it.
  EXPECT_EQ(large_received, 0);
  large_client.join();
  ASSERT_TRUE(medium_exchange.status.ok()) << medium_exchange.status.error_message();
  EXPECT_FALSE(medium_exchange.responses.at(0).has_error());
  ASSERT_TRUE(large_exchange.status.ok()) << large_exchange.status.error_message();
  ASSERT_EQ(large_exchange.responses.size(), 3u);
}

}  // namespace
}  // namespace kmt
