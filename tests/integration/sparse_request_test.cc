// Sparse points in a Cluster request (points_csr) through a real kmt-server:
// labelled and clustered from their nonzeros as the dense request of the
// same points is (the same labels; centers, distances and objective within
// the round-off of their different sums), in float32 and float64, weighted,
// every distance or each point's own, empty clusters relocated or split,
// spherical k-means too; a fitted model labels
// sparse points by name; and each malformed request is refused with INVALID_ARGUMENT naming the
// field, in its own response, while the stream goes on; sample weights that
// overflow double are refused by name, as on dense points.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/model_file.h"
#include "proto/raw_payload.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"
#include "tests/support/sparse_documents.h"

namespace kmt {
namespace {

constexpr int kD = 3000, kK = 6;

class SparseRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = std::filesystem::temp_directory_path() /
                 ("kmt-sparse-request-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(model_dir_ / "topics" / "1");
    // A fitted model of the documents' first kK rows, with an offset (the
    // centers' mean) as kmt.KMeans.save_model writes one: the server serves
    // the centers minus it.
    const Matrix<double> centers = Docs<double>().ToDense().leftCols(kK);
    const Vector<double> mean = centers.rowwise().mean();
    v1::ModelFile file = FittedToProto<double>(
        "topics", centers, std::vector<double>(mean.data(), mean.data() + mean.size()));
    file.mutable_fitted()->set_n(400);
    ASSERT_TRUE(WriteModelFile(file, (model_dir_ / "topics" / "1" / "model.kmt").string()).ok());
    server_ = ServerProcess::Start(
                  {"--model_dir=" + model_dir_.string(), "--workers=2", "--max_sparse_d=100000"})
                  .release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(absl::Seconds(30)), 0);
    delete server_;
    std::filesystem::remove_all(model_dir_);
  }

  // The test's documents: 400 TF-IDF rows of kD terms.
  template <typename Scalar>
  static const CsrMatrix<Scalar>& Docs() {
    static const CsrMatrix<Scalar>* docs =
        new CsrMatrix<Scalar>(TfIdfDocuments<Scalar>({.n = 400, .d = kD, .terms = 30}, 23));
    return *docs;
  }

  // Every request on one stream: the responses and the stream's status.
  static std::pair<std::vector<v1::ClusterResponse>, grpc::Status> Exchange(
      const std::vector<v1::ClusterRequest>& requests) {
    kmt::Exchange e = Stream(server_->address(), requests);
    return {std::move(e.responses), e.status};
  }

  static std::filesystem::path model_dir_;
  static ServerProcess* server_;
};
std::filesystem::path SparseRequestTest::model_dir_;
ServerProcess* SparseRequestTest::server_ = nullptr;

// A request over the documents from their rows 0, 40, 80, ... as centers,
// the points sparse (or dense, for the same request made dense), in Scalar.
template <typename Scalar>
v1::ClusterRequest Request(const std::string& id, bool sparse, int iterations,
                           const Vector<Scalar>* weights = nullptr) {
  const CsrMatrix<Scalar>& docs = TfIdfDocuments<Scalar>({.n = 400, .d = kD, .terms = 30}, 23);
  const Matrix<Scalar> dense = docs.ToDense();
  constexpr bool kDouble = std::is_same_v<Scalar, double>;
  v1::ClusterRequest r;
  r.set_request_id(id);
  r.set_model("lloyd-onehot");
  r.set_n(docs.rows());
  r.set_d(kD);
  r.set_k(kK);
  r.set_init(v1::INIT_GIVEN);
  r.set_iterations(iterations);
  r.set_raw_response(true);
  Matrix<Scalar> centers(kD, kK);
  for (int j = 0; j < kK; ++j) centers.col(j) = dense.col(40 * j);
  const auto encode = [](absl::Span<const Scalar> values, std::string* f32, std::string* f64) {
    if constexpr (kDouble) {
      EncodeFloat64(values, f64);
    } else {
      EncodeFloat32(values, f32);
    }
  };
  encode(absl::MakeConstSpan(centers.data(), centers.size()), r.mutable_centers_f32(),
         r.mutable_centers_f64());
  if (weights != nullptr) {
    encode(absl::MakeConstSpan(weights->data(), weights->size()), r.mutable_weights_f32(),
           r.mutable_weights_f64());
  }
  if (sparse) {
    v1::CsrPoints* csr = r.mutable_points_csr();
    EncodeInt64(docs.indptr(), csr->mutable_indptr_i64());
    EncodeInt32(std::vector<int>(docs.indices().begin(), docs.indices().end()),
                csr->mutable_indices_i32());
    encode(docs.values(), csr->mutable_values_f32(), csr->mutable_values_f64());
  } else {
    encode(absl::MakeConstSpan(dense.data(), dense.size()), r.mutable_points_f32(),
           r.mutable_points_f64());
  }
  return r;
}

