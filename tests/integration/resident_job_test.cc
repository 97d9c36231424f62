// Resident jobs on real kmt-server processes on loopback ports: the kmt CLI
// and the client library against the core on all points, weighted jobs and
// scikit-learn's stopping rule against one Cluster request, one replica
// against two, k-means‖ (reproducible, the same on one replica as on two,
// as good as greedy k-means++), a replica killed in the middle of a job,
// and the resident cap.
#include "client/resident_job.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cluster_client.h"
#include "client/minibatch_job.h"
#include "core/assign.h"
#include "core/empty_clusters.h"
#include "core/init.h"
#include "core/random.h"
#include "core/transformer.h"
#include "learn/task_generator.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/raw_payload.h"
#include "proto/request.h"
#include "server/resident_shard.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

constexpr int kD = 8, kK = 6;

const Matrix<float>& Points() {
  static const Matrix<float>* points = new Matrix<float>(
      GenerateTask<float>({.n = 60000, .d = kD, .k = 16, .scale = 0.3}, 21).points);
  return *points;
}

PointSource SourceOf(const Matrix<float>& points) {
  return [&points](int64_t first, int64_t count, float* out) {
    std::copy_n(points.col(first).data(), count * points.rows(), out);
    return absl::OkStatus();
  };
}

// The options of a job on replicas, flat as the tests set them.
struct JobOptions {
  std::vector<std::string> servers;
  int streams_per_server = 1;
  int k = 10;
  int iterations = 20;
  double tol = 0;
  std::vector<float> weights;
  bool count_label_changes = true;
  uint64_t seed = 1;
  ResidentSeeding seeding = ResidentSeeding::kGreedyKMeansPlusPlus;
  bool labels = true;
  int64_t chunk_bytes = 4 << 20;
  std::function<void(const std::string&)> log;
  int n_init = 1;
  EmptyClusterPolicy empty_clusters = EmptyClusterPolicy::kKeep;
  bool iteration_objectives = true;
};

absl::StatusOr<ResidentJobResult> RunJob(const JobOptions& o, int64_t n, int d,
                                         const PointSource& source,
                                         const std::optional<Matrix<float>>& initial) {
  ResidentJobOptions job{.k = o.k,
                         .iterations = o.iterations,
                         .seed = o.seed,
                         .seeding = o.seeding,
                         .labels = o.labels,
                         .log = o.log};
  job.n_init = o.n_init;
  job.empty_clusters = o.empty_clusters;
  job.iteration_objectives = o.iteration_objectives;
  if (initial) job.starts.push_back(*initial);
  return RunResidentJobOnReplicas({.servers = o.servers,
                                   .streams_per_server = o.streams_per_server,
                                   .weights = o.weights,
                                   .count_label_changes = o.count_label_changes,
                                   .chunk_bytes = o.chunk_bytes,
                                   .log = o.log},
                                  std::move(job), o.tol, n, d, source);
}

JobOptions Options(std::vector<std::string> servers, int streams) {
  return {.servers = std::move(servers),
          .streams_per_server = streams,
          .k = kK,
          .iterations = 8,
          .seed = 4,
          .chunk_bytes = 64 << 10};
}

// Continuous weights in [0, 2), every fifth point's 0 (as if removed).
std::vector<float> WeightsFor(int64_t n) {
  Rng rng(8);
  std::vector<float> weights(n);
  for (int64_t i = 0; i < n; ++i) {
    weights[i] = i % 5 == 0 ? 0.0f : static_cast<float>(2 * rng.Uniform());
  }
  return weights;
}

// A request of every point of `points` (d = kD) for lloyd-onehot with kK
// clusters and `iterations` layers.
v1::ClusterRequest AllPoints(const Matrix<float>& points, int iterations) {
  v1::ClusterRequest request;
  request.set_model("lloyd-onehot");
  request.set_n(points.cols());
  request.set_d(kD);
  request.mutable_points()->Add(points.data(), points.data() + points.size());
  request.set_k(kK);
  request.set_iterations(iterations);
  return request;
}

// One request's response through the real client.
v1::ClusterResponse ClusterOnce(const std::string& address, const v1::ClusterRequest& request) {
  Client client(ClientOptions{.target = address});
  v1::ClusterResponse response;
  const absl::Status status = client.Cluster(
      [&, sent = false](v1::ClusterRequest* r) mutable {
        if (sent) return false;
        *r = request;
        return sent = true;
      },
      [&](v1::ClusterResponse&& r) { response = std::move(r); });
  EXPECT_TRUE(status.ok()) << status;
  return response;
}

// GET /metrics over plain HTTP/1.0.
std::string Metrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (write(fd, request.data(), request.size()) < 0) return "";
  std::string response;
  char buffer[4096];
  for (ssize_t got; (got = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, got);
  close(fd);
  return response;
}

double Gauge(const std::string& metrics, const std::string& name) {
  const size_t at = metrics.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(metrics.substr(at + name.size() + 2));
}

class ResidentJobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    a_ = ServerProcess::Start({"--model_dir=", "--workers=1"}).release();
    b_ = ServerProcess::Start({"--model_dir=", "--workers=1"}).release();
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  static void TearDownTestSuite() {
    delete a_;
    delete b_;
  }
  static ServerProcess* a_;
  static ServerProcess* b_;
};
ServerProcess* ResidentJobTest::a_ = nullptr;
ServerProcess* ResidentJobTest::b_ = nullptr;

