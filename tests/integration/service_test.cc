// The real kmt-server on a loopback port, driven by the real kmt CLI and
// client library, checked against the core computing the same thing in this
// process.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/init.h"
#include "core/random.h"
#include "core/transformer.h"
#include "learn/task_generator.h"
#include "proto/model_file.h"
#include "tests/integration/grpc_probe.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

constexpr int kMaxPoints = 150000;

// ---- Data on disk, as the CLI reads and writes it. ----

void WriteCsv(const std::string& path, const Matrix<float>& points) {
  std::ofstream out(path);
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    for (Eigen::Index l = 0; l < points.rows(); ++l) {
      out << (l ? "," : "") << absl::StrFormat("%.9g", points(l, i));
    }
    out << "\n";
  }
}

std::vector<std::vector<float>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<float>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<float> row;
    for (absl::string_view field : absl::StrSplit(line, ',')) {
      row.push_back(std::strtof(std::string(field).c_str(), nullptr));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Labels ReadLabels(const std::string& path) {
  std::ifstream in(path);
  Labels labels;
  for (int label; in >> label;) labels.push_back(label);
  return labels;
}

// ---- Requests and raw streams. ----

v1::ClusterRequest Request(const std::string& id, const std::string& model,
                           const Matrix<float>& points, int k, int iterations) {
  v1::ClusterRequest r;
  r.set_request_id(id);
  r.set_model(model);
  r.set_n(points.cols());
  r.set_d(static_cast<int>(points.rows()));
  r.mutable_points()->Add(points.data(), points.data() + points.size());
  r.set_k(k);
  r.set_iterations(iterations);
  r.set_seed(5);
  return r;
}

struct Exchange {
  std::vector<v1::ClusterResponse> responses;
  grpc::Status status;
};

// Sends every request on one stream and reads until the stream ends,
// counting responses in `received` as they arrive.
Exchange Stream(const std::string& address, const std::vector<v1::ClusterRequest>& requests,
                grpc::ClientContext* context, std::atomic<int>* received = nullptr) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  auto stream = stub->Cluster(context);
  std::thread writer([&] {
    for (const v1::ClusterRequest& r : requests) {
      if (!stream->Write(r)) break;
    }
    stream->WritesDone();
  });
  Exchange e;
  for (v1::ClusterResponse r; stream->Read(&r);) {
    e.responses.push_back(r);
    if (received) ++*received;
  }
  writer.join();
  e.status = stream->Finish();
  return e;
}

Exchange Stream(const std::string& address, const std::vector<v1::ClusterRequest>& requests) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return Stream(address, requests, &context);
}

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

// 100,000 points in d = 8 from a 6-component mixture, written as the CLI
// reads them (every value reads back as itself).
struct Dataset {
  Matrix<float> points;
  std::string csv;
};

const Dataset& HundredThousand() {
  static const Dataset* data = [] {
    auto* d = new Dataset;
    d->points = GenerateTask<float>({.n = 100000, .d = 8, .k = 6, .scale = 0.08}, 12).points;
    d->csv = TempDir("data") + "/points.csv";
    WriteCsv(d->csv, d->points);
    return d;
  }();
  return *data;
}

std::string CliBinary() { return KMT_CLI_BINARY; }