template <typename Scalar>
std::vector<Scalar> Values(const v1::ClusterResponse& r, bool distances) {
  const std::string& bytes = std::is_same_v<Scalar, double>
                                 ? (distances ? r.distances_f64() : r.centers_f64())
                                 : (distances ? r.distances_f32() : r.centers_f32());
  std::vector<Scalar> out(bytes.size() / sizeof(Scalar));
  if (!out.empty()) DecodeRaw(bytes, kRawTypeOf<Scalar>, out.data());
  return out;
}

// The sparse response against the dense one: the same labels, the rest
// within `tol` relative (to the values' largest magnitude).
template <typename Scalar>
void ExpectAsDense(const v1::ClusterResponse& sparse, const v1::ClusterResponse& dense,
                   double tol) {
  ASSERT_FALSE(sparse.has_error()) << sparse.error().message();
  ASSERT_FALSE(dense.has_error()) << dense.error().message();
  EXPECT_EQ(sparse.labels_i32(), dense.labels_i32());
  EXPECT_EQ(sparse.iterations_run(), dense.iterations_run());
  EXPECT_NEAR(sparse.objective(), dense.objective(), tol * dense.objective());
  for (const bool distances : {false, true}) {
    const std::vector<Scalar> a = Values<Scalar>(sparse, distances);
    const std::vector<Scalar> b = Values<Scalar>(dense, distances);
    ASSERT_EQ(a.size(), b.size()) << distances;
    double scale = 0;
    for (Scalar v : b) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], tol * scale) << (distances ? "distance " : "center ") << i;
    }
  }
}

TEST_F(SparseRequestTest, SparsePointsAnswerAsTheDensePointsInFloatAndDouble) {
  Vector<float> weights_f = Vector<float>::LinSpaced(400, 0.5f, 2.0f);
  Vector<double> weights_d = weights_f.cast<double>();
  std::vector<v1::ClusterRequest> requests;
  for (const bool sparse : {true, false}) {
    const std::string side = sparse ? "sparse" : "dense";
    v1::ClusterRequest label = Request<float>(side + "-label", sparse, 0);
    label.set_return_distances(v1::DISTANCES_ALL);
    v1::ClusterRequest steps = Request<float>(side + "-steps", sparse, 4, &weights_f);
    steps.set_return_distances(v1::DISTANCES_NEAREST);
    steps.set_return_trajectory(true);
    v1::ClusterRequest steps64 = Request<double>(side + "-steps64", sparse, 30, &weights_d);
    steps64.set_return_distances(v1::DISTANCES_NEAREST);
    steps64.set_tol(0);  // to the step that changes no label
    requests.insert(requests.end(), {label, steps, steps64});
  }
  const auto [responses, status] = Exchange(requests);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 6u);
  {
    SCOPED_TRACE("labels and all distances under the given centers");
    ExpectAsDense<float>(responses[0], responses[3], 1e-5);
    EXPECT_EQ(responses[0].distances_f32().size(), 400u * kK * 4);
  }
  {
    SCOPED_TRACE("four weighted steps, float32");
    ExpectAsDense<float>(responses[1], responses[4], 1e-5);
    ASSERT_EQ(responses[1].layer_objectives_size(), responses[4].layer_objectives_size());
    for (int t = 0; t < responses[1].layer_objectives_size(); ++t) {
      EXPECT_NEAR(responses[1].layer_objectives(t), responses[4].layer_objectives(t),
                  1e-5 * responses[4].layer_objectives(t));
    }
    // The steps moved the centers: the test compares a run, not a start.
    EXPECT_NE(responses[1].centers_f32(), Request<float>("", true, 0).centers_f32());
  }
  {
    SCOPED_TRACE("weighted steps to convergence, float64");
    ExpectAsDense<double>(responses[2], responses[5], 1e-12);
    EXPECT_LT(responses[2].iterations_run(), 30);
    EXPECT_EQ(responses[2].convergence(), responses[5].convergence());
  }
}

// A center far from every document loses its cluster at the first step:
// relocated to the farthest point or split from the largest cluster, as
// the dense batch does it.
TEST_F(SparseRequestTest, EmptyClustersAreRelocatedAndSplitAsTheDensePathDoes) {
  std::vector<v1::ClusterRequest> requests;
  for (const auto policy :
       {v1::EMPTY_CLUSTERS_RELOCATE_FARTHEST, v1::EMPTY_CLUSTERS_SPLIT_LARGEST}) {
    for (const bool sparse : {true, false}) {
      v1::ClusterRequest r =
          Request<double>(absl::StrCat(policy, sparse ? "-sparse" : "-dense"), sparse, 3);
      std::string& centers = *r.mutable_centers_f64();
      const std::vector<double> far(kD, 5.0);
      centers.replace((kK - 1) * kD * 8, kD * 8, reinterpret_cast<const char*>(far.data()), kD * 8);
      r.set_empty_clusters(policy);
      r.set_return_trajectory(true);
      requests.push_back(r);
    }
  }
  const auto [responses, status] = Exchange(requests);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 4u);
  for (int pair : {0, 2}) {
    SCOPED_TRACE(responses[pair].request_id());
    ExpectAsDense<double>(responses[pair], responses[pair + 1], 1e-12);
    EXPECT_GT(responses[pair].empty_cluster_events(), 0);
    EXPECT_EQ(responses[pair].empty_cluster_events(), responses[pair + 1].empty_cluster_events());
  }
}