TEST_F(ResidentJobTest, CliWholeModeEqualsTheCoreOnAllPoints) {
  const Matrix<float>& points = Points();
  const std::string dir = TempDir("resident-cli");
  std::ofstream(dir + "/points.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(points.data()), points.size() * sizeof(float));
  const Matrix<float> init = *InitialCenters(points, kK, InitMethod::kKMeansPlusPlus, 3);
  {
    std::ofstream csv(dir + "/init.csv");
    for (int j = 0; j < kK; ++j) {
      for (int l = 0; l < kD; ++l) csv << (l ? "," : "") << absl::StrFormat("%.9g", init(l, j));
      csv << "\n";
    }
  }
  std::string out, err;
  ASSERT_EQ(RunProgram({KMT_CLI_BINARY, "cluster", "--mode=whole",
                        "--server=ipv4:" + a_->address() + "," + b_->address(), "--streams=2",
                        "--input=" + dir + "/points.f32", absl::StrCat("--d=", kD),
                        absl::StrCat("--k=", kK), "--iterations=10", "--tol=0", "--init=given",
                        "--centers_in=" + dir + "/init.csv", "--labels_out=" + dir + "/labels.npy",
                        "--centers_out=" + dir + "/centers.npy"},
                       &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("resident: 4 shards on 2 replicas, 0 moved"), std::string::npos) << out;
  const RunResult<float> want = *RunLloyd<float>({}, points, init, {.layers = 10});
  EXPECT_EQ(ReadNpy<int>(dir + "/labels.npy"), want.labels);
  const std::vector<float> centers = ReadNpy<float>(dir + "/centers.npy");
  ASSERT_EQ(centers.size(), static_cast<size_t>(kK * kD));
  // The double sums are added per shard here and per chunk in the core:
  // their float means may differ by one rounding.
  for (int j = 0; j < kK; ++j) {
    for (int l = 0; l < kD; ++l) {
      EXPECT_NEAR(centers[j * kD + l], want.centers(l, j), 1e-6 * std::abs(want.centers(l, j)));
    }
  }
}

// Scikit-learn's semantics over two replicas: weighted means, objective and
// sums, and the stopping rule (the shift against tol times the variance
// from the loaded points, or an unchanged assignment), as one weighted
// Cluster request with the same tol runs them on all points at once.
TEST_F(ResidentJobTest, AWeightedJobOnTwoReplicasEqualsOneWeightedClusterRequest) {
  const Matrix<float> points = Points().leftCols(30000);
  const int64_t n = points.cols();
  const std::vector<float> weights = WeightsFor(n);
  const Matrix<float> init = *InitialCenters(points, kK, InitMethod::kKMeansPlusPlus, 3);
  for (double tol : {1e-4, 0.0}) {
    SCOPED_TRACE(absl::StrCat("tol = ", tol));
    JobOptions options = Options({a_->address(), b_->address()}, 1);
    options.iterations = 300;
    options.tol = tol;
    options.weights = weights;
    const absl::StatusOr<ResidentJobResult> got = RunJob(options, n, kD, SourceOf(points), init);
    ASSERT_TRUE(got.ok()) << got.status();

    v1::ClusterRequest request = AllPoints(points, options.iterations);
    request.set_init(v1::INIT_GIVEN);
    request.mutable_centers()->Add(init.data(), init.data() + init.size());
    request.mutable_weights()->Add(weights.begin(), weights.end());
    request.set_tol(tol);
    const v1::ClusterResponse want = ClusterOnce(a_->address(), request);
    ASSERT_FALSE(want.has_error()) << want.error().message();

    // Stopped by the rule, for the same reason after the same iterations.
    EXPECT_LT(got->iterations_run, options.iterations);
    EXPECT_EQ(got->iterations_run, want.iterations_run());
    EXPECT_EQ(got->convergence, ConvergenceOf(want.convergence()));
    EXPECT_EQ(got->convergence, tol > 0 ? Convergence::kTolerance : Convergence::kLabelsUnchanged);
    EXPECT_EQ(got->labels, Labels(want.labels().begin(), want.labels().end()));
    // The weighted sums are added per shard here and per chunk there: the
    // means may differ by a rounding.
    for (int j = 0; j < kK; ++j) {
      for (int l = 0; l < kD; ++l) {
        const float c = want.centers(j * kD + l);
        EXPECT_NEAR(got->centers_as<float>()(l, j), c, 1e-6 * std::abs(c));
      }
    }
    EXPECT_NEAR(got->objective, want.objective(), 1e-9 * want.objective());
    // The weights count: unweighted, the same start ends elsewhere.
    options.weights.clear();
    const absl::StatusOr<ResidentJobResult> unweighted =
        RunJob(options, n, kD, SourceOf(points), init);
    ASSERT_TRUE(unweighted.ok()) << unweighted.status();
    EXPECT_NE(unweighted->centers, got->centers);
  }
}

// Points on an integer grid around six spots: every sum of their
// coordinates is exact, so a job's sums over shards and a request's over
// chunks are the same to the bit.
Matrix<float> GridPoints(int64_t n) {
  Rng rng(6);
  Matrix<float> spots(kD, 6);
  for (Eigen::Index i = 0; i < spots.size(); ++i) spots(i) = static_cast<float>(rng.Below(40));
  Matrix<float> points(kD, n);
  for (int64_t i = 0; i < n; ++i) {
    points.col(i) = spots.col(rng.Below(6));
    for (int l = 0; l < kD; ++l) points(l, i) += static_cast<float>(rng.Below(9)) - 4;
  }
  return points;
}

TEST_F(ResidentJobTest, RelocationRestartsAndRandomStartsEqualOneRequestOnAllPoints) {
  const Matrix<float> points = GridPoints(6000);
  const int64_t n = points.cols();
  // Given starts with a center twice: its second copy's cluster is empty
  // (ties go to the lower index) and relocated at the first update.
  Matrix<float> twice = points.leftCols(kK);
  twice.col(1) = twice.col(0);
  struct Case {
    const char* name;
    v1::Init init;
    int n_init;
    std::optional<Matrix<float>> start;
  };
  for (const Case& c : {Case{"random, 3 starts", v1::INIT_RANDOM, 3, std::nullopt},
                        Case{"k-means++, 2 starts", v1::INIT_KMEANS_PLUS_PLUS, 2, std::nullopt},
                        Case{"a center twice", v1::INIT_GIVEN, 1, twice}}) {
    SCOPED_TRACE(c.name);
    JobOptions options = Options({a_->address(), b_->address()}, 2);
    options.iterations = 40;
    options.n_init = c.n_init;
    options.empty_clusters = EmptyClusterPolicy::kRelocateFarthest;
    options.seeding = c.init == v1::INIT_RANDOM ? ResidentSeeding::kRandom
                                                : ResidentSeeding::kGreedyKMeansPlusPlus;
    const absl::StatusOr<ResidentJobResult> got = RunJob(options, n, kD, SourceOf(points), c.start);
    ASSERT_TRUE(got.ok()) << got.status();

    v1::ClusterRequest request = AllPoints(points, options.iterations);
    request.set_seed(options.seed);
    request.set_init(c.init);
    if (c.start) request.mutable_centers()->Add(c.start->data(), c.start->data() + c.start->size());
    request.set_n_init(c.n_init);
    request.set_empty_clusters(v1::EMPTY_CLUSTERS_RELOCATE_FARTHEST);
    request.set_tol(0);
    const v1::ClusterResponse want = ClusterOnce(a_->address(), request);
    ASSERT_FALSE(want.has_error()) << want.error().message();
    EXPECT_EQ(got->labels, Labels(want.labels().begin(), want.labels().end()));
    EXPECT_EQ(got->centers_as<float>(),
              Eigen::Map<const Matrix<float>>(want.centers().data(), kD, kK));
    EXPECT_EQ(got->objective, want.objective());
    EXPECT_EQ(got->iterations_run, want.iterations_run());
    EXPECT_EQ(got->best_restart, want.best_restart());
    EXPECT_EQ(got->restart_objectives, std::vector<double>(want.restart_objectives().begin(),
                                                           want.restart_objectives().end()));
    if (c.start) {
      EXPECT_GE(got->relocations, 1);
    }
  }
}

// GridPoints far from the origin, in double, with a part in 1/128s that
// float32 cannot hold at 1e6 (its spacing there is 1/16): every sum of
// their coordinates is still exact in double.
Matrix<double> FarGridPoints(int64_t n) {
  Rng rng(9);
  Matrix<double> points = GridPoints(n).cast<double>().array() + 1e6;
  for (Eigen::Index i = 0; i < points.size(); ++i) points(i) += rng.Below(8) / 128.0;
  return points;
}

PointSource64 SourceOf64(const Matrix<double>& points) {
  return [&points](int64_t first, int64_t count, double* out) {
    std::copy_n(points.col(first).data(), count * points.rows(), out);
    return absl::OkStatus();
  };
}

// The float64 twin of RelocationRestartsAndRandomStartsEqualOneRequestOnAllPoints:
// a job on float64 shards equals one float64 Cluster request on the same
// points to the bit, so its seeding, steps, relocation and centers are all
// in double.
TEST_F(ResidentJobTest, Float64JobsEqualOneFloat64RequestOnAllPoints) {
  const Matrix<double> points = FarGridPoints(6000);
  const int64_t n = points.cols();
  Matrix<double> twice = points.leftCols(kK);
  twice.col(1) = twice.col(0);
  struct Case {
    const char* name;
    v1::Init init;
    int n_init;
    std::optional<Matrix<double>> start;
  };
  for (const Case& c : {Case{"random, 3 starts", v1::INIT_RANDOM, 3, std::nullopt},
                        Case{"k-means++, 2 starts", v1::INIT_KMEANS_PLUS_PLUS, 2, std::nullopt},
                        Case{"a center twice", v1::INIT_GIVEN, 1, twice}}) {
    SCOPED_TRACE(c.name);
    ResidentJobOptions job{.k = kK, .iterations = 40, .seed = 4};
    job.n_init = c.n_init;
    job.empty_clusters = EmptyClusterPolicy::kRelocateFarthest;
    job.seeding = c.init == v1::INIT_RANDOM ? ResidentSeeding::kRandom
                                            : ResidentSeeding::kGreedyKMeansPlusPlus;
    if (c.start) job.starts.push_back(*c.start);
    const absl::StatusOr<ResidentJobResult> got =
        RunResidentJobOnReplicas({.servers = {a_->address(), b_->address()},
                                  .streams_per_server = 2,
                                  .chunk_bytes = 64 << 10},
                                 job, 0, n, kD, SourceOf64(points));
    ASSERT_TRUE(got.ok()) << got.status();

    v1::ClusterRequest request;
    request.set_model("lloyd-onehot");
    request.set_n(n);
    request.set_d(kD);
    EncodeFloat64(absl::MakeConstSpan(points.data(), points.size()), request.mutable_points_f64());
    request.set_k(kK);
    request.set_iterations(40);
    request.set_seed(4);
    request.set_init(c.init);
    if (c.start) {
      EncodeFloat64(absl::MakeConstSpan(c.start->data(), c.start->size()),
                    request.mutable_centers_f64());
    }
    request.set_n_init(c.n_init);
    request.set_empty_clusters(v1::EMPTY_CLUSTERS_RELOCATE_FARTHEST);
    request.set_tol(0);
    request.set_raw_response(true);
    const v1::ClusterResponse want = ClusterOnce(a_->address(), request);
    ASSERT_FALSE(want.has_error()) << want.error().message();
    Matrix<double> centers(kD, kK);
    ASSERT_EQ(want.centers_f64().size(), sizeof(double) * centers.size());
    DecodeFloat64(want.centers_f64(), centers.data());
    Labels labels(n);
    ASSERT_EQ(want.labels_i32().size(), sizeof(int32_t) * n);
    std::memcpy(labels.data(), want.labels_i32().data(), want.labels_i32().size());
    EXPECT_EQ(got->labels, labels);
    EXPECT_EQ(std::get<Matrix<double>>(got->centers), centers);
    EXPECT_EQ(got->centers_as<float>(), centers.cast<float>());
    // The sums are exact, the distances (far from the origin, to centers
    // that are not on the grid) are not: the objective adds them over the
    // shards in another order than one request does.
    EXPECT_NEAR(got->objective, want.objective(), 1e-12 * want.objective());
    EXPECT_EQ(got->iterations_run, want.iterations_run());
    EXPECT_EQ(got->best_restart, want.best_restart());
    ASSERT_EQ(got->restart_objectives.size(), static_cast<size_t>(want.restart_objectives_size()));
    for (int r = 0; r < want.restart_objectives_size(); ++r) {
      EXPECT_NEAR(got->restart_objectives[r], want.restart_objectives(r),
                  1e-12 * want.restart_objectives(r));
    }
    if (c.start) {
      EXPECT_GE(got->relocations, 1);
    }
  }
}

// One job is float32 or float64 throughout: a float64 shard refuses float32
// steps, and the stream of a shard whose chunks mix the two ends with
// INVALID_ARGUMENT naming the fields.
TEST_F(ResidentJobTest, MixedPrecisionInOneJobIsRefused) {
  auto channel = grpc::CreateChannel(a_->address(), grpc::InsecureChannelCredentials());
  auto stub = v1::KMeansTransformer::NewStub(channel);
  const std::vector<double> points64 = {1, 2, 3, 4};
  {
    grpc::ClientContext context;
    auto stream = stub->Job(&context);
    v1::JobRequest request;
    request.mutable_shard()->set_n(2);
    request.mutable_shard()->set_d(2);
    EncodeFloat64(points64, request.mutable_shard()->mutable_points_f64());
    ASSERT_TRUE(stream->Write(request));
    v1::JobResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.points_loaded(), 2);
    v1::JobRequest step;
    step.mutable_assign()->set_k(1);
    EncodeFloat32(std::vector<float>{1, 2}, step.mutable_assign()->mutable_centers_f32());
    ASSERT_TRUE(stream->Write(step));
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.error().code(), 3);
    EXPECT_EQ(response.error().message(),
              "centers comes as float32 (centers or centers_f32) for a float64 shard (its points "
              "came as points_f64): send centers_f64; one job's shards and steps are all float32 "
              "or all float64");
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  grpc::ClientContext context;
  auto stream = stub->Job(&context);
  v1::JobRequest request;
  request.mutable_shard()->set_n(4);
  request.mutable_shard()->set_d(2);
  EncodeFloat64(points64, request.mutable_shard()->mutable_points_f64());
  ASSERT_TRUE(stream->Write(request));
  request.mutable_shard()->clear_points_f64();
  EncodeFloat32(std::vector<float>{1, 2, 3, 4}, request.mutable_shard()->mutable_points_f32());
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  v1::JobResponse response;
  while (stream->Read(&response)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "points comes as float32 (points or points_f32) for a float64 shard (its points came "
            "as points_f64): send points_f64; one job's shards and steps are all float32 or all "
            "float64");
}

TEST_F(ResidentJobTest, CliWholeModeRestartsAndRelocatesAsOneRequest) {
  const Matrix<float> points = GridPoints(6000);
  const std::string dir = TempDir("resident-cli-restarts");
  std::ofstream(dir + "/points.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(points.data()), points.size() * sizeof(float));
  std::string out, err;
  ASSERT_EQ(
      RunProgram({KMT_CLI_BINARY, "cluster", "--mode=whole",
                  "--server=ipv4:" + a_->address() + "," + b_->address(), "--streams=2",
                  "--input=" + dir + "/points.f32", absl::StrCat("--d=", kD),
                  absl::StrCat("--k=", kK), "--iterations=30", "--tol=0", "--init=random",
                  "--n_init=3", "--empty_clusters=relocate-farthest", "--seed=9",
                  "--labels_out=" + dir + "/labels.npy", "--centers_out=" + dir + "/centers.npy"},
                 &out, &err),
      0)
      << err;
  EXPECT_NE(out.find("resident: 4 shards on 2 replicas"), std::string::npos) << out;
  v1::ClusterRequest request = AllPoints(points, 30);
  request.set_seed(9);
  request.set_init(v1::INIT_RANDOM);
  request.set_n_init(3);
  request.set_empty_clusters(v1::EMPTY_CLUSTERS_RELOCATE_FARTHEST);
  request.set_tol(0);
  const v1::ClusterResponse want = ClusterOnce(a_->address(), request);
  ASSERT_FALSE(want.has_error()) << want.error().message();
  EXPECT_EQ(ReadNpy<int>(dir + "/labels.npy"), Labels(want.labels().begin(), want.labels().end()));
  EXPECT_EQ(ReadNpy<float>(dir + "/centers.npy"),
            std::vector<float>(want.centers().begin(), want.centers().end()));
}

TEST_F(ResidentJobTest, WeightedKMeansPlusPlusOverTheShardsEqualsTheCoreOnAllPoints) {
  const std::vector<float> weights = WeightsFor(Points().cols());
  const Vector<float> core_weights =
      Eigen::Map<const Vector<float>>(weights.data(), weights.size());
  for (bool plain : {false, true}) {
    SCOPED_TRACE(plain ? "plain" : "greedy");
    JobOptions options = Options({a_->address(), b_->address()}, 2);
    options.iterations = 0;
    options.seeding =
        plain ? ResidentSeeding::kPlainKMeansPlusPlus : ResidentSeeding::kGreedyKMeansPlusPlus;
    options.weights = weights;
    const absl::StatusOr<ResidentJobResult> got =
        RunJob(options, Points().cols(), kD, SourceOf(Points()), std::nullopt);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(
        got->centers_as<float>(),
        *ChooseInitialCenters(
            Points(), kK, plain ? InitMethod::kPlainKMeansPlusPlus : InitMethod::kKMeansPlusPlus, 4,
            {}, &core_weights));
  }
}

// Each assignment's label changes, summed over the shards, are those
// between the core's successive assignments; without the count, the shift
// rule alone stops the job at the same iteration.
TEST_F(ResidentJobTest, EachIterationsLabelChangesAreCountedOverAllShards) {
  const Matrix<float> init = *InitialCenters(Points(), kK, InitMethod::kKMeansPlusPlus, 3);
  JobOptions options = Options({a_->address(), b_->address()}, 2);
  options.iterations = 6;
  const absl::StatusOr<ResidentJobResult> got =
      RunJob(options, Points().cols(), kD, SourceOf(Points()), init);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->iterations_run, 6);
  const RunResult<float> want =
      *RunLloyd<float>({}, Points(), init, {.layers = 6, .record_trajectory = true});
  std::vector<int64_t> changes;
  for (int t = 1; t <= 6; ++t) {
    const Labels& before = want.trajectory[t - 1].labels;
    const Labels& after = t < 6 ? want.trajectory[t].labels : want.labels;
    int64_t changed = 0;
    for (size_t i = 0; i < after.size(); ++i) changed += before[i] != after[i];
    changes.push_back(changed);
  }
  EXPECT_EQ(got->labels_changed, changes);

  options.iterations = 300;
  const absl::StatusOr<ResidentJobResult> counted =
      RunJob(options, Points().cols(), kD, SourceOf(Points()), init);
  options.count_label_changes = false;
  const absl::StatusOr<ResidentJobResult> uncounted =
      RunJob(options, Points().cols(), kD, SourceOf(Points()), init);
  ASSERT_TRUE(counted.ok()) << counted.status();
  ASSERT_TRUE(uncounted.ok()) << uncounted.status();
  EXPECT_EQ(counted->convergence, Convergence::kLabelsUnchanged);
  EXPECT_EQ(counted->labels_changed.back(), 0);
  EXPECT_EQ(uncounted->convergence, Convergence::kTolerance);
  EXPECT_EQ(uncounted->labels_changed, std::vector<int64_t>(uncounted->iterations_run, -1));
  EXPECT_EQ(uncounted->iterations_run, counted->iterations_run);
  EXPECT_EQ(uncounted->centers, counted->centers);
  EXPECT_EQ(uncounted->labels, counted->labels);
}

// A job that asks for the initial and final objectives alone (the CLI's
// default, kmt.KMeans without verbose) lets the shards' bounds skip the
// points they keep: the same answer as a job that asks for every
// iteration's, on one shard large enough for them (and exact sums), with
// the iterations' objectives NaN and logged without one.
TEST_F(ResidentJobTest, AJobWithoutIterationObjectivesGivesTheSameAnswer) {
  constexpr int k = 32;
  const Matrix<float> init = *InitialCenters(Points(), k, InitMethod::kKMeansPlusPlus, 3);
  JobOptions options = Options({a_->address()}, 1);
  options.k = k;
  options.iterations = 40;
  const absl::StatusOr<ResidentJobResult> every =
      RunJob(options, Points().cols(), kD, SourceOf(Points()), init);
  options.iteration_objectives = false;
  std::vector<std::string> lines;
  options.log = [&lines](const std::string& line) { lines.push_back(line); };
  const absl::StatusOr<ResidentJobResult> ends =
      RunJob(options, Points().cols(), kD, SourceOf(Points()), init);
  ASSERT_TRUE(every.ok()) << every.status();
  ASSERT_TRUE(ends.ok()) << ends.status();
  EXPECT_GT(every->iterations_run, 5);
  EXPECT_EQ(ends->iterations_run, every->iterations_run);
  EXPECT_EQ(ends->convergence, every->convergence);
  EXPECT_EQ(ends->centers, every->centers);
  EXPECT_EQ(ends->labels, every->labels);
  EXPECT_EQ(ends->labels_changed, every->labels_changed);
  EXPECT_EQ(ends->objective, every->objective);
  EXPECT_EQ(ends->initial_objective, every->initial_objective);
  ASSERT_EQ(ends->objectives.size(), every->objectives.size());
  // The last is the labels step's, the final objective.
  for (size_t t = 0; t + 1 < every->objectives.size(); ++t) {
    EXPECT_TRUE(std::isfinite(every->objectives[t]));
    EXPECT_TRUE(std::isnan(ends->objectives[t])) << t;
  }
  EXPECT_EQ(ends->objectives.back(), every->objective);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "step 1, labels changed " + std::to_string(ends->labels_changed[0])),
            lines.end());
}