TEST_F(ServiceTest, CliPerBatchModeEqualsTheCoreOnEveryBatch) {
  const Dataset& data = HundredThousand();
  const std::string dir = TempDir("per-batch");
  std::string out, err;
  ASSERT_EQ(
      RunProgram({CliBinary(), "cluster", "--server=" + server_->address(), "--input=" + data.csv,
                  "--k=6", "--iterations=10", "--seed=7", "--batch_size=4096",
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
                        "--input=" + data.csv, "--k=6", "--iterations=10", "--init=given",
                        "--centers_in=" + dir + "/init.csv", "--batch_size=7000",
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
  EXPECT_NE(err.find("final objective"), std::string::npos);
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
      "unknown model 'lloyd-trinary'; ListModels names the 10 models served");
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
  ASSERT_EQ(models->size(), 10u);  // nine exact, one learned
  const v1::ModelInfo& learned = models->back();
  EXPECT_EQ(learned.name(), "test-learned");
  EXPECT_EQ(learned.kind(), "learned");
  EXPECT_EQ(learned.d(), 3);
  EXPECT_EQ(learned.input_scaling(), "min-max");
  EXPECT_EQ(learned.provenance().seed(), 99u);
  EXPECT_EQ(learned.provenance().final_metrics().at("loss"), 1.5);
  EXPECT_EQ(std::vector<int>(learned.trained_inits().begin(), learned.trained_inits().end()),
            (std::vector<int>{v1::INIT_PLAIN_KMEANS_PLUS_PLUS, v1::INIT_RANDOM}));
  EXPECT_EQ(learned.default_init(), v1::INIT_PLAIN_KMEANS_PLUS_PLUS);
  for (size_t i = 0; i + 1 < models->size(); ++i) {
    EXPECT_EQ((*models)[i].trained_inits_size(), 0) << (*models)[i].name();
    EXPECT_EQ((*models)[i].default_init(), v1::INIT_KMEANS_PLUS_PLUS) << (*models)[i].name();
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

// ---- Deadlines, cancellation and shutdown, each on a server of its own. ----

// A batch that keeps one worker busy for many seconds.
v1::ClusterRequest HeavyBatch() {
  static const Matrix<float> points =
      GenerateTask<float>({.n = 200000, .d = 16, .k = 64}, 4).points;
  return Request("heavy", "lloyd-onehot", points, 64, 1000);
}

// With one worker, a small batch is answered only once the worker is free.
bool SmallBatchAnswered(const std::string& address) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const Exchange e = Stream(
      address, {Request("small", "lloyd-onehot", HundredThousand().points.leftCols(300), 3, 3)},
      &context);
  return e.status.ok() && e.responses.size() == 1 && !e.responses[0].has_error();
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

// ---- Which threads may preempt which. ----

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

// A field of /proc/PID/status ("VmRSS", "Threads"), as a number.
int64_t ProcStatus(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, field + ":")) {
      return std::stoll(line.substr(field.size() + 1));
    }
  }
  return -1;
}

TEST(ServiceAbuse, TwoThousandIdleStreamsHoldNeitherThreadsNorMuchMemory) {
  const auto server = ServerProcess::Start({"--workers=2"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Client({.target = server->address()}).ListModels().ok());
  const int64_t threads_before = ProcStatus(server->pid(), "Threads");
  const int64_t rss_before = ProcStatus(server->pid(), "VmRSS");
  // Streams opened and left idle: no thread of the client waits on them.
  constexpr int kStreams = 2000;
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<
      std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::ClusterRequest, v1::ClusterResponse>>>
      streams;
  for (int i = 0; i < kStreams; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub->AsyncCluster(contexts.back().get(), &queue, contexts.back().get()));
  }
  for (int i = 0; i < kStreams; ++i) {
    void* tag;
    bool ok;
    ASSERT_TRUE(queue.Next(&tag, &ok));
    EXPECT_TRUE(ok);
  }
  // Give the server time to take every stream in.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const int64_t threads = ProcStatus(server->pid(), "Threads");
  const int64_t rss = ProcStatus(server->pid(), "VmRSS");
  std::printf("%d idle streams: server threads %lld -> %lld, RSS %lld -> %lld kB\n", kStreams,
              static_cast<long long>(threads_before), static_cast<long long>(threads),
              static_cast<long long>(rss_before), static_cast<long long>(rss));
  // Streams wait in gRPC's completion queues, not on threads; each holds a
  // few tens of kilobytes of buffers.
  EXPECT_LE(threads, threads_before + 8);
  EXPECT_LE(rss - rss_before, kStreams * 100);  // kB: at most 100 kB a stream
  // The server still answers a new client at once.
  EXPECT_TRUE(Client({.target = server->address()}).ListModels().ok());
  for (auto& context : contexts) context->TryCancel();
  streams.clear();
  queue.Shutdown();
  void* tag;
  bool ok;
  while (queue.Next(&tag, &ok)) {
  }
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(ServiceFaults, AReplicaKilledDuringAPerBatchRunLosesNothing) {
  const Dataset& data = HundredThousand();
  const auto run = [&](const std::string& servers, const std::string& dir, ServerProcess* victim) {
    std::string out, err;
    int code = -1;
    std::atomic<bool> done{false};
    std::thread cli([&] {
      code = RunProgram(
          {CliBinary(), "cluster", "--server=" + servers, "--input=" + data.csv, "--k=6",
           "--iterations=300", "--seed=7", "--batch_size=1024", "--streams=2", "--max_attempts=5",
           "--labels_out=" + dir + "/labels", "--centers_out=" + dir + "/centers.csv"},
          &out, &err);
    });
    if (victim != nullptr) {
      // Mid-run: once the victim has answered some batches.
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      EXPECT_FALSE(done) << "the run ended before the kill";
      victim->Signal(SIGKILL);
    }
    cli.join();
    EXPECT_EQ(code, 0) << err;
    EXPECT_NE(out.find("98 batches, 100000 points, 0 failed"), std::string::npos) << out << err;
    return std::pair{FileBytes(dir + "/labels"), FileBytes(dir + "/centers.csv")};
  };
  const auto a = ServerProcess::Start({"--workers=1"});
  const auto b = ServerProcess::Start({"--workers=1"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::string both = absl::StrCat("ipv4:", a->address(), ",", b->address());
  const auto calm = run(both, TempDir("calm"), nullptr);
  const auto killed = run(both, TempDir("killed"), a.get());
  EXPECT_EQ(a->Wait(absl::Seconds(5)), -1);  // died by the signal
  EXPECT_FALSE(calm.first.empty());
  EXPECT_TRUE(calm.first == killed.first) << "labels differ";
  EXPECT_TRUE(calm.second == killed.second) << "centers differ";
}

TEST(ServiceAbuse, AClientThatNeverReadsIsHeldByTheStreamWindow) {
  const auto server =
      ServerProcess::Start({"--workers=2", "--not_serving_delay=0s", "--shutdown_grace=5s"});
  ASSERT_NE(server, nullptr);
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateCustomChannel(server->address(), grpc::InsecureChannelCredentials(), args));
  const int64_t rss_before = ProcStatus(server->pid(), "VmRSS");
  // 256 KiB batches written as fast as they are taken; no response is read.
  const v1::ClusterRequest request =
      Request("r", "lloyd-onehot", Matrix<float>::Random(8, 8192), 6, 5);
  grpc::ClientContext context;
  grpc::CompletionQueue queue;
  void* tag;
  bool ok;
  auto stream = stub->AsyncCluster(&context, &queue, &context);
  ASSERT_TRUE(queue.Next(&tag, &ok) && ok);
  constexpr int kOffered = 2000;  // 500 MiB if nothing held the client back
  int taken = 0;
  for (; taken < kOffered; ++taken) {
    stream->Write(request, &context);
    const auto status =
        queue.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + std::chrono::seconds(3));
    if (status != grpc::CompletionQueue::NextStatus::GOT_EVENT) break;  // the write is held
    ASSERT_TRUE(ok);
  }
  const int64_t grown_kb = ProcStatus(server->pid(), "VmRSS") - rss_before;
  std::printf("a client that never reads: %d of %d batches of 256 KiB taken, server RSS +%lld kB\n",
              taken, kOffered, static_cast<long long>(grown_kb));
  // The client's writes stop completing: what the server does not take
  // waits in the client's own buffers. The server holds 16 batches in
  // flight, its 16 MiB stream window and the responses the client does not
  // read: tens of MiB, not the hundreds of MiB written.
  EXPECT_LT(taken, kOffered);
  EXPECT_LT(grown_kb, 128 * 1024);
  // The server is not stuck: a new client is served.
  EXPECT_TRUE(Client({.target = server->address()}).ListModels().ok());
  context.TryCancel();
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  stream.reset();
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0) << server->Log();
}

// A TCP relay on a free loopback port to `port`, passing the client's bytes
// on at `bytes_per_second` and the server's at full speed; one connection.
class SlowRelay {
 public:
  SlowRelay(int port, int bytes_per_second) : port_(port), rate_(bytes_per_second) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), length);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    listen(listener_, 1);
    listen_port_ = ntohs(address.sin_port);
    accepter_ = std::thread([this] { Relay(); });
  }
  ~SlowRelay() {
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    for (int fd : {client_.load(), server_.load()}) {
      if (fd >= 0) shutdown(fd, SHUT_RDWR);
    }
    accepter_.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", listen_port_); }

 private:
  void Relay() {
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port_);
    if (connect(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return;
    client_ = client;
    server_ = server;
    // 4 KiB pieces, each followed by the pause that keeps to the rate.
    const auto pipe = [](int from, int to, int rate) {
      char buffer[4096];
      for (;;) {
        const ssize_t got = read(from, buffer, sizeof(buffer));
        if (got <= 0 || write(to, buffer, got) != got) break;
        if (rate > 0) std::this_thread::sleep_for(std::chrono::microseconds(got * 1000000 / rate));
      }
      shutdown(to, SHUT_WR);
    };
    std::thread down(pipe, server, client, 0);
    pipe(client, server, rate_);
    down.join();
    // Forgotten before closed, so the destructor never touches a reused fd.
    client_ = -1;
    server_ = -1;
    close(client);
    close(server);
  }

  int port_, rate_, listener_, listen_port_ = 0;
  std::atomic<int> client_{-1}, server_{-1};
  std::thread accepter_;
};

TEST(ServiceAbuse, ATricklingMessageDoesNotHoldTheWorker) {
  // One worker; a 2 MiB batch arrives at 256 KiB/s, about 8 s. Messages are
  // read by gRPC's threads, so the worker serves another client meanwhile.
  const auto server = ServerProcess::Start({"--workers=1", "--not_serving_delay=0s"});
  ASSERT_NE(server, nullptr);
  SlowRelay relay(server->port(), 256 << 10);
  std::atomic<bool> trickled{false};
  int trickle_answered = 0;
  absl::Status trickle_status;
  std::thread slow([&] {
    Client client({.target = relay.address(), .max_attempts = 1});
    const v1::ClusterRequest big =
        Request("big", "lloyd-onehot", Matrix<float>::Random(8, 65536), 4, 3);
    bool sent = false;
    trickle_status = client.Cluster(
        [&](v1::ClusterRequest* r) {
          if (sent) return false;
          *r = big;
          return sent = true;
        },
        [&](v1::ClusterResponse&& response) { trickle_answered += !response.has_error(); });
    trickled = true;
  });
  // Once the trickle is under way, a direct client's batch is answered.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Client direct({.target = server->address()});
  const Matrix<float> points = Matrix<float>::Random(8, 1000);
  int answered = 0;
  bool sent = false;
  const absl::Status status = direct.Cluster(
      [&](v1::ClusterRequest* r) {
        if (sent) return false;
        *r = Request("small", "lloyd-onehot", points, 4, 3);
        return sent = true;
      },
      [&](v1::ClusterResponse&& response) { answered += !response.has_error(); });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(answered, 1);
  EXPECT_FALSE(trickled) << "the trickle ended before the direct batch was answered";
  slow.join();
  EXPECT_TRUE(trickle_status.ok()) << trickle_status;
  EXPECT_EQ(trickle_answered, 1);
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

TEST(ServiceStart, APortInUseIsAnErrorUnlessSharingIsAsked) {
  // Sharing takes both servers' consent (SO_REUSEPORT on each socket): a
  // server that does not ask is refused even by one that does.
  const auto first = ServerProcess::Start({"--allow_port_sharing"});
  ASSERT_NE(first, nullptr);
  std::string out, err;
  const std::string grpc_taken = absl::StrCat("--listen=127.0.0.1:", first->port());
  EXPECT_EQ(RunProgram({ServerBinary(), grpc_taken, "--metrics_listen=127.0.0.1:0"}, &out, &err),
            1);
  EXPECT_TRUE(absl::StrContains(err, absl::StrCat("cannot listen on 127.0.0.1:", first->port(),
                                                  ": the port is in use by another process")))
      << err;
  const std::string metrics_taken =
      absl::StrCat("--metrics_listen=127.0.0.1:", first->metrics_port());
  EXPECT_EQ(RunProgram({ServerBinary(), "--listen=127.0.0.1:0", metrics_taken}, &out, &err), 1);
  EXPECT_TRUE(absl::StrContains(
      err, absl::StrCat("cannot serve metrics on 127.0.0.1:", first->metrics_port())))
      << err;
  // Asked for by both, two servers share the port, and the first still serves.
  const auto second = ServerProcess::Start({grpc_taken, "--allow_port_sharing"});
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->port(), first->port());
  EXPECT_EQ(HealthStatus(first->address(), "").value_or(-1), 1);
  EXPECT_EQ(second->Terminate(absl::Seconds(30)), 0);
  EXPECT_EQ(first->Terminate(absl::Seconds(30)), 0);
}

TEST(ServiceShutdown, SigtermDuringBusyStreamsLosesNoAcceptedBatch) {
  // The grace is room for the 128 batches the streams have in flight when
  // draining begins: seconds in a release build, over a minute under
  // ThreadSanitizer.
  auto server =
      ServerProcess::Start({"--model_dir=", "--not_serving_delay=1s", "--shutdown_grace=240s"});
  ASSERT_NE(server, nullptr);
  const Matrix<float> points = GenerateTask<float>({.n = 4096, .d = 16, .k = 16}, 8).points;
  constexpr int kStreams = 8, kBatches = 150;
  std::atomic<int> received{0}, answered{0}, unavailable{0}, cut_off{0};
  std::vector<std::thread> streams;
  std::vector<std::string> problems(kStreams);
  for (int s = 0; s < kStreams; ++s) {
    streams.emplace_back([&, s] {
      std::vector<v1::ClusterRequest> requests;
      for (int b = 0; b < kBatches; ++b) {
        requests.push_back(Request(absl::StrCat(s, "-", b), "lloyd-onehot", points, 16, 60));
      }
      grpc::ClientContext context;
      const Exchange e = Stream(server->address(), requests, &context, &received);
      if (e.responses.size() != requests.size()) {
        problems[s] = absl::StrCat("answered ", e.responses.size(), " of ", kBatches,
                                   ", stream ended: ", e.status.error_message());
      } else if (e.status.error_code() == grpc::StatusCode::UNAVAILABLE) {
        // gRPC closes a connection as soon as its last call ends after the
        // shutdown began; a client still reading may then see the stream's
        // status as UNAVAILABLE. Every batch was answered, so nothing is lost
        // (docs/api.md, Shutdown).
        ++cut_off;
      } else if (!e.status.ok()) {
        problems[s] = "stream ended " + e.status.error_message();
      }
      for (size_t i = 0; i < e.responses.size(); ++i) {
        const v1::ClusterResponse& r = e.responses[i];
        if (r.request_id() != requests[i].request_id()) problems[s] += " out of order";
        if (!r.has_error()) {
          ++answered;
        } else if (r.error().code() == static_cast<int>(grpc::StatusCode::UNAVAILABLE)) {
          ++unavailable;
        } else {
          problems[s] += " " + r.error().message();
        }
      }
    });
  }
  while (received < 2 * kStreams) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  server->Signal(SIGTERM);
  // Health turns NOT_SERVING while the server still takes batches.
  absl::StatusOr<int> health;
  for (int i = 0; i < 100; ++i) {
    health = HealthStatus(server->address(), "");
    if (health.ok() && *health == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(health.ok() && *health == 2) << health.status();
  for (std::thread& t : streams) t.join();
  for (int s = 0; s < kStreams; ++s) EXPECT_EQ(problems[s], "") << "stream " << s;
  // Every batch was answered: computed, or refused at once as UNAVAILABLE
  // for another replica once draining began.
  EXPECT_EQ(answered + unavailable, kStreams * kBatches);
  EXPECT_GT(answered, 2 * kStreams);
  EXPECT_GT(unavailable, 0);  // the drain did happen while batches came in
  EXPECT_EQ(server->Wait(absl::Seconds(240)), 0);
  std::printf(
      "after SIGTERM: %d computed, %d sent back as UNAVAILABLE; %d streams fully answered "
      "saw the connection close before their status\n",
      answered.load(), unavailable.load(), cut_off.load());
}

TEST(ServiceShutdown, ADrainingStreamEndsItsLingerAfterItsLastAnswer) {
  // Once shutdown begins, gRPC closes a connection as soon as its last call
  // ends, and a close can lose answers the client has not read yet. So a
  // stream that ends while the server drains ends --drain_linger after its
  // last answer; a stream that ends before does not wait.
  auto server =
      ServerProcess::Start({"--model_dir=", "--not_serving_delay=0s", "--drain_linger=2s"});
  ASSERT_NE(server, nullptr);
  const Matrix<float> points = Matrix<float>::Random(4, 200);
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  v1::ClusterResponse r;
  // Half-closes a stream with no answer pending; its status, and how long
  // that status took.
  const auto end = [](auto& stream, absl::Duration* took) {
    const absl::Time half_closed = absl::Now();
    stream->WritesDone();
    v1::ClusterResponse none;
    EXPECT_FALSE(stream->Read(&none));
    const grpc::Status status = stream->Finish();
    *took = absl::Now() - half_closed;
    return status;
  };

  grpc::ClientContext before_context;
  auto before = stub->Cluster(&before_context);
  ASSERT_TRUE(before->Write(Request("before", "lloyd-onehot", points, 3, 5)));
  ASSERT_TRUE(before->Read(&r));
  EXPECT_FALSE(r.has_error()) << r.error().message();
  absl::Duration serving_end;
  EXPECT_TRUE(end(before, &serving_end).ok());

  grpc::ClientContext context;
  auto stream = stub->Cluster(&context);
  ASSERT_TRUE(stream->Write(Request("computed", "lloyd-onehot", points, 3, 5)));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_FALSE(r.has_error()) << r.error().message();
  server->Signal(SIGTERM);
  // Batches go on until one is answered UNAVAILABLE: the server drains.
  for (int i = 0;; ++i) {
    ASSERT_LT(i, 500) << "the server never began draining";
    ASSERT_TRUE(stream->Write(Request(absl::StrCat("probe-", i), "lloyd-onehot", points, 3, 5)));
    ASSERT_TRUE(stream->Read(&r));
    if (r.has_error()) {
      EXPECT_EQ(r.error().code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  absl::Duration draining_end;
  const grpc::Status status = end(stream, &draining_end);
  // The status itself may be cut off by the close (docs/api.md, Shutdown).
  EXPECT_TRUE(status.ok() || status.error_code() == grpc::StatusCode::UNAVAILABLE)
      << status.error_message();
  EXPECT_GE(draining_end, absl::Milliseconds(1900));
  EXPECT_LT(serving_end, absl::Seconds(2));
  EXPECT_EQ(server->Wait(absl::Seconds(60)), 0);
}

}  // namespace
}  // namespace kmt
