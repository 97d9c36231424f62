#include "core/seeding.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/init.h"
#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

// The points' columns split into shards of these sizes, each a SeedingShard,
// and a round that runs each request on its shard.
template <typename Scalar>
struct LocalShards {
  std::vector<Matrix<Scalar>> parts;
  std::vector<std::unique_ptr<SeedingShard<Scalar>>> shards;
  std::vector<int64_t> sizes;

  LocalShards(const Matrix<Scalar>& points, const std::vector<int64_t>& split) : sizes(split) {
    parts.reserve(split.size());
    int64_t first = 0;
    for (int64_t size : split) {
      parts.push_back(points.middleCols(first, size));
      first += size;
    }
    for (const Matrix<Scalar>& part : parts) {
      shards.push_back(std::make_unique<SeedingShard<Scalar>>(&part));
    }
  }

  SeedRound<Scalar> Round() {
    return [this](const std::vector<SeedRequest<Scalar>>& requests)
               -> absl::StatusOr<std::vector<SeedAnswer<Scalar>>> {
      std::vector<SeedAnswer<Scalar>> answers;
      for (size_t s = 0; s < requests.size(); ++s) {
        absl::StatusOr<SeedAnswer<Scalar>> a = shards[s]->Step(requests[s]);
        if (!a.ok()) return a.status();
        answers.push_back(*std::move(a));
      }
      return answers;
    };
  }
};

template <typename Scalar>
void ShardsChooseTheCentersOfTheWholeMatrix() {
  const Matrix<Scalar> points = GaussianClusters<Scalar>({.n = 3000, .d = 4, .k = 12}, 5).points;
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    // Uneven shards, one of them empty; fresh shards for each run.
    LocalShards<Scalar> greedy(points, {1000, 0, 1, 1999});
    EXPECT_EQ(*ShardedKMeansPlusPlus<Scalar>(greedy.sizes, 4, 12, seed, GreedySeedingCandidates(12),
                                             greedy.Round()),
              *InitialCenters(points, 12, InitMethod::kKMeansPlusPlus, seed));
    LocalShards<Scalar> plain(points, {1000, 0, 1, 1999});
    EXPECT_EQ(*ShardedKMeansPlusPlus<Scalar>(plain.sizes, 4, 12, seed, 1, plain.Round()),
              *InitialCenters(points, 12, InitMethod::kPlainKMeansPlusPlus, seed));
  }
}

TEST(Seeding, ShardsChooseTheCentersOfTheWholeMatrixFloat) {
  ShardsChooseTheCentersOfTheWholeMatrix<float>();
}
TEST(Seeding, ShardsChooseTheCentersOfTheWholeMatrixDouble) {
  ShardsChooseTheCentersOfTheWholeMatrix<double>();
}

TEST(Seeding, CentersTakenAtOnceGiveTheSameDistancesAsOneByOne) {
  const Matrix<float> points = GaussianClusters<float>({.n = 500, .d = 3, .k = 4}, 2).points;
  const Matrix<float> centers = points.leftCols(4);
  SeedingShard<float> one_by_one(&points), at_once(&points);
  for (int c = 0; c < 4; ++c) ASSERT_TRUE(one_by_one.Step({.add = centers.col(c)}).ok());
  ASSERT_TRUE(at_once.Step({.add = centers}).ok());
  const SeedRequest<float> ask{.targets = {0.0, 10.0, 100.0}, .candidates = points.col(7)};
  const SeedAnswer<float> a = *one_by_one.Step(ask), b = *at_once.Step(ask);
  EXPECT_EQ(a.potential, b.potential);
  EXPECT_EQ(a.points, b.points);
  EXPECT_EQ(a.candidate_potentials, b.candidate_potentials);
}

TEST(Seeding, DrawsFollowTheRunningSumOfDistances) {
  Matrix<double> points(1, 4);
  points << 0, 1, 3, 6;
  SeedingShard<double> shard(&points);
  Matrix<double> origin = Matrix<double>::Zero(1, 1);
  // Distances to 0: 0, 1, 9, 36; running sum 0, 1, 10, 46: the points hold
  // [0, 0), [0, 1), [1, 10) and [10, 46), so the point at distance 0 is
  // never drawn.
  const SeedAnswer<double> a = *shard.Step(
      {.add = origin, .targets = {0.0, 0.5, 1.0, 9.9, 45.0, 1e9}, .candidates = points});
  EXPECT_EQ(a.potential, 46);
  Matrix<double> drawn(1, 6);
  drawn << 1, 1, 3, 3, 6, 6;  // past the end: the last point
  EXPECT_EQ(a.points, drawn);
  EXPECT_EQ(a.candidate_potentials, (std::vector<double>{46, 29, 10, 10}));
}

TEST(Seeding, PastTheEndDrawsTheLastPointAtAPositiveDistance) {
  Matrix<double> points(1, 4);
  points << 5, 0, 3, 0;
  SeedingShard<double> shard(&points);
  // Distances to 0: 25, 0, 9, 0; a target past the sum (round-off between
  // the coordinator's sum and the shard's running sum) takes point 2.
  const SeedAnswer<double> a =
      *shard.Step({.add = Matrix<double>::Zero(1, 1), .targets = {34.0, 1e9}});
  Matrix<double> drawn(1, 2);
  drawn << 3, 3;
  EXPECT_EQ(a.points, drawn);
}

TEST(Seeding, BadRequestsSayWhatIsWrong) {
  const Matrix<float> points = Matrix<float>::Ones(2, 5);
  SeedingShard<float> shard(&points);
  EXPECT_EQ(shard.Step({.targets = {1.0}}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard.Step({.indices = {5}}).status().message(),
            "point index 5 is outside the shard's 5 points");
  EXPECT_EQ(shard.Step({.add = Matrix<float>::Ones(3, 1)}).status().message(),
            "centers have d = 3, points have d = 2");
  Matrix<float> nan = Matrix<float>::Ones(2, 1);
  nan(1, 0) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(shard.Step({.candidates = nan}).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(shard.Step({.add = points.col(0)}).ok());
  EXPECT_EQ(shard.Step({.targets = {-1.0}}).status().message(),
            "draw target -1 is not in [0, inf)");
  EXPECT_EQ(ShardedKMeansPlusPlus<float>({2, 1}, 2, 4, 1, 1, {}).status().message(),
            "k = 4 needs 1 <= k <= n = 3");
  EXPECT_EQ(ShardedKMeansPlusPlus<float>({2, 1}, 2, 2, 1, 0, {}).status().message(),
            "0 k-means++ candidates per center, expected at least 1");
}

}  // namespace
}  // namespace kmt