// --weights_in, resident and by passes: the library's weighted job, and
// the same iterations by the same rule.
TEST_F(ResidentJobTest, CliWholeModeWeighsThePointsByAWeightsFile) {
  const Matrix<float> points = Points().leftCols(20000);
  const int64_t n = points.cols();
  const std::vector<float> weights = WeightsFor(n);
  const Matrix<float> init = *InitialCenters(points, kK, InitMethod::kKMeansPlusPlus, 3);
  const std::string dir = TempDir("resident-weights");
  std::ofstream(dir + "/points.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(points.data()), points.size() * sizeof(float));
  {
    std::ofstream text(dir + "/weights.txt");
    for (float w : weights) text << absl::StrFormat("%.9g", w) << "\n";
    std::ofstream csv(dir + "/init.csv");
    for (int j = 0; j < kK; ++j) {
      for (int l = 0; l < kD; ++l) csv << (l ? "," : "") << absl::StrFormat("%.9g", init(l, j));
      csv << "\n";
    }
  }
  JobOptions options = Options({a_->address(), b_->address()}, 1);
  options.iterations = 300;
  options.tol = 1e-4;
  options.weights = weights;
  const absl::StatusOr<ResidentJobResult> want = RunJob(options, n, kD, SourceOf(points), init);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->convergence, Convergence::kTolerance);
  const std::string iterations = absl::StrCat("after ", want->iterations_run,
                                              " iterations (converged: center shift within tol)");
  for (bool resident : {true, false}) {
    SCOPED_TRACE(resident ? "resident" : "by passes");
    std::string out, err;
    ASSERT_EQ(
        RunProgram({KMT_CLI_BINARY, "cluster", "--mode=whole",
                    "--server=ipv4:" + a_->address() + "," + b_->address(), "--streams=1",
                    resident ? "--resident=true" : "--resident=false",
                    "--input=" + dir + "/points.f32", absl::StrCat("--d=", kD),
                    absl::StrCat("--k=", kK), "--iterations=300", "--tol=1e-4", "--init=given",
                    "--centers_in=" + dir + "/init.csv", "--weights_in=" + dir + "/weights.txt",
                    "--labels_out=" + dir + "/labels.npy", "--centers_out=" + dir + "/centers.npy"},
                   &out, &err),
        0)
        << err;
    EXPECT_NE(out.find(iterations), std::string::npos) << out;
    EXPECT_EQ(ReadNpy<int>(dir + "/labels.npy"), want->labels);
    const std::vector<float> centers = ReadNpy<float>(dir + "/centers.npy");
    ASSERT_EQ(centers.size(), static_cast<size_t>(kK * kD));
    for (int j = 0; j < kK; ++j) {
      for (int l = 0; l < kD; ++l) {
        const float c = want->centers_as<float>()(l, j);
        EXPECT_NEAR(centers[j * kD + l], c, 1e-6 * std::abs(c));
      }
    }
  }
  std::string out, err;
  std::ofstream(dir + "/short.txt") << "1\n2\n";
  EXPECT_NE(RunProgram({KMT_CLI_BINARY, "cluster", "--mode=whole", "--server=" + a_->address(),
                        "--input=" + dir + "/points.f32", absl::StrCat("--d=", kD),
                        absl::StrCat("--k=", kK), "--weights_in=" + dir + "/short.txt"},
                       &out, &err),
            0);
  EXPECT_NE(err.find(absl::StrCat("short.txt has 2 weights for ", n, " points")), std::string::npos)
      << err;
}

