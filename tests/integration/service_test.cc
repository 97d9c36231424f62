// The ServiceTest suite: the real kmt-server on a loopback port, driven by
// the real kmt CLI and client library, checked against the core computing
// the same thing in this process. One server, its model directory holding a
// learned model and two broken files, serves the whole suite.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/init.h"
#include "core/padding.h"
#include "core/random.h"
#include "core/transformer.h"
#include "proto/model_file.h"
#include "tests/integration/grpc_probe.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

constexpr int kMaxPoints = 150000;

Matrix<float> CentersOf(const v1::ClusterResponse& r, int d) {
  return Eigen::Map<const Matrix<float>>(r.centers().data(), d, r.centers_size() / d);
}

// ---- A learned model, and files the server must refuse. ----

// A one-layer model with full softmax blocks and biases, as training makes
// them (not a Lloyd construction, so it runs on the dense path).
Model<float> LearnedModel() {
  Model<float> m;
  m.name = "test-learned";
  m.d = 3;
  m.k = 4;
  m.embedding = Embedding::kBinary;
  m.reembed = true;
  m.keep_empty_centers = false;
  m.trained_inits = {InitMethod::kPlainKMeansPlusPlus, InitMethod::kRandomSubset};
  Rng rng(99);
  const int dim = m.dim();
  const auto random = [&](int rows, int cols) {
    Matrix<float> x(rows, cols);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = 0.3 * rng.Normal();
    return x;
  };
  const auto block = [&] {
    AttentionBlock<float> b;
    b.Q = random(dim, dim);
    b.K = random(dim, dim);
    b.V = random(dim, dim);
    b.bQ = random(dim, 1);
    b.bK = random(dim, 1);
    b.bV = random(dim, 1);
    b.normalizer = Normalizer::kSoftmax;
    b.beta = 1 / std::sqrt(static_cast<float>(dim));
    return b;
  };
  m.layers.push_back({{block(), block(), block(), block()}});
  return m;
}

std::string ModelDir() {
  static const std::string dir = [] {
    const std::string d = TempDir("models");
    v1::ModelFile file = ModelToProto(LearnedModel());
    file.set_description("made by the integration test");
    file.set_input_scaling(v1::SCALING_MIN_MAX);
    file.mutable_provenance()->set_seed(99);
    file.mutable_provenance()->set_training_config("none: random weights");
    (*file.mutable_provenance()->mutable_final_metrics())["loss"] = 1.5;
    EXPECT_TRUE(WriteModelFile(file, d + "/test-learned.kmt").ok());
    v1::ModelFile padded = file;
    padded.set_name("test-learned-padded");
    for (const auto& [pd, pk] : {std::pair{2, 3}, std::pair{3, 2}}) {
      v1::ModelSize* size = padded.add_padded_sizes();
      size->set_d(pd);
      size->set_k(pk);
    }
    EXPECT_TRUE(WriteModelFile(padded, d + "/test-learned-padded.kmt").ok());
    std::ofstream(d + "/broken.kmt") << "this is not a model";
    v1::ModelFile bad = file;
    bad.set_name("bad-shape");
    bad.mutable_layers(0)->mutable_points_to_points()->mutable_q()->set_rows(2);
    EXPECT_TRUE(WriteModelFile(bad, d + "/bad-shape.kmt").ok());
    return d;
  }();
  return dir;
}

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = ServerProcess::Start(
                  {"--model_dir=" + ModelDir(), absl::StrCat("--max_points=", kMaxPoints),
                   "--max_message_bytes=4194304", "--workers=2", "--not_serving_delay=0s"})
                  .release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(absl::Seconds(30)), 0);
    delete server_;
  }
  static ServerProcess* server_;
};
ServerProcess* ServiceTest::server_ = nullptr;

