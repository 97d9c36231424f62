// A server stops a batch's work when the client's deadline passes or the
// client cancels, and its worker is free again at once; each test on a
// server of its own.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "absl/time/time.h"
#include "learn/task_generator.h"
#include "proto/raw_payload.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

// A batch that keeps one worker busy for many seconds, its points as raw
// float32 bytes: on a loaded machine, writing 200,000 x 16 repeated floats
// could take much of the deadline before the server saw the batch.
v1::ClusterRequest HeavyBatch() {
  static const Matrix<float> points =
      GenerateTask<float>({.n = 200000, .d = 16, .k = 64}, 4).points;
  v1::ClusterRequest r = Request("heavy", "lloyd-onehot", points, 64, 1000);
  r.clear_points();
  EncodeFloat32(absl::MakeConstSpan(points.data(), points.size()), r.mutable_points_f32());
  return r;
}

TEST(ServiceStopsWork, WhenTheDeadlinePasses) {
  auto server = ServerProcess::Start({"--workers=1", "--model_dir=", "--not_serving_delay=0s"});
  ASSERT_NE(server, nullptr);
  // Built before the deadline starts: in a slow build (ThreadSanitizer)
  // building it alone took longer than the deadline, and the call ended
  // before the server saw it.
  const std::vector<v1::ClusterRequest> heavy = {HeavyBatch()};
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  const Exchange e = Stream(server->address(), heavy, &context);
  EXPECT_EQ(e.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(SmallBatchAnswered(server->address()));
  // The deadline counts once as the stream's outcome and once as the batch
  // it cut short; the metrics are recorded as each stream ends.
  std::map<std::string, double> metrics;
  for (int scrape = 0; scrape < 600; ++scrape) {
    metrics = ScrapeMetrics(server->metrics_port());
    if (metrics["kmt_streams_total{code=\"DEADLINE_EXCEEDED\"}"] == 1 &&
        metrics["kmt_streams_total{code=\"OK\"}"] == 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(metrics["kmt_streams_total{code=\"DEADLINE_EXCEEDED\"}"], 1);
  EXPECT_EQ(metrics["kmt_streams_total{code=\"OK\"}"], 1);
  EXPECT_EQ(metrics["kmt_errors_total{code=\"DEADLINE_EXCEEDED\"}"], 1);
  EXPECT_EQ(metrics["kmt_batches_total{code=\"DEADLINE_EXCEEDED\",model=\"lloyd-onehot\"}"], 1);
  EXPECT_EQ(metrics["kmt_batches_total{code=\"OK\",model=\"lloyd-onehot\"}"], 1);
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

TEST(ServiceStopsWork, WhenTheClientCancels) {
  auto server = ServerProcess::Start({"--workers=1", "--model_dir=", "--not_serving_delay=0s"});
  ASSERT_NE(server, nullptr);
  // Built before the cancel's clock starts, as above.
  const std::vector<v1::ClusterRequest> heavy = {HeavyBatch()};
  grpc::ClientContext context;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    context.TryCancel();
  });
  const Exchange e = Stream(server->address(), heavy, &context);
  canceller.join();
  EXPECT_EQ(e.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(SmallBatchAnswered(server->address()));
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kmt