TEST_F(ResidentJobTest, BadWeightsAreRefusedBeforeAnyShardIsLoaded) {
  JobOptions options = Options({a_->address()}, 1);
  const auto refusal = [&](std::vector<float> weights) {
    options.weights = std::move(weights);
    const absl::StatusOr<ResidentJobResult> got =
        RunJob(options, 10, kD, SourceOf(Points()), std::nullopt);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(got.status().message());
  };
  EXPECT_EQ(refusal({1, 2, 3}), "weights has 3 values, expected n = 10");
  EXPECT_EQ(refusal(std::vector<float>(10, 0.0f)), "weights are all 0: no point would count");
  std::vector<float> weights(10, 1.0f);
  weights[2] = -0.5f;
  EXPECT_EQ(refusal(weights), "weight 2 = -0.5, must be finite and at least 0");
  weights.assign(10, 0.0f);
  weights[0] = weights[1] = 1;
  EXPECT_EQ(refusal(weights), "only 2 points have a positive weight, fewer than k = 6");
}

TEST_F(ResidentJobTest, KMeansPlusPlusOverTheShardsEqualsTheCoreOnAllPoints) {
  for (bool plain : {false, true}) {
    SCOPED_TRACE(plain ? "plain" : "greedy");
    JobOptions options = Options({a_->address(), b_->address()}, 2);
    options.iterations = 0;
    options.seeding =
        plain ? ResidentSeeding::kPlainKMeansPlusPlus : ResidentSeeding::kGreedyKMeansPlusPlus;
    const absl::StatusOr<ResidentJobResult> got =
        RunJob(options, Points().cols(), kD, SourceOf(Points()), std::nullopt);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(
        got->centers_as<float>(),
        *InitialCenters(Points(), kK,
                        plain ? InitMethod::kPlainKMeansPlusPlus : InitMethod::kKMeansPlusPlus, 4));
  }
}