// Spherical k-means, the variant for TF-IDF: rows and centers scaled to
// unit norm, each center its cluster's normalized sum, as the dense batch
// runs it; rows of another norm give the same clustering.
TEST_F(SparseRequestTest, SphericalKMeansRunsOnSparsePointsAsOnDense) {
  std::vector<v1::ClusterRequest> requests;
  for (const bool sparse : {true, false}) {
    v1::ClusterRequest r = Request<double>(sparse ? "sparse" : "dense", sparse, 5);
    r.set_model("spherical-kmeans");
    r.set_return_distances(v1::DISTANCES_NEAREST);
    requests.push_back(r);
  }
  // The sparse rows times 3: the same unit rows once scaled.
  v1::ClusterRequest tripled = requests[0];
  tripled.set_request_id("tripled");
  std::vector<double> values(tripled.points_csr().values_f64().size() / 8);
  DecodeRaw(tripled.points_csr().values_f64(), RawType::kFloat64, values.data());
  for (double& v : values) v *= 3;
  tripled.mutable_points_csr()->clear_values_f64();
  EncodeFloat64(values, tripled.mutable_points_csr()->mutable_values_f64());
  requests.push_back(tripled);
  // Row 7 without its nonzeros has no direction.
  v1::ClusterRequest empty_row = requests[0];
  empty_row.set_request_id("empty-row");
  {
    const CsrMatrix<double>& docs = Docs<double>();
    const int64_t cut = docs.indptr()[8] - docs.indptr()[7];
    std::vector<int64_t> indptr = docs.indptr();
    for (size_t i = 8; i < indptr.size(); ++i) indptr[i] -= cut;
    std::vector<int> indices(docs.indices().begin(), docs.indices().end());
    std::vector<double> kept = docs.values();
    indices.erase(indices.begin() + docs.indptr()[7], indices.begin() + docs.indptr()[8]);
    kept.erase(kept.begin() + docs.indptr()[7], kept.begin() + docs.indptr()[8]);
    v1::CsrPoints* csr = empty_row.mutable_points_csr();
    csr->Clear();
    EncodeInt64(indptr, csr->mutable_indptr_i64());
    EncodeInt32(indices, csr->mutable_indices_i32());
    EncodeFloat64(kept, csr->mutable_values_f64());
  }
  requests.push_back(empty_row);
  const auto [responses, status] = Exchange(requests);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 4u);
  ExpectAsDense<double>(responses[0], responses[1], 1e-12);
  ASSERT_FALSE(responses[2].has_error()) << responses[2].error().message();
  EXPECT_EQ(responses[2].labels_i32(), responses[0].labels_i32());
  ASSERT_TRUE(responses[3].has_error());
  EXPECT_EQ(responses[3].error().message(),
            "point 7 has norm 0: spherical k-means needs a direction");
}

TEST_F(SparseRequestTest, AFittedModelLabelsSparsePointsByName) {
  v1::ClusterRequest by_name = Request<double>("by-name", true, 0);
  by_name.set_model("topics");
  by_name.clear_init();
  by_name.clear_centers_f64();
  by_name.set_k(0);
  by_name.set_return_distances(v1::DISTANCES_NEAREST);
  v1::ClusterRequest given = Request<double>("given", true, 0);
  // The model's centers are the documents' first kK rows.
  const Matrix<double> first =
      TfIdfDocuments<double>({.n = 400, .d = kD, .terms = 30}, 23).ToDense().leftCols(kK);
  given.clear_centers_f64();
  EncodeFloat64(absl::MakeConstSpan(first.data(), first.size()), given.mutable_centers_f64());
  given.set_return_distances(v1::DISTANCES_NEAREST);
  const auto [responses, status] = Exchange({by_name, given});
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 2u);
  ASSERT_FALSE(responses[0].has_error()) << responses[0].error().message();
  EXPECT_EQ(responses[0].model_version(), 1);
  EXPECT_EQ(responses[0].labels_i32(), responses[1].labels_i32());
  EXPECT_TRUE(responses[0].centers_f64().empty());  // the model's own
  // Its centers came back from the offset's coordinates: within round-off.
  const std::vector<double> a = Values<double>(responses[0], true);
  const std::vector<double> b = Values<double>(responses[1], true);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << i;
}

