// One batch from request to response through the server's limits, the
// registry's models and the engine; every failure is the response's error.
#include "server/batch_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/engine.h"
#include "proto/batch_error.h"
#include "proto/model_file.h"
#include "proto/request.h"

namespace kmt {
namespace {

const StopCheck kGo = [] { return absl::OkStatus(); };

v1::ClusterRequest Request(const std::string& model, int64_t n, int d, int k) {
  v1::ClusterRequest r;
  r.set_request_id("r1");
  r.set_model(model);
  r.set_n(n);
  r.set_d(d);
  r.set_k(k);
  r.set_iterations(4);
  r.set_seed(3);
  for (int64_t i = 0; i < n * d; ++i) r.add_points(static_cast<float>((i * 7919) % 101));
  return r;
}

class BatchRunnerTest : public ::testing::Test {
 protected:
  v1::ClusterResponse Answer(const v1::ClusterRequest& r, const StopCheck& check = kGo) {
    return RunBatch(registry_, limits_, r, check);
  }
  void ExpectError(const v1::ClusterRequest& r, absl::StatusCode code, const std::string& message) {
    const v1::ClusterResponse response = Answer(r);
    EXPECT_EQ(response.request_id(), r.request_id());
    EXPECT_EQ(response.model(), r.model());
    ASSERT_TRUE(response.has_error());
    EXPECT_EQ(response.error().code(), static_cast<int>(code));
    EXPECT_EQ(response.error().message(), message);
    EXPECT_EQ(response.labels_size(), 0);
    EXPECT_EQ(response.centers_size(), 0);
  }

  std::vector<std::string> refused_;
  const ModelRegistry registry_ = ModelRegistry::Load("", &refused_);
  Limits limits_{
      .max_points = 1000, .max_d = 8, .max_k = 16, .max_iterations = 50, .max_dense_points = 100};
};

TEST_F(BatchRunnerTest, AnswerIsTheEngineRunOnTheBatch) {
  v1::ClusterRequest r = Request("lloyd-binary", 500, 3, 6);
  r.set_return_cluster_sums(true);
  const v1::ClusterResponse response = Answer(r);
  ASSERT_FALSE(response.has_error()) << response.error().message();
  EXPECT_EQ(response.request_id(), "r1");
  EXPECT_EQ(response.model(), "lloyd-binary");
  EXPECT_EQ(response.model_version(), 1);
  EXPECT_GE(response.timing().compute_seconds(), 0);
  v1::ClusterResponse expected;
  FillResponse(r, *Cluster(registry_.Find("lloyd-binary")->served<float>(), *BatchFromRequest(r)),
               &expected);
  EXPECT_EQ(std::vector<int>(response.labels().begin(), response.labels().end()),
            std::vector<int>(expected.labels().begin(), expected.labels().end()));
  EXPECT_EQ(std::vector<float>(response.centers().begin(), response.centers().end()),
            std::vector<float>(expected.centers().begin(), expected.centers().end()));
  EXPECT_EQ(response.objective(), expected.objective());
  EXPECT_EQ(response.center_counts_size(), 6);
}

TEST_F(BatchRunnerTest, EachBadBatchGetsItsOwnError) {
  using Code = absl::StatusCode;
  ExpectError(Request("kmeans", 10, 2, 2), Code::kNotFound,
              "unknown model 'kmeans'; ListModels names the 9 models served");
  ExpectError(Request("lloyd-onehot", 1001, 2, 2), Code::kInvalidArgument,
              "n = 1001 exceeds this server's limit of 1000 points per batch");
  ExpectError(Request("lloyd-onehot", 10, 9, 2), Code::kInvalidArgument,
              "d = 9 exceeds this server's limit of 8");
  ExpectError(Request("lloyd-onehot", 20, 2, 17), Code::kInvalidArgument,
              "k = 17 exceeds this server's limit of 16");
  v1::ClusterRequest r = Request("lloyd-onehot", 10, 2, 2);
  r.set_iterations(51);
  ExpectError(r, Code::kInvalidArgument, "iterations = 51, must be between 0 and 50");
  r = Request("lloyd-onehot", 10, 2, 2);
  r.set_points(3, INFINITY);
  ExpectError(r, Code::kInvalidArgument, "point 1 has Inf in dimension 1");
  r = Request("lloyd-onehot-linear", 101, 2, 2);
  (*r.mutable_parameters())["beta"] = 10;
  ExpectError(r, Code::kInvalidArgument,
              "n = 101 exceeds this server's limit of 100 points for lloyd-onehot-linear with "
              "beta = 10, which runs the O(n^2) dense evaluator");
  r.set_n(100);
  r.mutable_points()->Truncate(200);
  EXPECT_FALSE(Answer(r).has_error());
}

TEST_F(BatchRunnerTest, AStopEndsTheBatchWithItsCode) {
  const v1::ClusterResponse response =
      Answer(Request("lloyd-onehot", 10, 2, 2), [] { return absl::CancelledError("gone"); });
  EXPECT_EQ(response.error().code(), static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_EQ(response.error().message(), "gone");
}

TEST_F(BatchRunnerTest, ErrorResponsesAreCapped) {
  const v1::ClusterResponse response =
      ErrorResponse(Request("m", 1, 1, 1), absl::InvalidArgumentError(std::string(5000, 'e')));
  EXPECT_EQ(response.error().message().size(), kMaxStatusMessageBytes);
  EXPECT_EQ(response.request_id(), "r1");
}

TEST_F(BatchRunnerTest, AFittedModelOfMoreCentersThanTheLimitIsRefused) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("kmt-batch-runner-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "wide" / "1");
  ASSERT_TRUE(WriteModelFile(FittedToProto<float>("wide", Matrix<float>::Zero(3, 20), {}),
                             (dir / "wide" / "1" / "model.kmt").string())
                  .ok());
  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load(dir.string(), &refused);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(refused.empty());
  const v1::ClusterResponse response = RunBatch(registry, limits_, Request("wide", 40, 3, 0), kGo);
  EXPECT_EQ(response.error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(response.error().message(),
            "model 'wide' has k = 20 centers, beyond this server's limit of 16 (--max_k)");
}

}  // namespace
}  // namespace kmt
