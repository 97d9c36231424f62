// Passes over a file (client/pass_shards.h) against a real server: the
// resident-job driver's Lloyd's on PassShards equals Lloyd's written out on
// the file's points, the batches' rows follow the file, a failed batch is
// named by the file's rows, and a step a pass cannot take is refused.
#include "client/pass_shards.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/resident_job.h"
#include "reference/lloyd.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"
#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

// n points in d dimensions around k centers.
Matrix<float> Blobs(int n, int d, int k, uint64_t seed) {
  return GaussianClusters<float>({.n = n, .d = d, .k = k}, seed).points;
}

class PassShardsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = ServerProcess::Start({"--workers=2"}).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(absl::Seconds(30)), 0);
    delete server_;
  }

  // `points` written as CSV to a file of the test's own, opened.
  std::unique_ptr<PointReader> FileOf(const Matrix<float>& points, std::string* path) {
    *path = ::testing::TempDir() + "/pass_shards_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".csv";
    WriteCsv(*path, points);
    absl::StatusOr<std::unique_ptr<PointReader>> reader =
        PointReader::Open(*path, "csv", static_cast<int>(points.rows()));
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? *std::move(reader) : nullptr;
  }

  // The request every batch starts from, for points of d dimensions.
  static v1::ClusterRequest Base(int d) {
    v1::ClusterRequest base;
    base.set_model("lloyd-onehot");
    base.set_d(d);
    return base;
  }

  // One pass over `points` in batches of `batch_size`, assigned to their
  // first k as centers: the rows of each batch in the order the sink had
  // them, each batch's answer checked to label its rows.
  std::vector<Rows> PassRows(const Matrix<float>& points, int k, int64_t batch_size) {
    std::string path;
    std::unique_ptr<PointReader> reader = FileOf(points, &path);
    if (reader == nullptr) return {};
    Client client({.target = server_->address()});
    v1::ClusterRequest base = Base(static_cast<int>(points.rows()));
    base.set_k(k);
    base.set_iterations(0);
    base.set_init(v1::INIT_GIVEN);
    for (int j = 0; j < k; ++j) {
      for (Eigen::Index l = 0; l < points.rows(); ++l) base.add_centers(points(l, j));
    }
    std::vector<Rows> seen;
    int64_t labelled = 0;
    const absl::Status status = Pass(client, *reader, base, "test", batch_size,
                                     [&](v1::ClusterResponse&& r, const Rows& rows) {
                                       EXPECT_FALSE(r.has_error()) << r.error().message();
                                       EXPECT_EQ(r.labels_size(), rows.n);
                                       labelled += r.labels_size();
                                       seen.push_back(rows);
                                     });
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(labelled, points.cols());
    return seen;
  }

  static ServerProcess* server_;
};
ServerProcess* PassShardsTest::server_ = nullptr;

TEST_F(PassShardsTest, LloydsByPassesIsLloydsOnTheFilesPoints) {
  const Matrix<float> points = Blobs(2500, 3, 5, 11);
  const Matrix<float> start = points.leftCols(5);
  std::string path;
  std::unique_ptr<PointReader> reader = FileOf(points, &path);
  ASSERT_NE(reader, nullptr);
  Client client({.target = server_->address()});
  // Batches of 300, the last of 100.
  PassShards shards(client, *reader, Base(static_cast<int>(points.rows())), nullptr, points.cols(),
                    300, path);
  const ResidentJobOptions options{.k = 5, .iterations = 6, .center_tol = -1, .starts = {start}};
  absl::StatusOr<ResidentJobResult> result = RunResidentJob(options, 3, shards);
  ASSERT_TRUE(result.ok()) << result.status();

  const std::vector<LloydIteration<float>> want = ReferenceLloyd(points, start, 6);
  ASSERT_GE(result->iterations_run, 1);
  ASSERT_LE(result->iterations_run, 6);
  const LloydIteration<float>& last = want[result->iterations_run - 1];
  // The same iterations; the batches' sums added in another order than the
  // reference's one loop, so the centers agree to float32's round-off.
  const Matrix<float>& centers = std::get<Matrix<float>>(result->centers);
  EXPECT_TRUE(centers.isApprox(last.centers, 1e-5f)) << centers << "\n" << last.centers;
  EXPECT_EQ(result->labels, ReferenceLabels(points, centers));
  const double objective = ReferenceObjective(points, centers);
  EXPECT_NEAR(result->objective, objective, 1e-5 * objective);
}

TEST_F(PassShardsTest, APassHandsEveryBatchInFileOrderWithItsRows) {
  const std::vector<Rows> seen = PassRows(Blobs(1010, 2, 4, 3), 4, 250);
  // Four batches of 250, and the last ten points (at least k) a fifth.
  ASSERT_EQ(seen.size(), 5u);
  for (size_t b = 0; b < 4; ++b) {
    EXPECT_EQ(seen[b].first, static_cast<int64_t>(250 * b));
    EXPECT_EQ(seen[b].n, 250);
  }
  EXPECT_EQ(seen[4].first, 1000);
  EXPECT_EQ(seen[4].n, 10);
}

TEST_F(PassShardsTest, AShortLastBatchJoinsTheOneBefore) {
  const std::vector<Rows> seen = PassRows(Blobs(503, 2, 4, 5), 4, 250);
  // Three points are fewer than k: they ride with the second batch.
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].first, 250);
  EXPECT_EQ(seen[1].n, 253);
}

TEST_F(PassShardsTest, AFailedBatchIsNamedByTheFilesRows) {
  Matrix<float> points = Blobs(600, 2, 3, 7);
  points(1, 437) = std::nanf("");
  std::string path;
  std::unique_ptr<PointReader> reader = FileOf(points, &path);
  ASSERT_NE(reader, nullptr);
  Client client({.target = server_->address()});
  PassShards shards(client, *reader, Base(static_cast<int>(points.rows())), nullptr, points.cols(),
                    200, path);
  const ResidentJobOptions options{
      .k = 3, .iterations = 2, .starts = {Matrix<float>(points.leftCols(3))}};
  absl::StatusOr<ResidentJobResult> result = RunResidentJob(options, 2, shards);
  ASSERT_FALSE(result.ok());
  const std::string message(result.status().message());
  EXPECT_NE(message.find("row 437 of " + path + " (point 37 of batch 2) has NaN"),
            std::string::npos)
      << message;
}

TEST_F(PassShardsTest, SeedingAndRelocationAreRefusedSayingWhy) {
  const Matrix<float> points = Blobs(300, 2, 3, 9);
  std::string path;
  std::unique_ptr<PointReader> reader = FileOf(points, &path);
  ASSERT_NE(reader, nullptr);
  Client client({.target = server_->address()});
  PassShards shards(client, *reader, Base(static_cast<int>(points.rows())), nullptr, points.cols(),
                    100, path);
  // No start: the driver's k-means++ asks the shards for seeding steps.
  const ResidentJobOptions options{.k = 3, .iterations = 2};
  absl::StatusOr<ResidentJobResult> result = RunResidentJob(options, 2, shards);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(result.status().message().find("resident"), std::string::npos)
      << result.status().message();
}

}  // namespace
}  // namespace kmt