TEST_F(ServiceTest, CliPerBatchModeEqualsTheCoreOnEveryBatch) {
  const Dataset& data = HundredThousand();
  const std::string dir = TempDir("per-batch");
  std::string out, err;
  ASSERT_EQ(RunProgram(
                {CliBinary(), "cluster", "--mode=per-batch", "--server=" + server_->address(),
                 "--input=" + data.csv, "--k=6", "--iterations=10", "--seed=7", "--batch_size=4096",
                 "--labels_out=" + dir + "/labels", "--centers_out=" + dir + "/centers.csv"},
                &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("25 batches, 100000 points, 0 failed"), std::string::npos) << out;
  const Labels labels = ReadLabels(dir + "/labels");
  const std::vector<std::vector<float>> centers = ReadCsv(dir + "/centers.csv");
  ASSERT_EQ(labels.size(), 100000u);
  ASSERT_EQ(centers.size(), 1 + 25 * 6u);
  for (int b = 0; b < 25; ++b) {
    SCOPED_TRACE(absl::StrCat("batch ", b));
    const int first = b * 4096, n = std::min(4096, 100000 - first);
    const Matrix<float> points = data.points.middleCols(first, n);
    const Matrix<float> init = *InitialCenters(points, 6, InitMethod::kKMeansPlusPlus, 7);
    const RunResult<float> want = *RunLloyd<float>({}, points, init, {.layers = 10});
    ASSERT_EQ(Labels(labels.begin() + first, labels.begin() + first + n), want.labels);
    for (int j = 0; j < 6; ++j) {
      const std::vector<float>& row = centers[1 + b * 6 + j];
      ASSERT_EQ(row[0], b);
      ASSERT_EQ(row[1], j);
      for (int l = 0; l < 8; ++l) ASSERT_EQ(row[2 + l], want.centers(l, j));
    }
  }
}

TEST_F(ServiceTest, CliWholeFileModeEqualsTheCoreOnAllPointsAtOnce) {
  const Dataset& data = HundredThousand();
  const std::string dir = TempDir("whole");
  const Matrix<float> init = *InitialCenters(data.points, 6, InitMethod::kKMeansPlusPlus, 3);
  WriteCsv(dir + "/init.csv", init);
  std::string out, err;
  ASSERT_EQ(RunProgram({CliBinary(), "cluster", "--mode=whole", "--server=" + server_->address(),
                        "--input=" + data.csv, "--k=6", "--iterations=10", "--tol=0",
                        "--init=given", "--centers_in=" + dir + "/init.csv", "--batch_size=7000",
                        "--labels_out=" + dir + "/labels", "--centers_out=" + dir + "/centers.csv"},
                       &out, &err),
            0)
      << err;
  const RunResult<float> want = *RunLloyd<float>({}, data.points, init, {.layers = 10});
  EXPECT_EQ(ReadLabels(dir + "/labels"), want.labels);
  const std::vector<std::vector<float>> centers = ReadCsv(dir + "/centers.csv");
  ASSERT_EQ(centers.size(), 6u);
  // The means are summed per batch here and per chunk in the core: the
  // double sums may differ in the last bits, their float means at most by
  // one rounding.
  for (int j = 0; j < 6; ++j) {
    for (int l = 0; l < 8; ++l) {
      EXPECT_NEAR(centers[j][l], want.centers(l, j), 1e-6 * std::abs(want.centers(l, j)));
    }
  }
  EXPECT_NE(out.find("final objective"), std::string::npos) << out;
}

TEST_F(ServiceTest, GivenCentersWithZeroIterationsAssignAndSum) {
  const Matrix<float> points = HundredThousand().points.leftCols(5000);
  const Matrix<float> centers = HundredThousand().points.rightCols(6);
  v1::ClusterRequest r = Request("assign", "lloyd-binary", points, 6, 0);
  r.set_init(v1::INIT_GIVEN);
  r.mutable_centers()->Add(centers.data(), centers.data() + centers.size());
  r.set_return_cluster_sums(true);
  const Exchange e = Stream(server_->address(), {r});
  ASSERT_TRUE(e.status.ok()) << e.status.error_message();
  ASSERT_EQ(e.responses.size(), 1u);
  const v1::ClusterResponse& got = e.responses[0];
  ASSERT_FALSE(got.has_error()) << got.error().message();
  Labels want;
  AssignNearest(points, centers, &want);
  EXPECT_EQ(Labels(got.labels().begin(), got.labels().end()), want);
  EXPECT_EQ(CentersOf(got, 8), centers);
  EXPECT_EQ(got.iterations_run(), 0);
  ClusterSums sums(8, 6);
  AccumulateClusterSums(points, want, &sums);
  EXPECT_EQ(std::vector<int64_t>(got.center_counts().begin(), got.center_counts().end()),
            sums.counts);
  EXPECT_EQ(Eigen::Map<const Matrix<double>>(got.center_sums().data(), 8, 6), sums.sums);
  EXPECT_NEAR(got.objective(), Objective(points, centers), 1e-9 * got.objective());
}

TEST_F(ServiceTest, EachInitialisationIsTheCores) {
  const Matrix<float> points = HundredThousand().points.leftCols(3000);
  const std::pair<v1::Init, InitMethod> inits[] = {
      {v1::INIT_KMEANS_PLUS_PLUS, InitMethod::kKMeansPlusPlus},
      {v1::INIT_PLAIN_KMEANS_PLUS_PLUS, InitMethod::kPlainKMeansPlusPlus},
      {v1::INIT_RANDOM, InitMethod::kRandomSubset}};
  std::vector<v1::ClusterRequest> requests;
  for (const auto& [init, method] : inits) {
    v1::ClusterRequest r =
        Request(std::string(InitMethodName(method)), "lloyd-onehot", points, 6, 0);
    r.set_init(init);
    r.set_seed(21);
    requests.push_back(r);
  }
  const Exchange e = Stream(server_->address(), requests);
  ASSERT_TRUE(e.status.ok()) << e.status.error_message();
  ASSERT_EQ(e.responses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(InitMethodName(inits[i].second));
    ASSERT_FALSE(e.responses[i].has_error()) << e.responses[i].error().message();
    EXPECT_EQ(CentersOf(e.responses[i], 8), *InitialCenters(points, 6, inits[i].second, 21));
  }
  // Greedy and plain k-means++ share their first draw and then differ.
  EXPECT_EQ(CentersOf(e.responses[0], 8).col(0), CentersOf(e.responses[1], 8).col(0));
  EXPECT_NE(CentersOf(e.responses[0], 8), CentersOf(e.responses[1], 8));
}

TEST_F(ServiceTest, BadBatchesGetTheirOwnErrorsAndTheStreamGoesOn) {
  const Matrix<float> good = HundredThousand().points.leftCols(600);
  const Matrix<float> three_d = good.topRows(3);
  std::vector<v1::ClusterRequest> requests;
  std::vector<std::pair<absl::StatusCode, std::string>> want;
  const auto add = [&](v1::ClusterRequest r, absl::StatusCode code, std::string message) {
    requests.push_back(std::move(r));
    want.emplace_back(code, std::move(message));
  };
  add(Request("good-1", "lloyd-onehot", good, 5, 5), absl::StatusCode::kOk, "");
  v1::ClusterRequest nan = Request("nan", "lloyd-onehot", good, 5, 5);
  nan.set_points(8 * 17 + 3, NAN);
  add(nan, absl::StatusCode::kInvalidArgument, "point 17 has NaN in dimension 3");
  add(Request("few", "lloyd-onehot", Matrix<float>(good.leftCols(4)), 5, 5),
      absl::StatusCode::kInvalidArgument, "n = 4 points is fewer than k = 5 clusters");
  v1::ClusterRequest shape = Request("shape", "lloyd-onehot", good, 5, 5);
  shape.set_n(601);
  add(shape, absl::StatusCode::kInvalidArgument, "points has 4800 values, expected n*d = 601*8");
  add(Request("unknown", "lloyd-trinary", good, 5, 5), absl::StatusCode::kNotFound,
      "unknown model 'lloyd-trinary'; ListModels names the 11 models served");
  add(Request("learned-d", "test-learned", good, 4, 2), absl::StatusCode::kInvalidArgument,
      "model test-learned was trained for d = 3, k = 4; the batch has d = 8, k = 4");
  add(Request("learned-k", "test-learned", three_d, 5, 2), absl::StatusCode::kInvalidArgument,
      "model test-learned was trained for d = 3, k = 4; the batch has d = 3, k = 5");
  const Matrix<float> many = Matrix<float>::Zero(1, kMaxPoints + 1);
  add(Request("limit", "lloyd-onehot", many, 2, 1), absl::StatusCode::kInvalidArgument,
      absl::StrCat("n = ", kMaxPoints + 1, " exceeds this server's limit of ", kMaxPoints,
                   " points per batch"));
  add(Request("iterations", "lloyd-onehot", good, 5, 5000), absl::StatusCode::kInvalidArgument,
      "iterations = 5000, must be between 0 and 1000");
  v1::ClusterRequest given = Request("given", "lloyd-onehot", good, 5, 1);
  given.set_init(v1::INIT_GIVEN);
  given.mutable_centers()->Add(good.data(), good.data() + 8 * 5 - 1);
  add(given, absl::StatusCode::kInvalidArgument, "centers has 39 values, expected k*d = 5*8");
  v1::ClusterRequest beta = Request("beta", "soft-kmeans", good, 5, 1);
  (*beta.mutable_parameters())["beta"] = -1;
  add(beta, absl::StatusCode::kInvalidArgument,
      "beta = -1 is out of range for soft-kmeans: (0, inf]");
  v1::ClusterRequest dense = Request("dense", "lloyd-onehot-linear",
                                     Matrix<float>(HundredThousand().points.leftCols(5000)), 5, 1);
  (*dense.mutable_parameters())["beta"] = 100;
  add(dense, absl::StatusCode::kInvalidArgument,
      "n = 5000 exceeds this server's limit of 4096 points for lloyd-onehot-linear with beta "
      "= 100, which runs the O(n^2) dense evaluator");
  add(Request("learned-dense", "test-learned",
              Matrix<float>(HundredThousand().points.topLeftCorner(3, 5000)), 4, 1),
      absl::StatusCode::kInvalidArgument,
      "n = 5000 exceeds this server's limit of 4096 points for test-learned, which runs the "
      "O(n^2) dense evaluator; exact models such as lloyd-onehot run any n");
  add(Request("good-2", "lloyd-binary", good, 7, 3), absl::StatusCode::kOk, "");

  const Exchange e = Stream(server_->address(), requests);
  ASSERT_TRUE(e.status.ok()) << e.status.error_message();
  ASSERT_EQ(e.responses.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(requests[i].request_id());
    const v1::ClusterResponse& r = e.responses[i];
    EXPECT_EQ(r.request_id(), requests[i].request_id());
    EXPECT_EQ(static_cast<absl::StatusCode>(r.error().code()), want[i].first);
    EXPECT_EQ(r.error().message(), want[i].second);
    if (want[i].first == absl::StatusCode::kOk) {
      EXPECT_EQ(r.labels_size(), requests[i].n());
      EXPECT_EQ(r.centers_size(), requests[i].k() * requests[i].d());
    } else {
      EXPECT_EQ(r.labels_size(), 0);
    }
  }
}

TEST_F(ServiceTest, OversizeMessageEndsTheStreamWithResourceExhausted) {
  // 1.1M floats: more than the server's 4 MiB message limit.
  const Matrix<float> big = Matrix<float>::Random(11, 100000);
  const Exchange e = Stream(server_->address(), {Request("big", "lloyd-onehot", big, 3, 1)});
  EXPECT_EQ(e.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << e.status.error_message();
  EXPECT_TRUE(e.responses.empty());
}

TEST_F(ServiceTest, AMessageAtTheSizeLimitIsServedAndOneByteMoreIsNot) {
  // A request padded through its id to exactly the server's 4 MiB limit.
  const auto sized = [](size_t bytes) {
    v1::ClusterRequest r = Request("", "lloyd-onehot", Matrix<float>::Random(8, 100000), 3, 1);
    r.set_request_id(std::string(bytes - r.ByteSizeLong() - 4, 'x'));
    // The id's length prefix grows with the id: trim to the exact size.
    while (r.ByteSizeLong() > bytes) r.mutable_request_id()->pop_back();
    while (r.ByteSizeLong() < bytes) r.mutable_request_id()->push_back('x');
    EXPECT_EQ(r.ByteSizeLong(), bytes);
    return r;
  };
  const Exchange at = Stream(server_->address(), {sized(4194304)});
  EXPECT_TRUE(at.status.ok()) << at.status.error_message();
  ASSERT_EQ(at.responses.size(), 1u);
  EXPECT_FALSE(at.responses[0].has_error()) << at.responses[0].error().message();
  const Exchange over = Stream(server_->address(), {sized(4194305)});
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << over.status.error_message();
  EXPECT_TRUE(over.responses.empty());
}

TEST_F(ServiceTest, LearnedModelIsServedAndBadFilesAreRefusedWithALogLine) {
  Client client({.target = server_->address()});
  const auto models = client.ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->size(), 11u);  // nine exact, two learned
  const auto found = std::find_if(models->begin(), models->end(), [](const v1::ModelInfo& m) {
    return m.name() == "test-learned";
  });
  ASSERT_NE(found, models->end());
  const v1::ModelInfo& learned = *found;
  EXPECT_EQ(learned.kind(), "learned");
  EXPECT_EQ(learned.d(), 3);
  EXPECT_EQ(learned.input_scaling(), "min-max");
  EXPECT_EQ(learned.provenance().seed(), 99u);
  EXPECT_EQ(learned.provenance().final_metrics().at("loss"), 1.5);
  EXPECT_EQ(std::vector<int>(learned.trained_inits().begin(), learned.trained_inits().end()),
            (std::vector<int>{v1::INIT_PLAIN_KMEANS_PLUS_PLUS, v1::INIT_RANDOM}));
  EXPECT_EQ(learned.default_init(), v1::INIT_PLAIN_KMEANS_PLUS_PLUS);
  for (const v1::ModelInfo& m : *models) {
    if (m.kind() == "learned") continue;
    EXPECT_EQ(m.trained_inits_size(), 0) << m.name();
    EXPECT_EQ(m.default_init(), v1::INIT_KMEANS_PLUS_PLUS) << m.name();
  }
  const std::string log = server_->Log();
  EXPECT_NE(log.find("refused " + ModelDir() + "/broken.kmt: " + ModelDir() +
                     "/broken.kmt is not a kmt.v1.ModelFile (protobuf parse failed)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("refused " + ModelDir() +
                     "/bad-shape.kmt: layer 0 theta2 Q is 2x5 with 25 values; tokens have 5 "
                     "dimensions"),
            std::string::npos)
      << log;

  // The served result is the model run on the batch scaled to [0, 1], its
  // centers mapped back; the request names no init, so the model's default,
  // the first it was trained from, chooses the initial centers.
  const Matrix<float> points = HundredThousand().points.topLeftCorner(3, 500) * 5.0f;
  const Exchange e = Stream(server_->address(), {Request("learned", "test-learned", points, 4, 3)});
  ASSERT_EQ(e.responses.size(), 1u);
  const v1::ClusterResponse& got = e.responses[0];
  ASSERT_FALSE(got.has_error()) << got.error().message();
  const Vector<float> lo = points.rowwise().minCoeff();
  const Vector<float> range = points.rowwise().maxCoeff() - lo;
  const Vector<float> inv = range.cwiseInverse();
  const Matrix<float> scaled = ((points.colwise() - lo).array().colwise() * inv.array()).matrix();
  const Matrix<float> init = *InitialCenters(scaled, 4, InitMethod::kPlainKMeansPlusPlus, 5);
  RunResult<float> run = *RunTransformer(LearnedModel(), scaled, init, {.layers = 3});
  EXPECT_EQ(run.path, Path::kDense);
  const Matrix<float> centers =
      ((run.centers.array().colwise() * range.array()).matrix()).colwise() + lo;
  EXPECT_LE((CentersOf(got, 3) - centers).norm(), 1e-5 * centers.norm());
  Labels labels;
  AssignNearest(points, centers, &labels);
  EXPECT_EQ(Labels(got.labels().begin(), got.labels().end()), labels);
}

// ListModels gives the traits a client acts on, so that it need not know
// models by name: spherical k-means compares unit vectors and is the one
// exact model that does not move with its points, Lloyd's models (and
// softmax Lloyd's at its default hardmax) run as resident jobs, a learned
// model claims none of them, and every model carries the server's
// --max_points.
TEST_F(ServiceTest, ListModelsGivesTheTraitsClientsActOn) {
  Client client({.target = server_->address()});
  const auto models = client.ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  struct Traits {
    bool unit_norm, translation_invariant, lloyd_at_defaults;
  };
  const std::map<std::string, Traits> expected = {
      {"lloyd-onehot", {false, true, true}},      {"lloyd-binary", {false, true, true}},
      {"lloyd-onehot-dot", {false, true, true}},  {"lloyd-onehot-linear", {false, true, true}},
      {"soft-kmeans", {false, true, false}},      {"trimmed-kmeans", {false, true, false}},
      {"robust-kmeans", {false, true, false}},    {"kmedoids", {false, true, false}},
      {"spherical-kmeans", {true, false, false}}, {"test-learned", {false, false, false}},
  };
  size_t checked = 0;
  for (const v1::ModelInfo& m : *models) {
    SCOPED_TRACE(m.name());
    EXPECT_EQ(m.max_points(), kMaxPoints);
    const auto found = expected.find(m.name());
    if (found == expected.end()) continue;
    ++checked;
    EXPECT_EQ(m.unit_norm(), found->second.unit_norm);
    EXPECT_EQ(m.translation_invariant(), found->second.translation_invariant);
    EXPECT_EQ(m.lloyd_at_defaults(), found->second.lloyd_at_defaults);
  }
  EXPECT_EQ(checked, expected.size());
}

// A model whose file lists smaller sizes serves them padded through the
// server: the result is the core's padded run of the model on the batch
// scaled as the server scales it, in the batch's own d and k; a size the file
// does not list is refused with the accepted ones named, and ListModels
// gives them.
TEST_F(ServiceTest, AListedSmallerSizeIsServedPadded) {
  const Matrix<float> points = HundredThousand().points.topLeftCorner(2, 400) * 5.0f;
  const Matrix<float> start = points.leftCols(3);
  v1::ClusterRequest padded = Request("padded", "test-learned-padded", points, 3, 3);
  padded.set_init(v1::INIT_GIVEN);
  padded.mutable_centers()->Add(start.data(), start.data() + start.size());
  const Exchange e = Stream(server_->address(),
                            {padded, Request("unlisted", "test-learned-padded", points, 2, 3)});
  ASSERT_TRUE(e.status.ok()) << e.status.error_message();
  ASSERT_EQ(e.responses.size(), 2u);
  const v1::ClusterResponse& got = e.responses[0];
  ASSERT_FALSE(got.has_error()) << got.error().message();
  ASSERT_EQ(got.centers_size(), 2 * 3);
  const Vector<float> lo = points.rowwise().minCoeff();
  const Vector<float> range = points.rowwise().maxCoeff() - lo;
  const auto scale = [&](const Matrix<float>& x) {
    return Matrix<float>(((x.colwise() - lo).array().colwise() * range.cwiseInverse().array()));
  };
  Model<float> model = LearnedModel();
  RunResult<float> run = *RunPadded(model, scale(points), scale(start), {.layers = 3});
  const Matrix<float> centers =
      ((run.centers.array().colwise() * range.array()).matrix()).colwise() + lo;
  EXPECT_LE((CentersOf(got, 2) - centers).norm(), 1e-5 * centers.norm());
  Labels labels;
  AssignNearest(points, centers, &labels);
  EXPECT_EQ(Labels(got.labels().begin(), got.labels().end()), labels);

  const v1::ClusterResponse& refused = e.responses[1];
  ASSERT_TRUE(refused.has_error());
  EXPECT_EQ(refused.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.error().message(),
            "model test-learned-padded was trained for d = 3, k = 4 and serves by padding "
            "(d, k) = (2, 3), (3, 2); the batch has d = 2, k = 2");

  std::string out, err;
  ASSERT_EQ(RunProgram({CliBinary(), "models", "--server=" + server_->address()}, &out, &err), 0)
      << err;
  EXPECT_NE(out.find("padded-sizes="), std::string::npos) << out;
}

TEST_F(ServiceTest, AGuardedRequestSaysWhichStepsItKeptAndCountsThem) {
  const Matrix<float> points = HundredThousand().points.topLeftCorner(3, 400) * 5.0f;
  v1::ClusterRequest guarded = Request("guarded", "test-learned", points, 4, 6);
  guarded.set_guard(true);
  guarded.set_return_trajectory(true);
  v1::ClusterRequest exact = Request("exact", "lloyd-onehot", points, 4, 6);
  exact.set_guard(true);
  const std::map<std::string, double> before = ScrapeMetrics(server_->metrics_port());
  const Exchange e = Stream(server_->address(), {guarded, exact});
  ASSERT_EQ(e.responses.size(), 2u);
  const v1::ClusterResponse& got = e.responses[0];
  ASSERT_FALSE(got.has_error()) << got.error().message();
  EXPECT_EQ(got.guard_learned_layers() + got.guard_lloyd_layers(), 6);
  ASSERT_EQ(got.layer_objectives_size(), 6);
  for (int t = 1; t < 6; ++t) EXPECT_LE(got.layer_objectives(t), got.layer_objectives(t - 1));
  EXPECT_EQ(e.responses[1].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(e.responses[1].error().message(),
            "guard applies to the learned models; lloyd-onehot is exact");

  const std::map<std::string, double> after = ScrapeMetrics(server_->metrics_port());
  for (const auto& [step, layers] : {std::pair{"learned", got.guard_learned_layers()},
                                     std::pair{"lloyd", got.guard_lloyd_layers()}}) {
    const std::string series =
        absl::StrCat("kmt_guard_layers_total{model=\"test-learned\",step=\"", step, "\"}");
    SCOPED_TRACE(series);
    EXPECT_EQ(after.at(series) - before.at(series), layers);
  }
}

TEST_F(ServiceTest, HealthIsServingAndReflectionListsTheService) {
  for (const std::string service : {"", "kmt.v1.KMeansTransformer"}) {
    const absl::StatusOr<int> health = HealthStatus(server_->address(), service);
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, 1) << service;
  }
  const absl::StatusOr<std::string> services = ReflectionListServices(server_->address());
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_NE(services->find("kmt.v1.KMeansTransformer"), std::string::npos);
  EXPECT_NE(services->find("grpc.health.v1.Health"), std::string::npos);
}

}  // namespace
}  // namespace kmt