// More labels than one response carries (2^20): they arrive over several,
// in order, and equal the core's.
TEST_F(ResidentJobTest, ALargeShardsLabelsComeOverSeveralResponses) {
  const int n = (1 << 21) + 4321;
  Matrix<float> points(1, n);
  for (int64_t i = 0; i < n; ++i) points(0, i) = static_cast<float>((i * 7919) % 1000);
  JobOptions options = Options({a_->address()}, 1);
  options.k = 3;
  options.iterations = 2;
  options.chunk_bytes = 4 << 20;
  Matrix<float> init(1, 3);
  init << 100, 500, 900;
  const absl::StatusOr<ResidentJobResult> got = RunJob(options, n, 1, SourceOf(points), init);
  ASSERT_TRUE(got.ok()) << got.status();
  const RunResult<float> want = *RunLloyd<float>({}, points, init, {.layers = 2});
  ASSERT_EQ(got->labels.size(), static_cast<size_t>(n));
  EXPECT_EQ(got->labels, want.labels);
}

TEST_F(ResidentJobTest, TwoReplicasGiveTheResultOfOne) {
  const absl::StatusOr<ResidentJobResult> one =
      RunJob(Options({a_->address()}, 2), Points().cols(), kD, SourceOf(Points()), std::nullopt);
  const absl::StatusOr<ResidentJobResult> two =
      RunJob(Options({a_->address(), b_->address()}, 1), Points().cols(), kD, SourceOf(Points()),
             std::nullopt);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(one->centers, two->centers);
  EXPECT_EQ(one->labels, two->labels);
  EXPECT_EQ(one->objective, two->objective);
  EXPECT_EQ(one->objectives, two->objectives);
}

