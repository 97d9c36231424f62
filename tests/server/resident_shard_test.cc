#include "server/resident_shard.h"

#include <gtest/gtest.h>

#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/init.h"
#include "core/random.h"
#include "proto/raw_payload.h"

namespace kmt {
namespace {

Matrix<float> Points(int d, int64_t n) {
  Rng rng(3);
  Matrix<float> points(d, n);
  for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] = rng.Normal();
  return points;
}

v1::ShardChunk Chunk(const Matrix<float>& points, int64_t first, int64_t count) {
  v1::ShardChunk chunk;
  chunk.set_n(points.cols());
  chunk.set_d(static_cast<int>(points.rows()));
  chunk.mutable_points()->Add(points.col(first).data(),
                              points.col(first).data() + count * points.rows());
  return chunk;
}

TEST(ResidentShard, LoadsInChunksAndAssignsAsTheCore) {
  const Matrix<float> points = Points(3, 1000);
  const Matrix<float> centers = points.leftCols(5);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(Chunk(points, 0, 400), &response).ok());
  EXPECT_EQ(response.points_loaded(), 400);
  EXPECT_EQ(memory.held(), ResidentShard::Bytes(1000, 3));
  v1::AssignStep step;
  step.set_k(5);
  step.mutable_centers()->Add(centers.data(), centers.data() + centers.size());
  step.set_return_labels(true);
  EXPECT_EQ(shard.Assign(step, &response).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(shard.Load(Chunk(points, 400, 600), &response).ok());
  EXPECT_TRUE(shard.complete());

  v1::JobResponse got;
  ASSERT_TRUE(shard.Assign(step, &got).ok());
  Labels labels;
  ClusterSums sums(3, 5);
  const double objective = AssignNearest(points, centers, &labels, nullptr, &sums);
  EXPECT_EQ(Labels(got.labels().begin(), got.labels().end()), labels);
  EXPECT_EQ(std::vector<int64_t>(got.center_counts().begin(), got.center_counts().end()),
            sums.counts);
  EXPECT_EQ(Eigen::Map<const Matrix<double>>(got.center_sums().data(), 3, 5), sums.sums);
  EXPECT_EQ(got.objective(), objective);
}

// The chunk's points moved to their raw bytes.
v1::ShardChunk RawChunk(const Matrix<float>& points, int64_t first, int64_t count) {
  v1::ShardChunk chunk = Chunk(points, first, count);
  EncodeFloat32(chunk.points(), chunk.mutable_points_f32());
  chunk.clear_points();
  return chunk;
}

TEST(ResidentShard, RawChunksAndCentersGiveTheAnswerOfRepeatedOnes) {
  const Matrix<float> points = Points(3, 1000);
  const Matrix<float> centers = points.leftCols(5);
  ResidentMemory memory(1 << 21);
  ResidentShard repeated(&memory, Limits{}), raw(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(repeated.Load(Chunk(points, 0, 1000), &response).ok());
  // Mixed encodings across chunks are fine: each chunk is read on its own.
  ASSERT_TRUE(raw.Load(RawChunk(points, 0, 400), &response).ok());
  ASSERT_TRUE(raw.Load(Chunk(points, 400, 100), &response).ok());
  ASSERT_TRUE(raw.Load(RawChunk(points, 500, 500), &response).ok());
  EXPECT_EQ(response.points_loaded(), 1000);
  v1::AssignStep step;
  step.set_k(5);
  step.mutable_centers()->Add(centers.data(), centers.data() + centers.size());
  step.set_return_labels(true);
  v1::AssignStep raw_step = step;
  EncodeFloat32(step.centers(), raw_step.mutable_centers_f32());
  raw_step.clear_centers();
  v1::JobResponse want, got;
  ASSERT_TRUE(repeated.Assign(step, &want).ok());
  ASSERT_TRUE(raw.Assign(raw_step, &got).ok());
  EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
}

TEST(ResidentShard, BadRawChunksAndCentersAreNamed) {
  const Matrix<float> points = Points(2, 10);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  v1::ShardChunk odd = RawChunk(points, 0, 3);
  odd.mutable_points_f32()->pop_back();
  EXPECT_EQ(shard.Load(odd, &response).message(),
            "points_f32 has 23 bytes, not a whole number of float32 values");
  v1::ShardChunk both = RawChunk(points, 0, 3);
  both.add_points(1);
  EXPECT_EQ(shard.Load(both, &response).message(),
            "points and points_f32 are both set; send one of them");
  v1::ShardChunk half = RawChunk(points, 0, 3);
  half.mutable_points_f32()->resize(4 * 5);
  EXPECT_EQ(shard.Load(half, &response).message(),
            "a chunk of 5 values after 0 of n = 10 points: needs a multiple of d = 2 and at most "
            "the points left");
  ASSERT_TRUE(shard.Load(RawChunk(points, 0, 10), &response).ok());
  v1::AssignStep step;
  step.set_k(2);
  EncodeFloat32({0, 0, 1}, step.mutable_centers_f32());
  EXPECT_EQ(shard.Assign(step, &response).message(),
            "centers_f32 has 12 bytes, expected k*d*4 = 2*2*4");
}

TEST(ResidentShard, TooLargeAShardIsRefusedBeforeAnyPointIsKept) {
  const Matrix<float> points = Points(4, 100);
  ResidentMemory memory(ResidentShard::Bytes(100, 4) - 1);
  {
    ResidentShard shard(&memory, Limits{});
    v1::JobResponse response;
    const absl::Status status = shard.Load(Chunk(points, 0, 10), &response);
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(status.message().find("shard of n = 100 points in d = 4"), std::string::npos)
        << status.message();
    EXPECT_EQ(memory.held(), 0);
  }
  ResidentMemory roomy(1 << 20);
  {
    ResidentShard shard(&roomy, Limits{});
    v1::JobResponse response;
    ASSERT_TRUE(shard.Load(Chunk(points, 0, 100), &response).ok());
    EXPECT_GT(roomy.held(), 0);
  }
  EXPECT_EQ(roomy.held(), 0);  // given back with the shard
}

TEST(ResidentShard, BadChunksAndStepsSayWhatIsWrong) {
  Matrix<float> points = Points(2, 10);
  ResidentMemory memory(1 << 20);
  v1::JobResponse response;
  {
    ResidentShard shard(&memory, Limits{});
    v1::ShardChunk chunk = Chunk(points, 0, 10);
    chunk.set_d(0);
    EXPECT_EQ(shard.Load(chunk, &response).message(),
              "shard of n = 10, d = 0: needs n >= 1 and 1 <= d <= 4096");
  }
  {
    ResidentShard shard(&memory, Limits{});
    ASSERT_TRUE(shard.Load(Chunk(points, 0, 6), &response).ok());
    EXPECT_EQ(shard.Load(Chunk(points, 0, 6), &response).message(),
              "a chunk of 12 values after 6 of n = 10 points: needs a multiple of d = 2 and at "
              "most the points left");
  }
  {
    ResidentShard shard(&memory, Limits{});
    points(1, 7) = std::numeric_limits<float>::infinity();
    EXPECT_EQ(shard.Load(Chunk(points, 0, 10), &response).message(),
              "point 7 has Inf in dimension 1");
    points(1, 7) = 0;
  }
  ResidentShard shard(&memory, Limits{});
  ASSERT_TRUE(shard.Load(Chunk(points, 0, 10), &response).ok());
  v1::AssignStep step;
  step.set_k(3);
  step.mutable_centers()->Add(points.data(), points.data() + 5);
  EXPECT_EQ(shard.Assign(step, &response).message(), "centers has 5 values, expected k*d = 3*2");
  // More clusters than the shard has points is fine: other shards have more.
  step.set_k(12);
  step.mutable_centers()->Clear();
  for (int j = 0; j < 12; ++j)
    step.mutable_centers()->Add(points.col(j % 10).data(), points.col(j % 10).data() + 2);
  EXPECT_TRUE(shard.Assign(step, &response).ok());
  v1::SeedStep seed;
  seed.mutable_add_centers()->Add(1.0f);
  EXPECT_EQ(shard.Seed(seed, &response).message(),
            "add_centers has 1 values, not a multiple of d = 2");
}

TEST(ResidentShard, SeedStepsRunShardedKMeansPlusPlus) {
  const Matrix<float> points = Points(3, 500);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(Chunk(points, 0, 500), &response).ok());
  v1::SeedStep step;
  step.add_point_indices(17);
  step.mutable_add_centers()->Add(points.col(3).data(), points.col(3).data() + 3);
  step.mutable_candidates()->Add(points.col(9).data(), points.col(9).data() + 3);
  v1::JobResponse got;
  ASSERT_TRUE(shard.Seed(step, &got).ok());
  SeedingShard<float> local(&points);
  const SeedAnswer<float> want =
      *local.Step({.add = points.col(3), .indices = {17}, .candidates = points.col(9)});
  EXPECT_EQ(got.potential(), want.potential);
  EXPECT_EQ(std::vector<float>(got.points().begin(), got.points().end()),
            std::vector<float>(want.points.data(), want.points.data() + 3));
  EXPECT_EQ(got.candidate_potentials(0), want.candidate_potentials[0]);
}

}  // namespace
}  // namespace kmt
