// The LargeK suite: the real kmt-server with its default limits takes
// k = 65,536 (its --max_k) and clusters exactly, in a batch and on resident
// shards, refuses one more naming the limit, and seeds that many centers by
// two-level; the real client library and CLI send the batches with their
// default message size.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cluster_client.h"
#include "core/init.h"
#include "core/random.h"
#include "core/transformer.h"
#include "io/npy.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

constexpr int kK = 65536;  // the server's default --max_k
constexpr int kN = 70000;
constexpr int kD = 4;
constexpr int kSide = 16;  // kSide^kD = kK grid sites

// The grid site s as a point: its base-16 digits, one per coordinate.
Vector<float> Site(int s) {
  Vector<float> x(kD);
  for (int l = 0; l < kD; ++l, s /= kSide) x(l) = static_cast<float>(s % kSide);
  return x;
}

// Points within 0.1 of each coordinate of one of the 65,536 sites of a unit
// grid: point i < kK at site i, the others at sites spread over the grid.
struct GridPoints {
  Matrix<float> points{kD, kN};
  Labels sites = Labels(kN);
};

const GridPoints& Grid() {
  static const GridPoints* grid = [] {
    auto* g = new GridPoints;
    Rng rng(17);
    for (int i = 0; i < kN; ++i) {
      g->sites[i] = i < kK ? i : static_cast<int>((int64_t{i} * 7919) % kK);
      g->points.col(i) = Site(g->sites[i]);
      for (int l = 0; l < kD; ++l) g->points(l, i) += static_cast<float>(0.2 * rng.Uniform() - 0.1);
    }
    return g;
  }();
  return *grid;
}

class LargeKTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = ServerProcess::Start({"--workers=1"}).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(absl::Seconds(30)), 0);
    delete server_;
  }

  // The batch's response through the client library, or its stream's
  // failure.
  static absl::StatusOr<v1::ClusterResponse> Send(const v1::ClusterRequest& request) {
    Client client({.target = server_->address()});
    v1::ClusterResponse got;
    const absl::Status status = client.Cluster(
        [sent = false, &request](v1::ClusterRequest* out) mutable {
          if (sent) return false;
          *out = request;
          return sent = true;
        },
        [&got](v1::ClusterResponse&& response) { got = std::move(response); });
    if (!status.ok()) return status;
    return got;
  }

  static ServerProcess* server_;
};
ServerProcess* LargeKTest::server_ = nullptr;

TEST_F(LargeKTest, SixtyFiveThousandClustersAreTakenAndExact) {
  // From centers 0.05 off every site, each point's nearest center is its
  // own site's (0.3 away at most, the next over 0.85): one iteration
  // labels every point by its site and moves each center to the mean of
  // its site's points, the second keeps them.
  const GridPoints& grid = Grid();
  v1::ClusterRequest request = Request("grid", "lloyd-onehot", grid.points, kK, 2);
  request.set_init(v1::INIT_GIVEN);
  for (int s = 0; s < kK; ++s) {
    for (int l = 0; l < kD; ++l) request.add_centers(Site(s)(l) + 0.05f);
  }
  const absl::StatusOr<v1::ClusterResponse> got = Send(request);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_FALSE(got->has_error()) << got->error().message();
  EXPECT_EQ(Labels(got->labels().begin(), got->labels().end()), grid.sites);
  Matrix<double> sums = Matrix<double>::Zero(kD, kK);
  Vector<double> counts = Vector<double>::Zero(kK);
  for (int i = 0; i < kN; ++i) {
    sums.col(grid.sites[i]) += grid.points.col(i).cast<double>();
    counts(grid.sites[i]) += 1;
  }
  const Matrix<double> means = sums.array().rowwise() / counts.transpose().array();
  double objective = 0;
  for (int i = 0; i < kN; ++i) {
    objective += (grid.points.col(i).cast<double>() - means.col(grid.sites[i])).squaredNorm();
  }
  ASSERT_EQ(got->centers_size(), kK * kD);
  double worst = 0;
  for (int s = 0; s < kK; ++s) {
    for (int l = 0; l < kD; ++l) {
      worst = std::max(worst, std::abs(got->centers(s * kD + l) - means(l, s)));
    }
  }
  EXPECT_LT(worst, 1e-5);  // float32 means of at most 2 points below 16
  EXPECT_NEAR(got->objective(), objective, 1e-5 * objective);
}

TEST_F(LargeKTest, SixtyFiveThousandClustersOnResidentShardsAreExact) {
  // The CLI's whole mode: the file on resident shards, Lloyd's by assign
  // steps, from the same centers as above, each point labelled by its site.
  const GridPoints& grid = Grid();
  Matrix<float> start(kD, kK);
  for (int s = 0; s < kK; ++s) start.col(s) = Site(s).array() + 0.05f;
  const std::string dir = TempDir("resident");
  ASSERT_TRUE(WriteNpy(dir + "/points.npy", "<f4", {kN, kD}, grid.points.data(),
                       grid.points.size() * sizeof(float))
                  .ok());
  ASSERT_TRUE(
      WriteNpy(dir + "/centers.npy", "<f4", {kK, kD}, start.data(), start.size() * sizeof(float))
          .ok());
  std::string out, err;
  ASSERT_EQ(RunProgram({CliBinary(), "cluster", "--server=" + server_->address(),
                        "--input=" + dir + "/points.npy", "--centers_in=" + dir + "/centers.npy",
                        absl::StrCat("--k=", kK), "--iterations=2", "--tol=0",
                        "--labels_out=" + dir + "/labels"},
                       &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("resident: "), std::string::npos) << out;
  EXPECT_EQ(ReadLabels(dir + "/labels"), grid.sites);
}

TEST_F(LargeKTest, OneClusterPastTheLimitIsRefusedNamingIt) {
  const absl::StatusOr<v1::ClusterResponse> got =
      Send(Request("over", "lloyd-onehot", Grid().points, kK + 1, 1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(got->error().message(), "k = 65537 exceeds this server's limit of 65536");
}

TEST_F(LargeKTest, TwoLevelSeedsSixtyFiveThousandCentersAsTheCoreDoes) {
  const GridPoints& grid = Grid();
  v1::ClusterRequest request = Request("two-level", "lloyd-onehot", grid.points, kK, 1);
  request.set_init(v1::INIT_TWO_LEVEL);
  const absl::StatusOr<v1::ClusterResponse> got = Send(request);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_FALSE(got->has_error()) << got->error().message();
  // The same seed (Request's 5) in this process: the same centers, then
  // the same Lloyd's iteration.
  const Matrix<float> start = *InitialCenters(grid.points, kK, InitMethod::kTwoLevel, 5);
  std::set<std::vector<float>> distinct;
  for (int s = 0; s < kK; ++s) {
    distinct.insert(std::vector<float>(start.col(s).data(), start.col(s).data() + kD));
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kK));
  const RunResult<float> want = *RunLloyd<float>({}, grid.points, start, {.layers = 1});
  EXPECT_EQ(Labels(got->labels().begin(), got->labels().end()), want.labels);
  EXPECT_EQ(std::vector<float>(got->centers().begin(), got->centers().end()),
            std::vector<float>(want.centers.data(), want.centers.data() + want.centers.size()));
  EXPECT_EQ(got->objective(), want.objective);
}

}  // namespace
}  // namespace kmt
