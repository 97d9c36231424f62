// Scikit-learn's KMeans fields through a real kmt-server: weights, tol,
// n_init, the empty-cluster policies and distances answered on the wire, and
// every bad value refused with a named INVALID_ARGUMENT in its own response
// while the stream goes on.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/kmeans_transformer.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"
#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

class SklearnFieldsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = ServerProcess::Start({"--model_dir=", "--workers=2"}).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(absl::Seconds(30)), 0);
    delete server_;
  }
  // Every request on one stream, which must end OK.
  static std::vector<v1::ClusterResponse> Answers(const std::vector<v1::ClusterRequest>& requests) {
    const Exchange out = Stream(server_->address(), requests);
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    return out.responses;
  }
  static ServerProcess* server_;
};
ServerProcess* SklearnFieldsTest::server_ = nullptr;

// 2,000 points in d = 4, k = 5, up to 50 iterations.
v1::ClusterRequest FieldsRequest(const std::string& id, const std::string& model = "lloyd-onehot") {
  static const Matrix<float> points =
      GaussianClusters<float>({.n = 2000, .d = 4, .k = 5}, 12).points;
  return Request(id, model, points, 5, 50);
}

TEST_F(SklearnFieldsTest, TheFieldsAreAnswered) {
  v1::ClusterRequest weighted = FieldsRequest("weighted");
  for (int i = 0; i < weighted.n(); ++i) weighted.add_weights(1 + i % 3);
  weighted.set_return_cluster_sums(true);
  v1::ClusterRequest converging = FieldsRequest("tol");
  converging.set_tol(1e-4);
  v1::ClusterRequest restarts = FieldsRequest("restarts");
  restarts.set_n_init(3);
  restarts.set_iterations(5);
  v1::ClusterRequest distances = FieldsRequest("distances");
  distances.set_return_distances(v1::DISTANCES_ALL);
  distances.set_raw_response(true);
  v1::ClusterRequest relocate = FieldsRequest("relocate");
  relocate.set_empty_clusters(v1::EMPTY_CLUSTERS_RELOCATE_FARTHEST);
  const std::vector<v1::ClusterResponse> out =
      Answers({weighted, converging, restarts, distances, relocate});
  ASSERT_EQ(out.size(), 5u);
  for (const v1::ClusterResponse& r : out) EXPECT_FALSE(r.has_error()) << r.error().message();
  double weight = 0;
  for (double w : out[0].center_weights()) weight += w;
  EXPECT_EQ(weight, 2000 / 3 * 6 + 1 + 2);  // 1 + 2 + 3 per three points
  EXPECT_TRUE(out[1].converged());
  EXPECT_LT(out[1].iterations_run(), 50);
  EXPECT_NE(out[1].convergence(), v1::CONVERGENCE_NONE);
  EXPECT_EQ(out[2].restart_objectives_size(), 3);
  EXPECT_EQ(out[2].objective(), out[2].restart_objectives(out[2].best_restart()));
  EXPECT_EQ(out[3].distances_f32().size(), 2000u * 5 * 4);
  EXPECT_EQ(out[3].distances_size(), 0);
}

TEST_F(SklearnFieldsTest, BadValuesAreNamedAndTheStreamGoesOn) {
  std::vector<v1::ClusterRequest> requests;
  std::vector<std::string> messages;
  const auto add = [&](v1::ClusterRequest r, std::string message) {
    requests.push_back(std::move(r));
    messages.push_back(std::move(message));
  };
  v1::ClusterRequest r = FieldsRequest("short-weights");
  r.add_weights(1);
  add(r, "weights has 1 values, expected n = 2000");
  r = FieldsRequest("negative-weight");
  for (int i = 0; i < r.n(); ++i) r.add_weights(i == 7 ? -1 : 1);
  add(r, "weight 7 = -1, must be finite and at least 0");
  r = FieldsRequest("zero-weights");
  for (int i = 0; i < r.n(); ++i) r.add_weights(0);
  add(r, "weights are all 0: no point would count");
  r = FieldsRequest("raw-weights");
  r.set_weights_f32(std::string(12, '\0'));
  add(r, "weights_f32 has 12 bytes, expected n*4 = 2000*4");
  r = FieldsRequest("unweighted-model", "kmedoids");
  for (int i = 0; i < r.n(); ++i) r.add_weights(1);
  add(r,
      "model kmedoids takes no weights: kmedoids has no standard weighted form (ListModels says "
      "which models accept weights)");
  r = FieldsRequest("tol");
  r.set_tol(-1);
  add(r, "tol = -1, must be finite and at least 0");
  r = FieldsRequest("n_init");
  r.set_n_init(-2);
  add(r, "n_init = -2, must be at least 1 (0: one run)");
  r = FieldsRequest("policy");
  r.set_empty_clusters(static_cast<v1::EmptyClusters>(9));
  add(r, "empty_clusters = 9 is not a policy");
  r = FieldsRequest("distances");
  r.set_return_distances(static_cast<v1::Distances>(7));
  add(r, "return_distances = 7 is not a choice");
  r = FieldsRequest("policy-model", "trimmed-kmeans");
  r.set_empty_clusters(v1::EMPTY_CLUSTERS_SPLIT_LARGEST);
  add(r,
      "empty_clusters = split-largest applies to models whose centers are their clusters' means "
      "(Lloyd's, spherical k-means); trimmed-kmeans keeps an empty cluster's center");
  add(FieldsRequest("fine"), "");
  const std::vector<v1::ClusterResponse> out = Answers(requests);
  ASSERT_EQ(out.size(), requests.size());
  for (size_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(requests[i].request_id());
    EXPECT_EQ(out[i].request_id(), requests[i].request_id());
    if (messages[i].empty()) {
      EXPECT_FALSE(out[i].has_error());
      continue;
    }
    EXPECT_EQ(out[i].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(out[i].error().message(), messages[i]);
  }
}

}  // namespace
}  // namespace kmt