// Mini-batch k-means on real replicas (client/minibatch_job.h): the steps
// a shard runs itself in one request are the driver's round trips on that
// shard to the bit, and two replicas (the batches split over them, their
// sums added in shard order) agree with one to round-off; every point's
// label and the objective come from the last pass.
TEST_F(ResidentJobTest, MiniBatchStepsOnTheShardAreTheDriversSteps) {
  const Matrix<float>& points = Points();
  const int64_t n = points.cols();
  const auto run = [&](std::vector<std::string> servers, bool on_server) {
    MiniBatchOptions options{.rules = {.k = kK,
                                       .batch_size = 512,
                                       .steps = 40,
                                       .max_no_improvement = -1,
                                       .reassignment_ratio = 0.2},
                             .random = NumpyRandomState(3),
                             .steps_on_server = on_server};
    options.centers = points.leftCols(kK).cast<double>();
    return RunMiniBatchJobOnReplicas({.servers = std::move(servers), .chunk_bytes = 64 << 10},
                                     std::move(options), n, kD, SourceOf(points));
  };
  const absl::StatusOr<MiniBatchResult> on_shard = run({a_->address()}, true);
  const absl::StatusOr<MiniBatchResult> driven = run({a_->address()}, false);
  const absl::StatusOr<MiniBatchResult> two = run({a_->address(), b_->address()}, true);
  ASSERT_TRUE(on_shard.ok()) << on_shard.status();
  ASSERT_TRUE(driven.ok()) << driven.status();
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_TRUE(on_shard->steps_on_server);
  EXPECT_FALSE(driven->steps_on_server);
  EXPECT_FALSE(two->steps_on_server);
  EXPECT_EQ(on_shard->state.steps_run, 40);
  EXPECT_EQ(on_shard->state.centers, driven->state.centers);
  EXPECT_EQ(on_shard->state.counts, driven->state.counts);
  EXPECT_EQ(on_shard->state.ewa_inertia, driven->state.ewa_inertia);
  EXPECT_EQ(on_shard->state.random.key(), driven->state.random.key());
  EXPECT_EQ(on_shard->state.random.pos(), driven->state.random.pos());
  EXPECT_EQ(on_shard->labels, driven->labels);
  EXPECT_LT((two->state.centers - on_shard->state.centers).cwiseAbs().maxCoeff(), 1e-5);
  EXPECT_EQ(two->labels, on_shard->labels);
  // The labels and objective of the final centers over every point.
  Labels labels;
  const Matrix<float> centers = on_shard->state.centers.cast<float>();
  const double objective = AssignNearest(points, centers, &labels);
  EXPECT_EQ(on_shard->labels, labels);
  EXPECT_NEAR(on_shard->objective, objective, 1e-9 * objective);
}