TEST_F(SparseRequestTest, SampleWeightsThatOverflowDoubleAreRefusedByNameAsOnDensePoints) {
  // 400 weights of 1e308 sum past double's range: the weighted sums and
  // objective overflow on either path, which each answers alike.
  const Vector<double> huge = Vector<double>::Constant(400, 1e308);
  const auto [responses, status] =
      Exchange({Request<double>("sparse", true, 2, &huge),
                Request<double>("dense", false, 2, &huge), Request<double>("after", true, 2)});
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(responses[i].request_id());
    ASSERT_TRUE(responses[i].has_error());
    EXPECT_EQ(responses[i].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(responses[i].error().message(),
              "the sample weights (the largest 1e+308) overflow double in the weighted sums or "
              "objective of these points; scale them down: only their ratios move the centers");
  }
  EXPECT_FALSE(responses[2].has_error()) << responses[2].error().message();
}

TEST_F(SparseRequestTest, EachMalformedRequestIsRefusedByNameAndTheStreamGoesOn) {
  struct Case {
    v1::ClusterRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  const auto add = [&](const std::string& message, auto edit) {
    v1::ClusterRequest r = Request<float>(absl::StrCat("bad-", cases.size()), true, 1);
    edit(r);
    cases.push_back({r, message});
  };
  add("points_csr.indptr_i64 has 3207 bytes, not a whole number of int64 offsets",
      [](v1::ClusterRequest& r) { r.mutable_points_csr()->mutable_indptr_i64()->resize(3207); });
  add("points_csr.indices_i32 has",
      [](v1::ClusterRequest& r) { r.mutable_points_csr()->mutable_indices_i32()->pop_back(); });
  add("is outside [0, cols = 3000)", [](v1::ClusterRequest& r) {
    // lifetime: the request owns the field the pointer names.
    std::string& indices = *r.mutable_points_csr()->mutable_indices_i32();
    indices[0] = indices[1] = '\xff';  // column 65,535 and more
    indices[2] = indices[3] = '\0';
  });
  add("is not finite", [](v1::ClusterRequest& r) {
    const float nan = std::nanf("");
    r.mutable_points_csr()->mutable_values_f32()->replace(0, 4, reinterpret_cast<const char*>(&nan),
                                                          4);
  });
  add("point 0 has 1e+30 in dimension", [](v1::ClusterRequest& r) {
    // Squares past float's range: refused as the dense points would be.
    const float huge = 1e30f;
    r.mutable_points_csr()->mutable_values_f32()->replace(0, 4,
                                                          reinterpret_cast<const char*>(&huge), 4);
  });
  add("points_csr.indptr_i64 holds 400 rows, but n = 401",
      [](v1::ClusterRequest& r) { r.set_n(401); });
  add("points_csr and points_f32 are both set; send one of them",
      [](v1::ClusterRequest& r) { r.set_points_f32(std::string(4, '\0')); });
  add("centers_f32 and weights_f64 are both set", [](v1::ClusterRequest& r) {
    r.set_weights_f64(std::string(8 * 400, '\0'));  // a float64 payload beside float32 points
  });
  add("init = INIT_KMEANS_PLUS_PLUS with points_csr: a request over sparse points starts from "
      "given centers",
      [](v1::ClusterRequest& r) { r.set_init(v1::INIT_KMEANS_PLUS_PLUS); });
  add("points_offset is set beside points_csr", [](v1::ClusterRequest& r) {
    for (int l = 0; l < kD; ++l) r.add_points_offset(0);
  });
  add("empty_clusters = 7 is not a policy",
      [](v1::ClusterRequest& r) { r.set_empty_clusters(static_cast<v1::EmptyClusters>(7)); });
  add("n_init is set beside points_csr", [](v1::ClusterRequest& r) { r.set_n_init(3); });
  add("d = 200000 exceeds this server's limit of 100000 for sparse points",
      [](v1::ClusterRequest& r) { r.set_d(200000); });
  std::vector<v1::ClusterRequest> requests;
  for (const Case& c : cases) requests.push_back(c.request);
  requests.push_back(Request<float>("after", true, 1));
  const auto [responses, status] = Exchange(requests);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), cases.size() + 1);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].message);
    ASSERT_TRUE(responses[i].has_error());
    EXPECT_EQ(responses[i].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(responses[i].error().message().find(cases[i].message), std::string::npos)
        << responses[i].error().message();
  }
  EXPECT_FALSE(responses.back().has_error()) << responses.back().error().message();
  EXPECT_EQ(responses.back().labels_i32().size(), 400u * 4);
}

}  // namespace
}  // namespace kmt