TEST_F(ResidentJobTest, ResidentBytesAndJobsAreMetricsWhileAStreamLives) {
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateChannel(a_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->Job(&context);
  v1::JobRequest request;
  request.mutable_shard()->set_n(1000);
  request.mutable_shard()->set_d(kD);
  request.mutable_shard()->mutable_points()->Add(Points().data(), Points().data() + 1000 * kD);
  ASSERT_TRUE(stream->Write(request));
  v1::JobResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.points_loaded(), 1000);
  std::string metrics = Metrics(a_->metrics_port());
  EXPECT_EQ(Gauge(metrics, "kmt_resident_bytes"), ResidentShard::Bytes(1000, kD)) << metrics;
  EXPECT_EQ(Gauge(metrics, "kmt_jobs_in_flight"), 1);
  EXPECT_GT(Gauge(metrics, "kmt_resident_limit_bytes"), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  // The reactor gives the bytes back once gRPC is done with the call.
  for (int i = 0; i < 500 && Gauge(metrics, "kmt_jobs_in_flight") != 0; ++i) {
    usleep(10000);
    metrics = Metrics(a_->metrics_port());
  }
  EXPECT_EQ(Gauge(metrics, "kmt_resident_bytes"), 0);
  EXPECT_EQ(Gauge(metrics, "kmt_jobs_in_flight"), 0);
}

TEST_F(ResidentJobTest, PythonDriverWithStubsGeneratedFromTheProtoEqualsTheCore) {
  const Matrix<float> points = Points().leftCols(5000);
  const std::string dir = TempDir("resident-python");
  std::ofstream(dir + "/points.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(points.data()), points.size() * sizeof(float));
  std::string out, err;
  ASSERT_EQ(
      RunProgram({"/usr/bin/python3", KMT_SOURCE_DIR "/docs/examples/python_resident_job.py",
                  "--servers=" + a_->address() + "," + b_->address(),
                  "--points=" + dir + "/points.f32", absl::StrCat("--d=", kD),
                  absl::StrCat("--k=", kK), "--iterations=7", "--labels_out=" + dir + "/labels",
                  "--proto_dir=" KMT_SOURCE_DIR "/proto", "--out_dir=" + dir + "/stubs"},
                 &out, &err),
      0)
      << err;
  EXPECT_NE(out.find("5000 labels on 2 replicas, 6 centers"), std::string::npos) << out;
  const RunResult<float> want = *RunLloyd<float>({}, points, points.leftCols(kK), {.layers = 7});
  std::ifstream in(dir + "/labels");
  Labels labels;
  for (int label; in >> label;) labels.push_back(label);
  EXPECT_EQ(labels, want.labels);
}

// k-means‖ through the CLI: what it writes for a seed, over two replicas.
struct CliRun {
  std::vector<int> labels;
  std::vector<float> centers;
  std::string out;
};
CliRun KMeansParallelCli(const std::string& dir, const std::string& servers, int streams,
                         uint64_t seed) {
  std::string err;
  CliRun run;
  EXPECT_EQ(
      RunProgram({KMT_CLI_BINARY, "cluster", "--mode=whole", "--server=" + servers,
                  absl::StrCat("--streams=", streams), "--input=" + dir + "/points.f32",
                  absl::StrCat("--d=", kD), "--k=16", "--iterations=3",
                  absl::StrCat("--seed=", seed), "--init=kmeans||",
                  "--labels_out=" + dir + "/labels.npy", "--centers_out=" + dir + "/centers.npy"},
                 &run.out, &err),
      0)
      << err;
  run.labels = ReadNpy<int>(dir + "/labels.npy");
  run.centers = ReadNpy<float>(dir + "/centers.npy");
  return run;
}

TEST_F(ResidentJobTest, CliKMeansParallelIsReproducibleBySeedAndTheSameOnOneReplicaAsOnTwo) {
  const std::string dir = TempDir("resident-kmeans-parallel");
  std::ofstream(dir + "/points.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(Points().data()), Points().size() * sizeof(float));
  const std::string both = "ipv4:" + a_->address() + "," + b_->address();
  const CliRun first = KMeansParallelCli(dir, both, 1, 5);
  EXPECT_NE(first.out.find("resident: 2 shards on 2 replicas"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("k-means||: 2 rounds, "), std::string::npos) << first.out;
  ASSERT_EQ(first.labels.size(), static_cast<size_t>(Points().cols()));
  ASSERT_EQ(first.centers.size(), static_cast<size_t>(16 * kD));
  const CliRun again = KMeansParallelCli(dir, both, 1, 5);
  EXPECT_EQ(again.centers, first.centers);
  EXPECT_EQ(again.labels, first.labels);
  // The same two shards on one replica.
  const CliRun one = KMeansParallelCli(dir, a_->address(), 2, 5);
  EXPECT_NE(one.out.find("resident: 2 shards on 1 replicas"), std::string::npos) << one.out;
  EXPECT_EQ(one.centers, first.centers);
  EXPECT_EQ(one.labels, first.labels);
  EXPECT_NE(KMeansParallelCli(dir, both, 1, 6).centers, first.centers);

  std::string out, err;
  EXPECT_NE(RunProgram({KMT_CLI_BINARY, "cluster", "--mode=per-batch", "--server=" + a_->address(),
                        "--input=" + dir + "/points.f32", absl::StrCat("--d=", kD), "--k=16",
                        "--init=kmeans||"},
                       &out, &err),
            0);
  EXPECT_NE(err.find("--init=kmeans|| runs in whole mode's resident job only"), std::string::npos)
      << err;
}

TEST_F(ResidentJobTest, KMeansParallelConvergesAsCloseAsGreedyKMeansPlusPlusOnBlobs) {
  JobOptions options = Options({a_->address(), b_->address()}, 2);
  options.k = 16;
  options.iterations = 100;
  options.tol = 1e-4;
  options.labels = false;
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    options.seed = seed;
    options.seeding = ResidentSeeding::kGreedyKMeansPlusPlus;
    const absl::StatusOr<ResidentJobResult> greedy =
        RunJob(options, Points().cols(), kD, SourceOf(Points()), std::nullopt);
    options.seeding = ResidentSeeding::kKMeansParallel;
    const absl::StatusOr<ResidentJobResult> parallel =
        RunJob(options, Points().cols(), kD, SourceOf(Points()), std::nullopt);
    ASSERT_TRUE(greedy.ok()) << greedy.status();
    ASSERT_TRUE(parallel.ok()) << parallel.status();
    EXPECT_EQ(parallel->init_rounds, 2);
    // About 1 + 2k candidates.
    EXPECT_GT(parallel->init_candidates, 16);
    EXPECT_LT(parallel->init_candidates, 64);
    EXPECT_LT(parallel->objective, 1.01 * greedy->objective);
  }
}

// Two replicas of their own for each test, one of which it kills.
class ResidentJobFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = ServerProcess::Start({"--model_dir=", "--workers=1"});
    b_ = ServerProcess::Start({"--model_dir=", "--workers=1"});
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  std::unique_ptr<ServerProcess> a_, b_;
};

TEST_F(ResidentJobFaults, AReplicaKilledMidJobChangesNothing) {
  const JobOptions options = Options({a_->address(), b_->address()}, 2);
  const absl::StatusOr<ResidentJobResult> clean =
      RunJob(options, Points().cols(), kD, SourceOf(Points()), std::nullopt);
  ASSERT_TRUE(clean.ok()) << clean.status();
  ASSERT_GE(clean->iterations_run, 4);

  // Killed after the third iteration's sums are in: the fourth finds its
  // shards' streams broken.
  JobOptions faulty = options;
  std::vector<std::string> news;
  faulty.log = [&](const std::string& line) {
    news.push_back(line);
    if (line.rfind("step 3 ", 0) == 0) b_->Signal(SIGKILL);
  };
  const absl::StatusOr<ResidentJobResult> got =
      RunJob(faulty, Points().cols(), kD, SourceOf(Points()), std::nullopt);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->shard_moves, 2);  // b held two of the four shards
  EXPECT_EQ(got->centers, clean->centers);
  EXPECT_EQ(got->labels, clean->labels);
  EXPECT_EQ(got->objective, clean->objective);
  EXPECT_EQ(got->objectives, clean->objectives);
  bool told = false;
  for (const std::string& line : news) told |= line.find("failed") != std::string::npos;
  EXPECT_TRUE(told);
}

TEST_F(ResidentJobFaults, AReplicaKilledDuringKMeansPlusPlusChangesNothing) {
  JobOptions options = Options({a_->address(), b_->address()}, 2);
  options.iterations = 2;
  // Killed once 4 centers are chosen: b's shards go to a, which first takes
  // the chosen centers into their distances.
  options.log = [&](const std::string& line) {
    if (line.rfind("k-means++: 4 of", 0) == 0) b_->Signal(SIGKILL);
  };
  const absl::StatusOr<ResidentJobResult> got =
      RunJob(options, Points().cols(), kD, SourceOf(Points()), std::nullopt);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->shard_moves, 2);
  const Matrix<float> init = *InitialCenters(Points(), kK, InitMethod::kKMeansPlusPlus, 4);
  const RunResult<float> want = *RunLloyd<float>({}, Points(), init, {.layers = 2});
  EXPECT_EQ(got->labels, want.labels);
}

TEST_F(ResidentJobFaults, AReplicaKilledDuringKMeansParallelChangesNothing) {
  JobOptions options = Options({a_->address(), b_->address()}, 2);
  options.iterations = 2;
  options.seeding = ResidentSeeding::kKMeansParallel;
  const absl::StatusOr<ResidentJobResult> clean =
      RunJob(options, Points().cols(), kD, SourceOf(Points()), std::nullopt);
  ASSERT_TRUE(clean.ok()) << clean.status();
  // Killed after the second round's sample: b's shards go to a, which first
  // takes the groups of centers of rounds before into their distances.
  options.log = [&](const std::string& line) {
    if (line.rfind("k-means||: round 2 ", 0) == 0) b_->Signal(SIGKILL);
  };
  const absl::StatusOr<ResidentJobResult> got =
      RunJob(options, Points().cols(), kD, SourceOf(Points()), std::nullopt);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->shard_moves, 2);
  EXPECT_EQ(got->init_candidates, clean->init_candidates);
  EXPECT_EQ(got->initial_objective, clean->initial_objective);
  EXPECT_EQ(got->centers, clean->centers);
  EXPECT_EQ(got->labels, clean->labels);
}

// A float64 job on replicas a and b, b killed when `when` starts a line of
// its log: the result equals a clean run's to the bit, its shards given
// back their float64 seeding centers.
void ExpectFloat64JobSurvives(ServerProcess* a, ServerProcess* b, ResidentSeeding seeding,
                              const std::string& when) {
  const Matrix<double> points = FarGridPoints(20000);
  ResidentJobOptions job{.k = kK, .iterations = 3, .seed = 4};
  job.seeding = seeding;
  const ReplicaShardOptions replicas{
      .servers = {a->address(), b->address()}, .streams_per_server = 2, .chunk_bytes = 64 << 10};
  const absl::StatusOr<ResidentJobResult> clean =
      RunResidentJobOnReplicas(replicas, job, 0, points.cols(), kD, SourceOf64(points));
  ASSERT_TRUE(clean.ok()) << clean.status();
  job.log = [&](const std::string& line) {
    if (line.rfind(when, 0) == 0) b->Signal(SIGKILL);
  };
  const absl::StatusOr<ResidentJobResult> got =
      RunResidentJobOnReplicas(replicas, job, 0, points.cols(), kD, SourceOf64(points));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->shard_moves, 2);
  EXPECT_EQ(got->initial_objective, clean->initial_objective);
  EXPECT_EQ(got->centers, clean->centers);  // in double
  EXPECT_EQ(got->labels, clean->labels);
}

TEST_F(ResidentJobFaults, AReplicaKilledDuringAFloat64KMeansPlusPlusChangesNothing) {
  ExpectFloat64JobSurvives(a_.get(), b_.get(), ResidentSeeding::kGreedyKMeansPlusPlus,
                           "k-means++: 4 of");
}

TEST_F(ResidentJobFaults, AReplicaKilledDuringAFloat64KMeansParallelChangesNothing) {
  ExpectFloat64JobSurvives(a_.get(), b_.get(), ResidentSeeding::kKMeansParallel,
                           "k-means||: round 2 ");
}

TEST(ResidentJobCap, AShardThatDoesNotFitIsRefusedWithTheNumbersAndTheCliFallsBack) {
  auto server = ServerProcess::Start({"--model_dir=", "--max_resident_bytes=100000"});
  ASSERT_NE(server, nullptr);
  const absl::StatusOr<ResidentJobResult> refused = RunJob(
      Options({server->address()}, 1), Points().cols(), kD, SourceOf(Points()), std::nullopt);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find(absl::StrCat(
                "shard of n = 60000 points in d = 8: a shard of ",
                ResidentShard::Bytes(60000, kD, /*weighted=*/false, /*count_label_changes=*/true),
                " bytes does not fit: this server holds 0 of "
                "its 100000 resident bytes")),
            std::string::npos)
      << refused.status();

  const std::string dir = TempDir("resident-cap");
  std::ofstream(dir + "/points.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(Points().data()), Points().size() * sizeof(float));
  std::string out, err;
  ASSERT_EQ(RunProgram({KMT_CLI_BINARY, "cluster", "--mode=whole", "--server=" + server->address(),
                        "--input=" + dir + "/points.f32", absl::StrCat("--d=", kD),
                        absl::StrCat("--k=", kK), "--iterations=3", "--labels_out=" + dir + "/l"},
                       &out, &err),
            0)
      << err;
  EXPECT_NE(err.find("a replica has no room for its shard"), std::string::npos) << err;
  EXPECT_NE(err.find("running one pass over the file per iteration instead"), std::string::npos);
  EXPECT_NE(out.find("final objective"), std::string::npos) << out;
}

// A client on the servers' machine hands its points over through memory
// (proto/shared_points.h), in chunks of 64 KiB through a file of four:
// the job's answer is the wire's to the bit, and the server counts the
// bytes as shared. A server that refuses them (--shared_points=false) gets
// them over the wire, and the client says why.
TEST(SharedPoints, AJobOnSharedPointsAnswersAsTheWireAndARefusingServerGetsTheWire) {
  const std::unique_ptr<ServerProcess> sharing =
      ServerProcess::Start({"--model_dir=", "--workers=1"});
  const std::unique_ptr<ServerProcess> refusing =
      ServerProcess::Start({"--model_dir=", "--workers=1", "--shared_points=false"});
  ASSERT_NE(sharing, nullptr);
  ASSERT_NE(refusing, nullptr);
  // 40,000 points of d = 8: two shards, each in ten chunks, the file's
  // slots written again and again.
  const int64_t n = 40000;
  Matrix<float> points(kD, n);
  for (int64_t i = 0; i < n; ++i) points.col(i) = Points().col(i % Points().cols());
  const Matrix<float> init = Points().leftCols(kK);
  std::mutex mu;
  std::vector<std::string> lines;
  JobOptions options = Options({sharing->address()}, 2);
  options.iterations = 3;
  options.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
  };
  const absl::StatusOr<ResidentJobResult> shared = RunJob(options, n, kD, SourceOf(points), init);
  ASSERT_TRUE(shared.ok()) << shared.status();
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find("points over the wire"), std::string::npos) << line;
  }
  options.servers = {refusing->address()};
  const absl::StatusOr<ResidentJobResult> wire = RunJob(options, n, kD, SourceOf(points), init);
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_EQ(shared->centers, wire->centers);
  EXPECT_EQ(shared->labels, wire->labels);
  EXPECT_EQ(shared->objective, wire->objective);
  EXPECT_EQ(shared->objectives, wire->objectives);
  int refusals = 0;
  for (const std::string& line : lines) {
    if (line.find("points over the wire to " + refusing->address()) == std::string::npos) continue;
    ++refusals;
    EXPECT_NE(line.find("--shared_points=false"), std::string::npos) << line;
  }
  EXPECT_EQ(refusals, 2);  // once a shard
  const double bytes = static_cast<double>(n) * kD * sizeof(float);
  const std::string counted = Metrics(sharing->metrics_port());
  EXPECT_EQ(Gauge(counted, "kmt_resident_points_bytes_total{via=\"shared\"}"), bytes) << counted;
  EXPECT_EQ(Gauge(counted, "kmt_resident_points_bytes_total{via=\"wire\"}"), 0);
  const std::string refused = Metrics(refusing->metrics_port());
  EXPECT_EQ(Gauge(refused, "kmt_resident_points_bytes_total{via=\"shared\"}"), 0) << refused;
  EXPECT_EQ(Gauge(refused, "kmt_resident_points_bytes_total{via=\"wire\"}"), bytes);
}

}  // namespace
}  // namespace kmt
