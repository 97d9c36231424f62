#include "server/resident_shard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/empty_clusters.h"
#include "core/init.h"
#include "core/minibatch.h"
#include "core/omp_threads.h"
#include "core/random.h"
#include "core/sparse.h"
#include "core/validation.h"
#include "proto/csr_payload.h"
#include "proto/minibatch_state.h"
#include "proto/raw_payload.h"
#include "proto/shared_points.h"
#include "reference/lloyd.h"
#include "tests/support/sparse_documents.h"

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

// An assign step to `centers` (k from them), asking for labels or not.
v1::AssignStep Step(const Matrix<float>& centers, bool labels) {
  v1::AssignStep step;
  step.set_k(static_cast<int>(centers.cols()));
  step.mutable_centers()->Add(centers.data(), centers.data() + centers.size());
  step.set_return_labels(labels);
  return step;
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

// Loads `points` weighing `weights` into `shard`, one chunk.
void LoadWeighted(const Matrix<float>& points, const Vector<float>& weights, ResidentShard* shard) {
  v1::ShardChunk chunk = Chunk(points, 0, points.cols());
  chunk.mutable_weights()->Add(weights.data(), weights.data() + weights.size());
  v1::JobResponse response;
  ASSERT_TRUE(shard->Load(chunk, &response).ok());
}

// `count` rows of n, uniformly with repeats, from a stream seeded `seed`.
std::vector<int64_t> DrawRows(int count, int64_t n, uint64_t seed) {
  std::vector<int64_t> rows;
  Rng rng(seed);
  for (int i = 0; i < count; ++i) {
    rows.push_back(static_cast<int64_t>(rng.Uniform() * static_cast<double>(n)));
  }
  return rows;
}

// `steps` mini-batch steps of `batch_size` rows from `centers`, the draws
// from a stream seeded 3, every step run (no stopping on the inertia).
v1::MiniBatchStepsStep MiniBatchSteps(const Matrix<double>& centers, int batch_size, int steps) {
  MiniBatchState start;
  start.centers = centers;
  start.counts.assign(centers.cols(), 0.0);
  start.random = NumpyRandomState(3);
  v1::MiniBatchStepsStep step;
  step.set_k(static_cast<int>(centers.cols()));
  step.set_batch_size(batch_size);
  step.set_steps(steps);
  step.set_max_no_improvement(-1);
  step.set_reassignment_ratio(0.01);
  PutMiniBatchState(start, step.mutable_state());
  return step;
}

// The points and weights of `rows`, in order.
struct GatheredBatch {
  GatheredBatch(const Matrix<float>& all, const Vector<float>& all_weights,
                const std::vector<int64_t>& rows)
      : points(all.rows(), static_cast<Eigen::Index>(rows.size())),
        weights(static_cast<Eigen::Index>(rows.size())) {
    for (size_t i = 0; i < rows.size(); ++i) {
      points.col(i) = all.col(rows[i]);
      weights[i] = all_weights[rows[i]];
    }
  }
  Matrix<float> points;
  Vector<float> weights;
};

// A mini-batch's rows, some drawn twice, on a weighted shard: the labels
// and sums of AssignNearest and AccumulateClusterSums on the gathered rows
// (the sums to the bit: each coordinate's added in the rows' order), the
// fetched rows' points, and a last pass over every row for the labels.
TEST(ResidentShard, SampleSumsAreTheCoresOnTheGatheredRows) {
  const int d = 70, k = 40;  // over the low-precision filter's least shape
  const Matrix<float> points = Points(d, 3000);
  const Matrix<float> centers = points.rightCols(k);
  Vector<float> weights(points.cols());
  for (Eigen::Index i = 0; i < weights.size(); ++i) weights[i] = 0.5f + (i % 3);
  ResidentMemory memory(int64_t{1} << 30);
  ResidentShard shard(&memory, Limits{});
  LoadWeighted(points, weights, &shard);
  std::vector<int64_t> rows = DrawRows(900, 3000, 5);
  rows.push_back(rows[0]);
  v1::SampleSumsStep step;
  step.set_k(k);
  EncodeFloat32(absl::MakeConstSpan(centers.data(), centers.size()), step.mutable_centers_f32());
  step.mutable_rows()->Assign(rows.begin(), rows.end());
  step.add_fetch_rows(7);
  step.add_fetch_rows(2999);
  v1::JobResponse got;
  ASSERT_TRUE(shard.SampleSums(step, &got).ok());

  const GatheredBatch batch(points, weights, rows);
  Labels labels;
  Vector<float> sq;
  const double objective =
      AssignNearest(batch.points, centers, &labels, &sq, nullptr, &batch.weights);
  ClusterSums sums(d, k);
  AccumulateClusterSums(batch.points, labels, &sums, &batch.weights);
  EXPECT_EQ(std::vector<int64_t>(got.center_counts().begin(), got.center_counts().end()),
            sums.counts);
  EXPECT_EQ(std::vector<double>(got.center_weights().begin(), got.center_weights().end()),
            sums.weights);
  EXPECT_EQ(Eigen::Map<const Matrix<double>>(got.center_sums().data(), d, k), sums.sums);
  EXPECT_NEAR(got.objective(), objective, 1e-9 * objective);
  ASSERT_EQ(got.points_size(), 2 * d);
  EXPECT_EQ(Eigen::Map<const Matrix<float>>(got.points().data(), d, 2).col(0), points.col(7));
  EXPECT_EQ(Eigen::Map<const Matrix<float>>(got.points().data(), d, 2).col(1), points.col(2999));

  v1::SampleSumsStep last;
  last.set_k(k);
  *last.mutable_centers_f32() = step.centers_f32();
  last.set_all_rows(true);
  last.set_return_labels(true);
  last.set_omit_sums(true);
  v1::JobResponse all;
  ASSERT_TRUE(shard.SampleSums(last, &all).ok());
  Labels every;
  const double total = AssignNearest(points, centers, &every, nullptr, nullptr, &weights);
  EXPECT_EQ(Labels(all.labels().begin(), all.labels().end()), every);
  EXPECT_EQ(all.objective(), total);
  EXPECT_EQ(all.center_counts_size(), 0);
}

// A mini-batch step's answer is the same bits on any number of threads:
// each thread adds the gathered rows of its share of the centers, every
// center's in the rows' order, as AccumulateClusterSums adds them; at
// d = 2,100 the batch is gathered in spans of a few blocks.
void ExpectMiniBatchStepsSameOnAnyThreads(int d) {
  SCOPED_TRACE(d);
  const int k = 64;
  const Matrix<float> points = Points(d, 5000);
  const Matrix<float> centers = points.rightCols(k);
  // Weights of 24 bits, so that the weighted sums round and their order
  // shows in their bits.
  Vector<float> weights(points.cols());
  Rng draw(11);
  for (Eigen::Index i = 0; i < weights.size(); ++i) {
    weights[i] = static_cast<float>(0.1 + draw.Uniform());
  }
  ResidentMemory memory(int64_t{1} << 30);
  ResidentShard shard(&memory, Limits{});
  LoadWeighted(points, weights, &shard);
  const std::vector<int64_t> rows = DrawRows(3000, 5000, 7);
  const GatheredBatch batch(points, weights, rows);
  Labels labels;
  AssignNearest(batch.points, centers, &labels, nullptr, nullptr, &batch.weights);
  ClusterSums sums(d, k);
  AccumulateClusterSums(batch.points, labels, &sums, &batch.weights);

  v1::SampleSumsStep step;
  step.set_k(k);
  EncodeFloat32(absl::MakeConstSpan(centers.data(), centers.size()), step.mutable_centers_f32());
  step.mutable_rows()->Assign(rows.begin(), rows.end());
  step.set_return_labels(true);
  const v1::MiniBatchStepsStep steps = MiniBatchSteps(centers.cast<double>(), 1024, 4);
  std::optional<v1::JobResponse> first_sample, first_steps;
  for (const int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    // A loop's steps take the step threads; a step of drawn rows, the
    // caller's.
    shard.set_step_threads([threads] { return threads; });
    v1::JobResponse got;
    {
      const ScopedOmpThreads caller(threads);
      ASSERT_TRUE(shard.SampleSums(step, &got).ok());
    }
    EXPECT_EQ(Labels(got.labels().begin(), got.labels().end()), labels);
    EXPECT_EQ(std::vector<int64_t>(got.center_counts().begin(), got.center_counts().end()),
              sums.counts);
    EXPECT_EQ(Eigen::Map<const Matrix<double>>(got.center_sums().data(), d, k), sums.sums);
    v1::JobResponse stepped;
    ASSERT_TRUE(shard.MiniBatchSteps(steps, &stepped).ok());
    EXPECT_EQ(stepped.minibatch().steps_run(), 4);
    if (!first_sample) {
      first_sample = got;
      first_steps = stepped;
      continue;
    }
    EXPECT_EQ(got.objective(), first_sample->objective());
    EXPECT_EQ(stepped.minibatch().centers_f64(), first_steps->minibatch().centers_f64());
    EXPECT_EQ(std::vector<double>(stepped.minibatch().counts().begin(),
                                  stepped.minibatch().counts().end()),
              std::vector<double>(first_steps->minibatch().counts().begin(),
                                  first_steps->minibatch().counts().end()));
  }
}

TEST(ResidentShard, MiniBatchStepsAreTheSameBitsOnAnyNumberOfThreads) {
  ExpectMiniBatchStepsSameOnAnyThreads(200);
  ExpectMiniBatchStepsSameOnAnyThreads(2100);
}

TEST(ResidentShard, BadSampleSumsStepsAreNamed) {
  const Matrix<float> points = Points(3, 100);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(Chunk(points, 0, 100), &response).ok());
  v1::SampleSumsStep step;
  step.set_k(2);
  EncodeFloat32(absl::MakeConstSpan(points.data(), 6), step.mutable_centers_f32());
  step.add_rows(3);
  step.add_rows(100);
  absl::Status status = shard.SampleSums(step, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "rows[1] = 100, outside the shard's n = 100 rows");
  step.clear_rows();
  step.add_rows(3);
  step.set_all_rows(true);
  EXPECT_EQ(shard.SampleSums(step, &response).message(),
            "rows has 1 rows and all_rows is set; send one of them");
  step.set_all_rows(false);
  step.set_centers_f64(std::string(48, '\0'));
  EXPECT_EQ(shard.SampleSums(step, &response).code(), absl::StatusCode::kInvalidArgument);
}

// Steps of a job move the centers a little, then jump, then change k: each
// step's labels, counts, sums and objective are AssignNearest's to the bit,
// whether the bounds the shard keeps between steps settled a point or not.
TEST(ResidentShard, AssignStepsAcrossAJobAreTheCoresToTheBit) {
  const int d = 4;
  Matrix<float> points = Points(d, 5000);
  // Four blobs, so that after a few steps most labels stay put.
  for (Eigen::Index i = 0; i < points.cols(); ++i) points(i % d, i) += 8.0f * (i % 4);
  ResidentMemory memory(1 << 24);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(Chunk(points, 0, points.cols()), &response).ok());
  Matrix<float> centers = points.leftCols(4);
  int64_t settled = 0;
  for (int step_index = 0; step_index < 12; ++step_index) {
    SCOPED_TRACE(step_index);
    if (step_index == 8) centers.col(2).array() += 30.0f;  // a center that jumps
    if (step_index == 10) centers = points.leftCols(6);    // another k
    const int k = static_cast<int>(centers.cols());
    v1::JobResponse got;
    ASSERT_TRUE(shard.Assign(Step(centers, true), &got).ok());
    Labels labels;
    ClusterSums sums(d, k);
    const double objective = AssignNearest(points, centers, &labels, nullptr, &sums);
    ASSERT_EQ(Labels(got.labels().begin(), got.labels().end()), labels);
    ASSERT_EQ(std::vector<int64_t>(got.center_counts().begin(), got.center_counts().end()),
              sums.counts);
    ASSERT_EQ(Eigen::Map<const Matrix<double>>(got.center_sums().data(), d, k), sums.sums);
    ASSERT_EQ(got.objective(), objective);
    settled += got.points_settled_by_bounds();
    // Lloyd's update, as the coordinator makes it.
    for (int j = 0; j < k; ++j) {
      if (sums.counts[j] > 0) {
        centers.col(j) = (sums.sums.col(j) / static_cast<double>(sums.counts[j])).cast<float>();
      }
    }
  }
  // The bounds did keep labels: the steps above went through them.
  EXPECT_GT(settled, points.cols());
}

// Where the bounds may pay (16,384 points or more, 32 centers or more) the
// shard keeps exact sums between the steps of a job, updated by the points
// that moved: every step's sums are the exact sums of its labels rounded
// once (binary128 sums in the reference), its labels and objective the
// core's.
TEST(ResidentShard, LargeShardsAnswerTheExactSumsOfEveryStep) {
  const int d = 4, k = 32;
  Matrix<float> points = Points(d, 20000);
  for (Eigen::Index i = 0; i < points.cols(); ++i) points(i % d, i) += 6.0f * (i % 8);
  ResidentMemory memory(1 << 26);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(Chunk(points, 0, points.cols()), &response).ok());
  Matrix<float> centers = points.leftCols(k);
  int64_t settled = 0;
  for (int step_index = 0; step_index < 10; ++step_index) {
    SCOPED_TRACE(step_index);
    v1::JobResponse got;
    ASSERT_TRUE(shard.Assign(Step(centers, true), &got).ok());
    Labels labels;
    const double objective = AssignNearest(points, centers, &labels);
    ASSERT_EQ(Labels(got.labels().begin(), got.labels().end()), labels);
    ASSERT_EQ(got.objective(), objective);
    const ClusterSums sums = ReferenceRoundedSums(points, labels, k);
    ASSERT_EQ(std::vector<int64_t>(got.center_counts().begin(), got.center_counts().end()),
              sums.counts);
    ASSERT_EQ(Eigen::Map<const Matrix<double>>(got.center_sums().data(), d, k), sums.sums);
    settled += got.points_settled_by_bounds();
    ApplyMeans(sums, &centers);
  }
  EXPECT_GT(settled, points.cols());
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

// A client on this machine hands its points over through a memory file
// (proto/shared_points.h): the shard holds the same points as from the wire,
// chunk after chunk, float32 and float64, mixed with wire chunks.
TEST(ResidentShard, SharedChunksAnswerAsTheWiresOfTheSamePoints) {
  const Matrix<float> points = Points(3, 1000);
  const Matrix<double> points64 = points.cast<double>();
  absl::StatusOr<SharedPointsFile> file = SharedPointsFile::Create(400 * 3 * 8, 2);
  ASSERT_TRUE(file.ok()) << file.status();
  for (bool float64 : {false, true}) {
    SCOPED_TRACE(float64 ? "float64" : "float32");
    ResidentMemory memory(1 << 22);
    ResidentShard wire(&memory, Limits{}), shared(&memory, Limits{});
    shared.set_peer("ipv4:127.0.0.1:40000");
    // Chunks of 400, 100 (over the wire) and 500 points: two slots, the
    // first written again for the third chunk once the first was taken.
    auto chunk = [&](int64_t first, int64_t count, int slot) {
      v1::ShardChunk c;
      c.set_n(1000);
      c.set_d(3);
      const void* values = float64 ? static_cast<const void*>(points64.col(first).data())
                                   : static_cast<const void*>(points.col(first).data());
      std::memcpy(file->slot(slot), values, count * 3 * (float64 ? 8 : 4));
      EXPECT_TRUE(
          file->Name(slot, count * 3 * (float64 ? 8 : 4), float64, c.mutable_points_shared()).ok());
      return c;
    };
    auto wire_chunk = [&](int64_t first, int64_t count) {
      v1::ShardChunk c;
      c.set_n(1000);
      c.set_d(3);
      if (float64) {
        EncodeFloat64(absl::MakeConstSpan(points64.col(first).data(), count * 3),
                      c.mutable_points_f64());
      } else {
        EncodeFloat32(absl::MakeConstSpan(points.col(first).data(), count * 3),
                      c.mutable_points_f32());
      }
      return c;
    };
    v1::JobResponse response;
    ASSERT_TRUE(shared.Load(chunk(0, 400, 0), &response).ok());
    ASSERT_TRUE(shared.Load(wire_chunk(400, 100), &response).ok());
    // A slot holds 400 points of float64: the float64 run's last 500
    // points come in two chunks.
    if (!float64) {
      ASSERT_TRUE(shared.Load(chunk(500, 500, 0), &response).ok());
    } else {
      ASSERT_TRUE(shared.Load(chunk(500, 400, 1), &response).ok());
      ASSERT_TRUE(shared.Load(chunk(900, 100, 0), &response).ok());
    }
    EXPECT_EQ(response.points_loaded(), 1000);
    EXPECT_EQ(shared.float64(), float64);
    ASSERT_TRUE(wire.Load(wire_chunk(0, 1000), &response).ok());
    v1::AssignStep step = Step(points.leftCols(5), true);
    if (float64) {
      EncodeFloat64(std::vector<double>(step.centers().begin(), step.centers().end()),
                    step.mutable_centers_f64());
      step.clear_centers();
    }
    v1::JobResponse want, got;
    ASSERT_TRUE(wire.Assign(step, &want).ok());
    ASSERT_TRUE(shared.Assign(step, &got).ok());
    EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
  }
}

// Shared points from a client elsewhere, to a server that refuses them,
// or named wrongly, are refused before any point is kept: the precondition
// ones (the client sends over the wire instead) and the malformed ones.
TEST(ResidentShard, SharedChunksAreTakenOnlyFromThisMachineAndWhenAllowed) {
  const Matrix<float> points = Points(3, 100);
  absl::StatusOr<SharedPointsFile> file = SharedPointsFile::Create(100 * 3 * 8, 1);
  ASSERT_TRUE(file.ok()) << file.status();
  v1::ShardChunk chunk;
  chunk.set_n(100);
  chunk.set_d(3);
  std::memcpy(file->slot(0), points.data(), 100 * 3 * 4);
  ASSERT_TRUE(file->Name(0, 100 * 3 * 4, false, chunk.mutable_points_shared()).ok());
  auto load = [&](const v1::ShardChunk& c, const std::string& peer, Limits limits = Limits{}) {
    ResidentMemory memory(1 << 21);
    ResidentShard shard(&memory, limits);
    shard.set_peer(peer);
    v1::JobResponse response;
    const absl::Status status = shard.Load(c, &response);
    EXPECT_EQ(shard.complete(), status.ok());
    return status;
  };
  EXPECT_TRUE(load(chunk, "ipv6:[::1]:5000").ok());
  EXPECT_TRUE(load(chunk, "unix:/tmp/kmt.sock").ok());
  for (const char* peer : {"ipv4:10.1.2.3:5000", "ipv6:[2001:db8::1]:5000", ""}) {
    SCOPED_TRACE(peer);
    const absl::Status status = load(chunk, peer);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(status.message().find("own machine"), std::string::npos) << status;
  }
  Limits off;
  off.shared_points = false;
  const absl::Status refused = load(chunk, "ipv4:127.0.0.1:5000", off);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("--shared_points=false"), std::string::npos) << refused;

  struct Case {
    const char* name;
    std::function<void(v1::ShardChunk*)> change;
    absl::StatusCode code;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"another token",
       [](v1::ShardChunk* c) { (*c->mutable_points_shared()->mutable_token())[0] ^= 1; },
       absl::StatusCode::kFailedPrecondition, "token"},
      {"past the file's end",
       [](v1::ShardChunk* c) {
         c->mutable_points_shared()->set_offset(c->points_shared().offset() + 1800);
       },
       absl::StatusCode::kFailedPrecondition, "ends before"},
      {"another process's descriptor",
       [](v1::ShardChunk* c) { c->mutable_points_shared()->set_fd(0); },
       absl::StatusCode::kFailedPrecondition, "not a memory file"},
      {"the token's bytes", [](v1::ShardChunk* c) { c->mutable_points_shared()->set_offset(0); },
       absl::StatusCode::kInvalidArgument, "past the 16-byte token"},
      {"not whole values", [](v1::ShardChunk* c) { c->mutable_points_shared()->set_bytes(1198); },
       absl::StatusCode::kInvalidArgument, "not a whole number of float32 values"},
      {"not whole points", [](v1::ShardChunk* c) { c->mutable_points_shared()->set_bytes(1196); },
       absl::StatusCode::kInvalidArgument, "multiple of d = 3"},
      {"more points than the shard", [](v1::ShardChunk* c) { c->set_n(99); },
       absl::StatusCode::kInvalidArgument, "at most the points left"},
      {"a second points field",
       [](v1::ShardChunk* c) {
         EncodeFloat32(std::vector<float>{1, 2, 3}, c->mutable_points_f32());
       },
       absl::StatusCode::kInvalidArgument, "both set"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::ShardChunk bad = chunk;
    c.change(&bad);
    const absl::Status status = load(bad, "ipv4:127.0.0.1:5000");
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status;
  }
  // A later chunk of another precision than the first's.
  ResidentMemory memory(1 << 21);
  ResidentShard shard(&memory, Limits{});
  shard.set_peer("ipv4:127.0.0.1:5000");
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(RawChunk(points, 0, 50), &response).ok());
  v1::ShardChunk wide = chunk;
  wide.mutable_points_shared()->set_float64(true);
  const absl::Status status = shard.Load(wide, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("points_shared.float64 is true for a float32 shard"),
            std::string::npos)
      << status;
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

// Points given by their binary16 (or bfloat16) bits, d x n as `bits` is
// row-major, and a chunk of them in the narrow field.
struct NarrowPoints {
  RawType type;
  int d;
  std::vector<uint16_t> bits;
  Matrix<float> widened;  // each value's float32

  NarrowPoints(RawType type, int d, int64_t n, uint64_t seed)
      : type(type), d(d), bits(d * n), widened(d, n) {
    Rng rng(seed);
    for (size_t i = 0; i < bits.size(); ++i) {
      // Binary16: |x| < 64, subnormals among them; bfloat16: 2^-31 to 2^17.
      const uint64_t magnitude =
          type == RawType::kFloat16 ? rng.Below(0x5400) : 0x3000 + rng.Below(0x1800);
      bits[i] = static_cast<uint16_t>(magnitude | rng.Below(2) << 15);
      widened.data()[i] =
          type == RawType::kFloat16 ? WidenFloat16(bits[i]) : WidenBFloat16(bits[i]);
    }
  }

  v1::ShardChunk Chunk(int64_t first, int64_t count) const {
    v1::ShardChunk chunk;
    chunk.set_n(widened.cols());
    chunk.set_d(d);
    std::string* out =
        type == RawType::kFloat16 ? chunk.mutable_points_f16() : chunk.mutable_points_bf16();
    for (int64_t i = first * d; i < (first + count) * d; ++i) {
      out->push_back(static_cast<char>(bits[i] & 0xff));
      out->push_back(static_cast<char>(bits[i] >> 8));
    }
    return chunk;
  }
};

// A shard loaded from binary16 or bfloat16 chunks, among float32 ones,
// holds the float32 of each value: its steps answer as the float32 shard of
// those values, to the byte.
TEST(ResidentShard, NarrowChunksAnswerAsTheFloat32ShardOfTheirValues) {
  for (RawType type : {RawType::kFloat16, RawType::kBFloat16}) {
    SCOPED_TRACE(RawName(type));
    const NarrowPoints points(type, 3, 600, 9);
    ResidentMemory memory(1 << 21);
    ResidentShard narrow(&memory, Limits{}), wide(&memory, Limits{});
    v1::JobResponse response;
    ASSERT_TRUE(narrow.Load(points.Chunk(0, 200), &response).ok());
    ASSERT_TRUE(narrow.Load(RawChunk(points.widened, 200, 200), &response).ok());
    ASSERT_TRUE(narrow.Load(points.Chunk(400, 200), &response).ok());
    EXPECT_EQ(memory.held(), ResidentShard::Bytes(600, 3));
    ASSERT_TRUE(wide.Load(Chunk(points.widened, 0, 600), &response).ok());
    const v1::AssignStep step = Step(points.widened.leftCols(4), true);
    v1::JobResponse want, got;
    ASSERT_TRUE(wide.Assign(step, &want).ok());
    ASSERT_TRUE(narrow.Assign(step, &got).ok());
    EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
  }
}

// A chunk's offset is subtracted from its points as they arrive, in float32:
// narrow chunks and their offset load the float32 shard of the shifted
// values, as a client that shifted them would send it.
TEST(ResidentShard, AChunksOffsetShiftsItsPointsInFloat32) {
  const NarrowPoints points(RawType::kFloat16, 3, 600, 12);
  const std::vector<float> offset = {0.1f, -3.25f, 1e-3f};
  Matrix<float> shifted = points.widened;
  shifted.colwise() -= Eigen::Map<const Vector<float>>(offset.data(), 3);
  ResidentMemory memory(1 << 21);
  ResidentShard narrow(&memory, Limits{}), wide(&memory, Limits{});
  v1::JobResponse response;
  for (int64_t first : {0, 250}) {
    v1::ShardChunk chunk = points.Chunk(first, first == 0 ? 250 : 350);
    chunk.mutable_points_offset()->Add(offset.begin(), offset.end());
    ASSERT_TRUE(narrow.Load(chunk, &response).ok());
  }
  ASSERT_TRUE(wide.Load(Chunk(shifted, 0, 600), &response).ok());
  const v1::AssignStep step = Step(shifted.leftCols(4), true);
  v1::JobResponse want, got;
  ASSERT_TRUE(wide.Assign(step, &want).ok());
  ASSERT_TRUE(narrow.Assign(step, &got).ok());
  EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());

  ResidentShard bad(&memory, Limits{});
  v1::ShardChunk chunk = points.Chunk(0, 2);
  chunk.add_points_offset(1);
  EXPECT_EQ(bad.Load(chunk, &response).message(), "points_offset has 1 values; expected d = 3");
  chunk.add_points_offset(NAN);
  chunk.add_points_offset(1);
  EXPECT_EQ(bad.Load(chunk, &response).message(), "points_offset[1] is nan; it must be finite");
  ResidentShard f64(&memory, Limits{});
  v1::ShardChunk chunk64;
  chunk64.set_n(10);
  chunk64.set_d(1);
  EncodeFloat64(std::vector<double>{1}, chunk64.mutable_points_f64());
  chunk64.add_points_offset(1);
  EXPECT_EQ(f64.Load(chunk64, &response).message(),
            "points_offset is set for a float64 shard: a float64 shard's points come shifted");
}

TEST(ResidentShard, BadNarrowChunksAreNamed) {
  const NarrowPoints points(RawType::kFloat16, 2, 10, 4);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  v1::ShardChunk odd = points.Chunk(0, 3);
  odd.mutable_points_f16()->pop_back();
  EXPECT_EQ(shard.Load(odd, &response).message(),
            "points_f16 has 11 bytes, not a whole number of binary16 values");
  v1::ShardChunk both = points.Chunk(0, 3);
  EncodeFloat32({1, 2}, both.mutable_points_f32());
  EXPECT_EQ(shard.Load(both, &response).message(),
            "points_f32 and points_f16 are both set; send one of them");
  v1::ShardChunk two_narrow = points.Chunk(0, 3);
  two_narrow.set_points_bf16(std::string(4, '\0'));
  EXPECT_EQ(shard.Load(two_narrow, &response).message(),
            "points_f16 and points_bf16 are both set; send one of them");
  // A NaN widens to float32's NaN and ends the load as one would.
  NarrowPoints with_nan = points;
  with_nan.bits[5] = 0x7e00;
  ASSERT_TRUE(shard.Load(with_nan.Chunk(0, 6), &response).ok());
  const absl::Status nan = shard.Load(with_nan.Chunk(6, 4), &response);
  EXPECT_EQ(nan.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nan.message(), "point 2 has NaN in dimension 1");
  // On a float64 shard a narrow chunk is a float32 payload.
  ResidentShard f64(&memory, Limits{});
  v1::ShardChunk chunk64;
  chunk64.set_n(10);
  chunk64.set_d(2);
  EncodeFloat64(std::vector<double>{1, 2}, chunk64.mutable_points_f64());
  ASSERT_TRUE(f64.Load(chunk64, &response).ok());
  EXPECT_EQ(f64.Load(points.Chunk(1, 2), &response).code(), absl::StatusCode::kInvalidArgument);
}

Vector<float> Weights(int64_t n) {
  Rng rng(5);
  Vector<float> weights(n);
  for (Eigen::Index i = 0; i < n; ++i) weights[i] = static_cast<float>(rng.Uniform() * 3);
  weights[7] = 0;
  return weights;
}

// The chunk with its points' weights, repeated or raw.
v1::ShardChunk WeightedChunk(const Matrix<float>& points, const Vector<float>& weights,
                             int64_t first, int64_t count, bool raw) {
  v1::ShardChunk chunk = Chunk(points, first, count);
  const absl::Span<const float> values(weights.data() + first, count);
  if (raw) {
    EncodeFloat32(values, chunk.mutable_weights_f32());
  } else {
    chunk.mutable_weights()->Add(values.begin(), values.end());
  }
  return chunk;
}

// The shard's answer to `step` is `want`, the core's.
void ExpectSeedAnswer(ResidentShard& shard, const v1::SeedStep& step,
                      const SeedAnswer<float>& want) {
  v1::JobResponse got;
  ASSERT_TRUE(shard.Seed(step, &got).ok());
  EXPECT_EQ(got.potential(), want.potential);
  EXPECT_EQ(std::vector<float>(got.points().begin(), got.points().end()),
            std::vector<float>(want.points.data(), want.points.data() + want.points.size()));
  EXPECT_EQ(
      std::vector<double>(got.candidate_potentials().begin(), got.candidate_potentials().end()),
      want.candidate_potentials);
}

TEST(ResidentShard, WeightedStepsEqualTheWeightedCore) {
  const Matrix<float> points = Points(3, 1000);
  const Vector<float> weights = Weights(1000);
  const Matrix<float> centers = points.leftCols(5);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(WeightedChunk(points, weights, 0, 400, false), &response).ok());
  // The weights' 4 bytes per point are reserved with the first chunk.
  EXPECT_EQ(memory.held(), ResidentShard::Bytes(1000, 3, /*weighted=*/true));
  EXPECT_EQ(memory.held(), ResidentShard::Bytes(1000, 3) + 4 * 1000);
  ASSERT_TRUE(shard.Load(WeightedChunk(points, weights, 400, 600, true), &response).ok());

  v1::JobResponse got;
  ASSERT_TRUE(shard.Assign(Step(centers, true), &got).ok());
  Labels labels;
  ClusterSums sums(3, 5);
  const double objective = AssignNearest(points, centers, &labels, nullptr, &sums, &weights);
  EXPECT_EQ(got.objective(), objective);
  EXPECT_EQ(Labels(got.labels().begin(), got.labels().end()), labels);
  EXPECT_EQ(std::vector<int64_t>(got.center_counts().begin(), got.center_counts().end()),
            sums.counts);
  EXPECT_EQ(std::vector<double>(got.center_weights().begin(), got.center_weights().end()),
            sums.weights);
  EXPECT_EQ(Eigen::Map<const Matrix<double>>(got.center_sums().data(), 3, 5), sums.sums);
  // Weighted, not plain: the weights are not all 1.
  EXPECT_NE(got.objective(), AssignNearest(points, centers, &labels));

  // k-means++'s first draw is by weight, then by w D^2.
  SeedingShard<float> local(&points, &weights);
  const double target = 0.3 * weights.cast<double>().sum();
  v1::SeedStep first;
  first.add_draw_targets(target);
  ExpectSeedAnswer(shard, first, *local.Step({.targets = {target}}));
  v1::SeedStep next;
  next.mutable_add_centers()->Add(points.col(3).data(), points.col(3).data() + 3);
  next.add_draw_targets(1.5);
  next.mutable_candidates()->Add(points.col(9).data(), points.col(9).data() + 3);
  ExpectSeedAnswer(
      shard, next,
      *local.Step({.add = points.col(3), .targets = {1.5}, .candidates = points.col(9)}));
}

TEST(ResidentShard, AnAssignStepAnswersItsFarthestPointsAsTheCore) {
  const Matrix<float> points = Points(3, 1000);
  const Vector<float> weights = Weights(1000);
  const Matrix<float> centers = points.leftCols(5);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(WeightedChunk(points, weights, 0, 1000, true), &response).ok());
  v1::AssignStep step = Step(centers, false);
  step.set_farthest(4);
  v1::JobResponse got;
  ASSERT_TRUE(shard.Assign(step, &got).ok());
  Labels labels;
  AssignNearest(points, centers, &labels);
  std::vector<float> distances;
  const std::vector<int64_t> want =
      FarthestPoints(points, &weights, labels, centers, 4, &distances);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_EQ(std::vector<int64_t>(got.far_indices().begin(), got.far_indices().end()), want);
  ASSERT_EQ(got.far_points_f32().size(), 4 * 3 * sizeof(float));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(got.far_distances(r), distances[r]);
    EXPECT_EQ(got.far_labels(r), labels[want[r]]);
    EXPECT_EQ(got.far_weights(r), weights[want[r]]);
    float x[3];
    std::memcpy(x, got.far_points_f32().data() + r * sizeof(x), sizeof(x));
    EXPECT_EQ(Eigen::Map<const Vector<float>>(x, 3), points.col(want[r]));
  }
  // More than one point per cluster is never needed, and is refused.
  step.set_farthest(6);
  const absl::Status refused = shard.Assign(step, &got);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("farthest = 6, must be between 0 and k = 5"), std::string::npos)
      << refused;
}

TEST(ResidentShard, AShardOfWeightZeroIsAcceptedAndEmptiesEveryCluster) {
  const Matrix<float> points = Points(2, 10);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(
      shard.Load(WeightedChunk(points, Vector<float>::Zero(10), 0, 10, false), &response).ok());
  ASSERT_TRUE(shard.Assign(Step(points.leftCols(2), false), &response).ok());
  EXPECT_EQ(response.objective(), 0);
  EXPECT_EQ(response.center_weights(0) + response.center_weights(1), 0);
  EXPECT_EQ(response.center_counts(0) + response.center_counts(1), 10);
}

TEST(ResidentShard, BadWeightsAreNamed) {
  const Matrix<float> points = Points(2, 10);
  Vector<float> weights = Weights(10);
  ResidentMemory memory(1 << 20);
  v1::JobResponse response;
  const auto load = [&](const std::vector<v1::ShardChunk>& chunks) {
    ResidentShard shard(&memory, Limits{});
    for (const v1::ShardChunk& chunk : chunks) {
      const absl::Status status = shard.Load(chunk, &response);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  };
  weights[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(load({WeightedChunk(points, weights, 0, 10, false)}).message(),
            "weight 3 = nan, must be finite and at least 0");
  weights[3] = -1;
  // Checked once the shard is complete, with the index in the shard.
  EXPECT_EQ(
      load({WeightedChunk(points, weights, 0, 6, true), WeightedChunk(points, weights, 6, 4, true)})
          .message(),
      "weight 3 = -1, must be finite and at least 0");
  weights[3] = 1;
  v1::ShardChunk short_chunk = WeightedChunk(points, weights, 0, 4, false);
  short_chunk.mutable_weights()->RemoveLast();
  EXPECT_EQ(load({short_chunk}).message(),
            "a chunk of 4 points has 3 weights; a weighted shard takes one with every point");
  v1::ShardChunk odd = WeightedChunk(points, weights, 0, 4, true);
  odd.mutable_weights_f32()->pop_back();
  EXPECT_EQ(load({odd}).message(),
            "weights_f32 has 15 bytes, not a whole number of float32 values");
  v1::ShardChunk both = WeightedChunk(points, weights, 0, 4, true);
  both.add_weights(1);
  EXPECT_EQ(load({both}).message(), "weights and weights_f32 are both set; send one of them");
  EXPECT_EQ(load({WeightedChunk(points, weights, 0, 4, false), Chunk(points, 4, 6)}).message(),
            "a chunk of 6 points has 0 weights; a weighted shard takes one with every point");
  EXPECT_EQ(load({Chunk(points, 0, 4), WeightedChunk(points, weights, 4, 6, false)}).message(),
            "a chunk carries weights, but the shard's first chunk had none: weights come in every "
            "chunk or in none");
  v1::ShardChunk counting = Chunk(points, 4, 6);
  counting.set_count_label_changes(true);
  EXPECT_EQ(load({Chunk(points, 0, 4), counting}).message(),
            "a chunk says count_label_changes = true, the shard's first said false");
  EXPECT_TRUE(load({WeightedChunk(points, weights, 0, 4, false),
                    WeightedChunk(points, weights, 4, 6, true)})
                  .ok());
  EXPECT_EQ(memory.held(), 0);
}

TEST(ResidentShard, AssignStepsCountTheLabelsChangedSinceTheLastOne) {
  const Matrix<float> points = Points(3, 1000);
  const Matrix<float> before = points.leftCols(4), after = points.middleCols(4, 4);
  ResidentMemory memory(1 << 20);
  ResidentShard counting(&memory, Limits{});
  v1::ShardChunk chunk = Chunk(points, 0, 1000);
  chunk.set_count_label_changes(true);
  v1::JobResponse response;
  ASSERT_TRUE(counting.Load(chunk, &response).ok());
  // The last labels' 4 bytes per point are part of the reservation.
  EXPECT_EQ(memory.held(), ResidentShard::Bytes(1000, 3) + 4 * 1000);
  EXPECT_EQ(memory.held(), ResidentShard::Bytes(1000, 3, false, /*count_label_changes=*/true));

  v1::JobResponse first, same, moved;
  ASSERT_TRUE(counting.Assign(Step(before, false), &first).ok());
  EXPECT_FALSE(first.labels_compared());  // nothing to compare with
  ASSERT_TRUE(counting.Assign(Step(before, false), &same).ok());
  EXPECT_TRUE(same.labels_compared());
  EXPECT_EQ(same.labels_changed(), 0);
  ASSERT_TRUE(counting.Assign(Step(after, true), &moved).ok());
  Labels old_labels, new_labels;
  AssignNearest(points, before, &old_labels);
  AssignNearest(points, after, &new_labels);
  int64_t changed = 0;
  for (size_t i = 0; i < old_labels.size(); ++i) changed += old_labels[i] != new_labels[i];
  ASSERT_GT(changed, 0);
  EXPECT_TRUE(moved.labels_compared());
  EXPECT_EQ(moved.labels_changed(), changed);
  EXPECT_EQ(Labels(moved.labels().begin(), moved.labels().end()), new_labels);

  ResidentShard plain(&memory, Limits{});
  ASSERT_TRUE(plain.Load(Chunk(points, 0, 1000), &response).ok());
  ASSERT_TRUE(plain.Assign(Step(before, false), &response).ok());
  ASSERT_TRUE(plain.Assign(Step(after, false), &response).ok());
  EXPECT_FALSE(response.labels_compared());
  EXPECT_EQ(response.labels_changed(), 0);
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
              "shard of n = 10, d = 0: needs n >= 1 and 1 <= d <= 4096 (--max_d)");
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

TEST(ResidentShard, KMeansParallelStepsSampleAsTheCoreShard) {
  const Matrix<float> points = Points(3, 1000);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(Chunk(points, 0, 1000), &response).ok());
  SeedingShard<float> local(&points);
  const Matrix<float> group = points.leftCols(2);
  const double potential = *local.AddCenters(group);
  const std::vector<int64_t> want = *local.Oversample(6, potential, 5, 1, 100);
  ASSERT_GT(want.size(), 0u);

  v1::KMeansParallelStep take;
  EncodeFloat32(absl::MakeConstSpan(group.data(), group.size()), take.mutable_add_centers_f32());
  v1::JobResponse got;
  ASSERT_TRUE(shard.KMeansParallel(take, &got).ok());
  EXPECT_EQ(got.potential(), potential);
  EXPECT_EQ(got.sampled_indices_size(), 0);
  v1::KMeansParallelStep sample;
  sample.set_oversampling(6);
  sample.set_potential(potential);
  sample.set_seed(5);
  sample.set_round(1);
  sample.set_first_point(100);
  got.Clear();
  ASSERT_TRUE(shard.KMeansParallel(sample, &got).ok());
  EXPECT_EQ(got.potential(), potential);
  EXPECT_EQ(std::vector<int64_t>(got.sampled_indices().begin(), got.sampled_indices().end()), want);
  ASSERT_EQ(got.sampled_points_size(), static_cast<int>(3 * want.size()));
  for (size_t j = 0; j < want.size(); ++j) {
    EXPECT_EQ(Eigen::Map<const Vector<float>>(got.sampled_points().data() + 3 * j, 3),
              points.col(want[j]));
  }

  // The sample taken in, the shard weighs the candidates as a pass over
  // its points does.
  v1::KMeansParallelStep weigh;
  weigh.mutable_add_centers()->CopyFrom(got.sampled_points());
  weigh.set_return_weights(true);
  Matrix<float> candidates(3, 2 + want.size());
  candidates << group, Eigen::Map<const Matrix<float>>(got.sampled_points().data(), 3, want.size());
  v1::JobResponse weights;
  ASSERT_TRUE(shard.KMeansParallel(weigh, &weights).ok());
  EXPECT_EQ(
      std::vector<double>(weights.candidate_weights().begin(), weights.candidate_weights().end()),
      NearestCandidateWeights<float>(points, nullptr, candidates));
}

TEST(ResidentShard, CandidateWeightsStepsWeighTheNearestPoints) {
  const Matrix<float> points = Points(3, 1000);
  ResidentMemory memory(1 << 20);
  v1::JobResponse response;
  v1::ShardChunk chunk = Chunk(points, 0, 1000);
  Vector<float> weights(1000);
  for (int i = 0; i < 1000; ++i) {
    weights[i] = static_cast<float>(i % 4);
    chunk.add_weights(weights[i]);
  }
  const Matrix<float> candidates = points.leftCols(7);
  v1::CandidateWeightsStep step;
  step.mutable_candidates()->Add(candidates.data(), candidates.data() + candidates.size());
  for (bool weighted : {false, true}) {
    SCOPED_TRACE(weighted ? "weighted" : "unweighted");
    ResidentShard shard(&memory, Limits{});
    ASSERT_TRUE(shard.Load(weighted ? chunk : Chunk(points, 0, 1000), &response).ok());
    v1::JobResponse got;
    ASSERT_TRUE(shard.CandidateWeights(step, &got).ok());
    EXPECT_EQ(std::vector<double>(got.candidate_weights().begin(), got.candidate_weights().end()),
              NearestCandidateWeights(points, weighted ? &weights : nullptr, candidates));
  }
}

TEST(ResidentShard, BadKMeansParallelStepsAreRefusedAndTheShardStays) {
  const Matrix<float> points = Points(3, 20);
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{.max_k = 2});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(Chunk(points, 0, 10), &response).ok());
  v1::KMeansParallelStep sample;
  sample.set_oversampling(4);
  sample.set_potential(1);
  EXPECT_EQ(shard.KMeansParallel(sample, &response).code(), absl::StatusCode::kFailedPrecondition);
  v1::CandidateWeightsStep weigh;
  weigh.mutable_candidates()->Add(points.data(), points.data() + 3);
  EXPECT_EQ(shard.CandidateWeights(weigh, &response).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(shard.Load(Chunk(points, 10, 10), &response).ok());

  EXPECT_EQ(shard.KMeansParallel(sample, &response).message(),
            "sampling needs a center taken into the distances first (add_centers)");
  const auto refused = [&](v1::KMeansParallelStep step) {
    return std::string(shard.KMeansParallel(step, &response).message());
  };
  v1::KMeansParallelStep bad = sample;
  bad.mutable_add_centers()->Add(points.data(), points.data() + 4);
  EXPECT_EQ(refused(bad), "add_centers has 4 values, not a multiple of d = 3");
  bad.set_add_centers_f32(std::string(12, '\0'));
  EXPECT_EQ(refused(bad), "add_centers and add_centers_f32 are both set; send one of them");
  bad.clear_add_centers();
  bad.set_add_centers_f32(std::string(10, '\0'));
  EXPECT_EQ(refused(bad), "add_centers_f32 has 10 bytes, not a multiple of 4 * d = 12");
  bad.clear_add_centers_f32();
  for (float v : {1.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f}) {
    bad.mutable_add_centers()->Add(v);
  }
  EXPECT_EQ(shard.KMeansParallel(bad, &response).code(), absl::StatusCode::kInvalidArgument);
  // A center with bad sampling numbers: refused whole, the distances untouched.
  for (auto spoil : std::vector<std::function<void(v1::KMeansParallelStep*)>>{
           [](auto* s) { s->set_oversampling(-1); },
           [](auto* s) { s->set_oversampling(std::numeric_limits<double>::quiet_NaN()); },
           [](auto* s) { s->set_potential(-1); },
           [](auto* s) { s->set_potential(std::numeric_limits<double>::infinity()); },
           [](auto* s) { s->set_round(-1); }, [](auto* s) { s->set_first_point(-1); }}) {
    bad = sample;
    bad.mutable_add_centers()->Add(points.data(), points.data() + 3);
    spoil(&bad);
    EXPECT_EQ(shard.KMeansParallel(bad, &response).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(shard.KMeansParallel(sample, &response).code(), absl::StatusCode::kFailedPrecondition);

  weigh.mutable_candidates()->Add(1.0f);
  EXPECT_EQ(shard.CandidateWeights(weigh, &response).message(),
            "candidates has 4 values, not a multiple of d = 3");
  weigh.Clear();
  EXPECT_EQ(shard.CandidateWeights(weigh, &response).message(),
            "0 candidates, must be between 1 and 32 (16 times max_k)");
  for (int j = 0; j < 33; ++j) weigh.mutable_candidates()->Add(points.data(), points.data() + 3);
  EXPECT_EQ(shard.CandidateWeights(weigh, &response).message(),
            "33 candidates, must be between 1 and 32 (16 times max_k)");
  // The shard is as loaded: a good step after all these.
  response.Clear();
  bad = sample;
  bad.mutable_add_centers()->Add(points.data(), points.data() + 3);
  ASSERT_TRUE(shard.KMeansParallel(bad, &response).ok());
  SeedingShard<float> local(&points);
  EXPECT_EQ(response.potential(), *local.AddCenters(points.col(0)));
}

// Points far from the origin with parts float32 cannot hold (its spacing
// at 1e6 is 1/16), as float64.
Matrix<double> FarPoints(int d, int64_t n) {
  Matrix<double> points = Points(d, n).cast<double>().array() * 10 + 1e6;
  for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] += (i % 7) / 1024.0;
  return points;
}

v1::ShardChunk Chunk64(const Matrix<double>& points, const Vector<double>* weights, int64_t first,
                       int64_t count) {
  v1::ShardChunk chunk;
  chunk.set_n(points.cols());
  chunk.set_d(static_cast<int>(points.rows()));
  EncodeFloat64(absl::MakeConstSpan(points.col(first).data(), count * points.rows()),
                chunk.mutable_points_f64());
  if (weights != nullptr) {
    EncodeFloat64(absl::MakeConstSpan(weights->data() + first, count), chunk.mutable_weights_f64());
  }
  return chunk;
}

Matrix<double> Decoded(const std::string& bytes, int d) {
  Matrix<double> m(d, static_cast<Eigen::Index>(bytes.size() / (sizeof(double) * d)));
  DecodeFloat64(bytes, m.data());
  return m;
}

// A shard loaded from points_f64 is held in double: its assign, seed,
// k-means‖ and candidate-weights steps are the core's at Scalar = double,
// and its points come back as float64 bytes.
TEST(ResidentShard, AFloat64ShardComputesInDoubleAsTheCore) {
  const int d = 3;
  const Matrix<double> points = FarPoints(d, 1000);
  const Vector<double> weights = Weights(1000).cast<double>();
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(Chunk64(points, &weights, 0, 400), &response).ok());
  EXPECT_TRUE(shard.float64());
  EXPECT_EQ(memory.held(), ResidentShard::Bytes(1000, d, /*weighted=*/true, false, true));
  EXPECT_EQ(ResidentShard::Bytes(1000, d, false, false, /*float64=*/true), 1000 * (8 * d + 48));
  ASSERT_TRUE(shard.Load(Chunk64(points, &weights, 400, 600), &response).ok());
  ASSERT_TRUE(shard.complete());

  Matrix<double> centers = points.leftCols(5);
  centers.col(4) = centers.col(3);  // an empty cluster, for farthest
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    v1::AssignStep assign;
    assign.set_k(5);
    EncodeFloat64(absl::MakeConstSpan(centers.data(), centers.size()),
                  assign.mutable_centers_f64());
    assign.set_return_labels(true);
    assign.set_farthest(2);
    v1::JobResponse got;
    ASSERT_TRUE(shard.Assign(assign, &got).ok());
    Labels labels;
    ClusterSums sums(d, 5);
    const double objective = AssignNearest(points, centers, &labels, nullptr, &sums, &weights);
    EXPECT_EQ(Labels(got.labels().begin(), got.labels().end()), labels);
    EXPECT_EQ(Eigen::Map<const Matrix<double>>(got.center_sums().data(), d, 5), sums.sums);
    EXPECT_EQ(got.objective(), objective);
    std::vector<double> distances;
    const std::vector<int64_t> far =
        FarthestPoints(points, &weights, labels, centers, 2, &distances);
    EXPECT_EQ(std::vector<int64_t>(got.far_indices().begin(), got.far_indices().end()), far);
    EXPECT_EQ(std::vector<double>(got.far_distances().begin(), got.far_distances().end()),
              distances);
    EXPECT_TRUE(got.far_points_f32().empty());
    const Matrix<double> far_points = Decoded(got.far_points_f64(), d);
    ASSERT_EQ(far_points.cols(), 2);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(far_points.col(r), points.col(far[r]));
    ApplyMeans(sums, &centers);
  }

  SeedingShard<double> local(&points, &weights);
  const SeedAnswer<double> want =
      *local.Step({.add = points.col(3), .indices = {17}, .candidates = points.col(9)});
  v1::SeedStep seed;
  EncodeFloat64(absl::MakeConstSpan(points.col(3).data(), d), seed.mutable_add_centers_f64());
  seed.add_point_indices(17);
  EncodeFloat64(absl::MakeConstSpan(points.col(9).data(), d), seed.mutable_candidates_f64());
  v1::JobResponse got;
  ASSERT_TRUE(shard.Seed(seed, &got).ok());
  EXPECT_EQ(got.potential(), want.potential);
  EXPECT_EQ(got.points_size(), 0);
  EXPECT_EQ(Decoded(got.points_f64(), d), want.points);
  EXPECT_EQ(got.candidate_potentials(0), want.candidate_potentials[0]);

  const Matrix<double> group = points.middleCols(20, 2);
  const double potential = *local.AddCenters(group);
  const std::vector<int64_t> sampled = *local.Oversample(6, potential, 5, 1, 100);
  ASSERT_GT(sampled.size(), 0u);
  v1::KMeansParallelStep take;
  EncodeFloat64(absl::MakeConstSpan(group.data(), group.size()), take.mutable_add_centers_f64());
  take.set_oversampling(6);
  take.set_potential(potential);
  take.set_seed(5);
  take.set_round(1);
  take.set_first_point(100);
  got.Clear();
  ASSERT_TRUE(shard.KMeansParallel(take, &got).ok());
  EXPECT_EQ(got.potential(), potential);
  EXPECT_EQ(std::vector<int64_t>(got.sampled_indices().begin(), got.sampled_indices().end()),
            sampled);
  EXPECT_EQ(got.sampled_points_size(), 0);
  const Matrix<double> sampled_points = Decoded(got.sampled_points_f64(), d);
  ASSERT_EQ(sampled_points.cols(), static_cast<Eigen::Index>(sampled.size()));
  for (size_t j = 0; j < sampled.size(); ++j) {
    EXPECT_EQ(sampled_points.col(j), points.col(sampled[j]));
  }

  v1::CandidateWeightsStep weigh;
  EncodeFloat64(absl::MakeConstSpan(group.data(), group.size()), weigh.mutable_candidates_f64());
  got.Clear();
  ASSERT_TRUE(shard.CandidateWeights(weigh, &got).ok());
  EXPECT_EQ(std::vector<double>(got.candidate_weights().begin(), got.candidate_weights().end()),
            NearestCandidateWeights<double>(points, &weights, group));
}

// A float64 shard's objective, sums and potential add many squared
// distances, each within range: past double's, an assign, sample-sums or
// k-means‖ step is refused, naming the sample weights where they are
// large, never answered with an infinite number.
TEST(ResidentShard, StepsWhoseSumsOverflowDoubleAreRefusedByName) {
  const int d = 1;
  const double bound = MaxCoordinate<double>(d);
  Matrix<double> points(d, 40);
  for (Eigen::Index i = 0; i < points.cols(); ++i) points(0, i) = i % 2 == 0 ? bound : -bound;
  const Vector<double> huge = Vector<double>::Constant(40, 1e300);
  const Matrix<double> centers = Matrix<double>::Zero(d, 2);
  v1::AssignStep assign;
  assign.set_k(2);
  EncodeFloat64(absl::MakeConstSpan(centers.data(), centers.size()), assign.mutable_centers_f64());
  v1::SampleSumsStep sample;
  sample.set_k(2);
  sample.set_all_rows(true);
  EncodeFloat64(absl::MakeConstSpan(centers.data(), centers.size()), sample.mutable_centers_f64());
  v1::KMeansParallelStep parallel;  // k-means‖'s potential from a center at 0
  EncodeFloat64(absl::MakeConstSpan(centers.data(), d), parallel.mutable_add_centers_f64());
  for (const Vector<double>* weights : {static_cast<const Vector<double>*>(nullptr), &huge}) {
    SCOPED_TRACE(weights != nullptr ? "weighted" : "unweighted");
    ResidentMemory memory(1 << 20);
    ResidentShard shard(&memory, Limits{});
    v1::JobResponse response;
    ASSERT_TRUE(shard.Load(Chunk64(points, weights, 0, 40), &response).ok());
    const std::string message =
        weights != nullptr
            ? "the sample weights (the largest 1e+300) overflow double in the weighted sums or "
              "objective of these points; scale them down: only their ratios move the centers"
            : "the sums of these points overflow double: their squared distances to the "
              "centers, each within range, add up beyond it";
    for (int step = 0; step < 3; ++step) {
      v1::JobResponse out;
      const absl::Status status = step == 0   ? shard.Assign(assign, &out)
                                  : step == 1 ? shard.SampleSums(sample, &out)
                                              : shard.KMeansParallel(parallel, &out);
      EXPECT_EQ(status, absl::InvalidArgumentError(message)) << step;
    }
    if (weights != nullptr) continue;
    // Each distance is within range: the same shard answers centers among
    // its points.
    v1::AssignStep near = assign;
    const Matrix<double> ends = points.leftCols(2);
    EncodeFloat64(absl::MakeConstSpan(ends.data(), ends.size()), near.mutable_centers_f64());
    v1::JobResponse out;
    ASSERT_TRUE(shard.Assign(near, &out).ok());
    EXPECT_EQ(out.objective(), 0);
  }
}

// A job is float32 or float64 as its shard's first chunk says: payloads of
// the other precision are refused, naming what to send instead.
TEST(ResidentShard, MixedPrecisionsAreRefusedWithWhatToSend) {
  const Matrix<float> points = Points(2, 10);
  const Matrix<double> points64 = points.cast<double>();
  ResidentMemory memory(1 << 20);
  v1::JobResponse response;
  {
    ResidentShard shard(&memory, Limits{});
    ASSERT_TRUE(shard.Load(Chunk64(points64, nullptr, 0, 4), &response).ok());
    EXPECT_EQ(shard.Load(RawChunk(points, 4, 6), &response).message(),
              "points comes as float32 (points or points_f32) for a float64 shard (its points "
              "came as points_f64): send points_f64; one job's shards and steps are all float32 "
              "or all float64");
  }
  {
    ResidentShard shard(&memory, Limits{});
    ASSERT_TRUE(shard.Load(RawChunk(points, 0, 4), &response).ok());
    EXPECT_EQ(shard.Load(Chunk64(points64, nullptr, 4, 6), &response).message(),
              "points_f64 is set for a float32 shard (its points came as float32): send points "
              "or points_f32; one job's shards and steps are all float32 or all float64");
  }
  ResidentShard f32(&memory, Limits{}), f64(&memory, Limits{});
  ASSERT_TRUE(f32.Load(RawChunk(points, 0, 10), &response).ok());
  ASSERT_TRUE(f64.Load(Chunk64(points64, nullptr, 0, 10), &response).ok());
  v1::AssignStep assign64;
  assign64.set_k(1);
  EncodeFloat64(std::vector<double>{0, 0}, assign64.mutable_centers_f64());
  EXPECT_EQ(f32.Assign(assign64, &response).message(),
            "centers_f64 is set for a float32 shard (its points came as float32): send centers "
            "or centers_f32; one job's shards and steps are all float32 or all float64");
  EXPECT_TRUE(f64.Assign(assign64, &response).ok());
  const v1::AssignStep assign32 = Step(points.leftCols(1), false);
  EXPECT_EQ(f64.Assign(assign32, &response).code(), absl::StatusCode::kInvalidArgument);
  v1::SeedStep seed;
  seed.add_add_centers(0);
  seed.add_add_centers(0);
  EXPECT_EQ(f64.Seed(seed, &response).message(),
            "add_centers comes as float32 (add_centers or add_centers_f32) for a float64 shard "
            "(its points came as points_f64): send add_centers_f64; one job's shards and steps "
            "are all float32 or all float64");
  v1::KMeansParallelStep parallel;
  EncodeFloat64(std::vector<double>{0, 0}, parallel.mutable_add_centers_f64());
  EXPECT_EQ(f32.KMeansParallel(parallel, &response).code(), absl::StatusCode::kInvalidArgument);
  v1::CandidateWeightsStep candidates;
  EncodeFloat32(std::vector<float>{0, 0}, candidates.mutable_candidates_f32());
  EXPECT_EQ(f64.CandidateWeights(candidates, &response).code(), absl::StatusCode::kInvalidArgument);
  // A float64 step whose bytes do not fit d says so.
  assign64.set_centers_f64(std::string(12, '\0'));
  EXPECT_EQ(f64.Assign(assign64, &response).message(),
            "centers_f64 has 12 bytes, expected k*d*8 = 1*2*8");
}

// Sparse shards: points_csr chunks and every step on them.

template <typename Scalar>
constexpr bool kIsFloat64 = std::is_same_v<Scalar, double>;

// `values` as the field of a float32 or float64 payload: `f32` or `f64`.
template <typename Scalar>
void PutBytes(absl::Span<const Scalar> values, std::string* f32, std::string* f64) {
  if constexpr (kIsFloat64<Scalar>) {
    EncodeFloat64(values, f64);
  } else {
    EncodeFloat32(values, f32);
  }
}

template <typename Scalar>
absl::Span<const Scalar> Values(const Matrix<Scalar>& m) {
  return absl::MakeConstSpan(m.data(), m.size());
}

// Rows [first, first + count) of `points` as a points_csr chunk (its indptr
// from 0), with their weights if given.
template <typename Scalar>
v1::ShardChunk CsrChunk(const CsrMatrix<Scalar>& points, const Vector<Scalar>* weights,
                        int64_t first, int64_t count) {
  std::vector<int64_t> rows(count);
  for (int64_t i = 0; i < count; ++i) rows[i] = first + i;
  const CsrMatrix<Scalar> part = points.Rows(rows.data(), count);
  v1::ShardChunk chunk;
  chunk.set_n(points.rows());
  chunk.set_d(static_cast<int>(points.cols()));
  v1::CsrPoints* csr = chunk.mutable_points_csr();
  EncodeInt64(part.indptr(), csr->mutable_indptr_i64());
  EncodeInt32(part.indices(), csr->mutable_indices_i32());
  PutBytes<Scalar>(part.values(), csr->mutable_values_f32(), csr->mutable_values_f64());
  csr->set_shard_nnz(points.nnz());
  if (weights != nullptr) {
    PutBytes<Scalar>(absl::MakeConstSpan(weights->data() + first, count),
                     chunk.mutable_weights_f32(), chunk.mutable_weights_f64());
  }
  return chunk;
}

// The same rows as a dense chunk.
template <typename Scalar>
v1::ShardChunk DenseChunk(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                          int64_t first, int64_t count) {
  v1::ShardChunk chunk;
  chunk.set_n(points.cols());
  chunk.set_d(static_cast<int>(points.rows()));
  PutBytes<Scalar>(absl::MakeConstSpan(points.col(first).data(), count * points.rows()),
                   chunk.mutable_points_f32(), chunk.mutable_points_f64());
  if (weights != nullptr) {
    PutBytes<Scalar>(absl::MakeConstSpan(weights->data() + first, count),
                     chunk.mutable_weights_f32(), chunk.mutable_weights_f64());
  }
  return chunk;
}

template <typename T>
std::vector<T> Vec(const google::protobuf::RepeatedField<T>& field) {
  return std::vector<T>(field.begin(), field.end());
}

// A step's points in the shard's precision, as either shard answers them.
std::vector<double> StepPoints(const google::protobuf::RepeatedField<float>& values,
                               const std::string& f64) {
  std::vector<double> out(values.begin(), values.end());
  std::vector<double> wide(f64.size() / 8);
  if (!wide.empty()) DecodeFloat64(f64, wide.data());
  out.insert(out.end(), wide.begin(), wide.end());
  return out;
}

// The objectives of the two shards: the sparse one's distances come from
// the scores (SparseDistances::kProduct), within their round-off of the
// dense path's.
template <typename Scalar>
void ExpectObjectiveNear(double sparse, double dense) {
  const double tolerance = kIsFloat64<Scalar> ? 1e-12 : 1e-5;
  EXPECT_NEAR(sparse, dense, tolerance * dense);
}

// `sparse`'s sums (sparse_sums: center_sums_csr) are `dense`'s center_sums
// to the bit, with the same counts and weights.
void ExpectSparseSums(const v1::JobResponse& sparse, const v1::JobResponse& dense, int k, int d) {
  EXPECT_EQ(sparse.center_sums_size(), 0);
  EXPECT_EQ(Vec(sparse.center_counts()), Vec(dense.center_counts()));
  EXPECT_EQ(Vec(sparse.center_weights()), Vec(dense.center_weights()));
  EXPECT_TRUE(sparse.center_sums_csr().float64());
  const absl::StatusOr<CsrMatrix<double>> rows = CsrFromProto<double>(sparse.center_sums_csr(), d);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows(), k);
  EXPECT_EQ(sparse.center_sums_csr().shard_nnz(), rows->nnz());
  EXPECT_LT(rows->nnz(), int64_t{k} * d);
  ASSERT_EQ(dense.center_sums_size(), k * d);
  EXPECT_EQ(rows->ToDense(), Eigen::Map<const Matrix<double>>(dense.center_sums().data(), d, k));
}

// A weighted sparse shard loaded in three chunks answers each step as the
// dense shard of the same points made dense: labels, counts, weights and
// sums exactly, the farthest points, the seeding steps' points and
// candidate weights, the objectives and potentials within round-off.
template <typename Scalar>
void ExpectSparseShardAnswersAsDense() {
  const int n = 700, d = 400, k = 6;
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = n, .d = d, .terms = 15}, 7);
  const Matrix<Scalar> dense = docs.ToDense();
  Vector<Scalar> weights(n);
  for (int i = 0; i < n; ++i) weights[i] = Scalar(0.5) + (i % 3);
  weights[11] = 0;
  ResidentMemory memory(int64_t{1} << 30);
  ResidentShard sparse(&memory, Limits{}), full(&memory, Limits{});
  v1::JobResponse response;
  const std::pair<int, int> parts[] = {{0, 300}, {300, 150}, {450, 250}};
  for (const auto& [first, count] : parts) {
    v1::ShardChunk chunk = CsrChunk(docs, &weights, first, count);
    chunk.set_count_label_changes(true);
    const absl::Status loaded = sparse.Load(chunk, &response);
    ASSERT_TRUE(loaded.ok()) << loaded;
    EXPECT_EQ(response.points_loaded(), first + count);
    chunk = DenseChunk(dense, &weights, first, count);
    chunk.set_count_label_changes(true);
    ASSERT_TRUE(full.Load(chunk, &response).ok());
  }
  ASSERT_TRUE(sparse.complete());
  EXPECT_TRUE(sparse.sparse());
  EXPECT_FALSE(full.sparse());
  EXPECT_EQ(sparse.float64(), kIsFloat64<Scalar>);

  Matrix<Scalar> centers = dense.leftCols(k);
  centers.col(k - 1) = centers.col(k - 2);  // an empty cluster: farthest points wanted
  for (int iteration = 0; iteration < 3; ++iteration) {
    SCOPED_TRACE(iteration);
    v1::AssignStep step;
    step.set_k(k);
    PutBytes(Values(centers), step.mutable_centers_f32(), step.mutable_centers_f64());
    step.set_return_labels(true);
    step.set_farthest(2);
    step.set_omit_objective(iteration == 2);  // then NaN, as the dense shard's
    v1::JobResponse a, b;
    ASSERT_TRUE(sparse.Assign(step, &a).ok());
    ASSERT_TRUE(full.Assign(step, &b).ok());
    ASSERT_EQ(a.labels_size(), n);
    ASSERT_EQ(a.center_sums_size(), k * d);
    EXPECT_EQ(Vec(a.labels()), Vec(b.labels()));
    EXPECT_EQ(Vec(a.center_counts()), Vec(b.center_counts()));
    EXPECT_EQ(Vec(a.center_weights()), Vec(b.center_weights()));
    EXPECT_EQ(Vec(a.center_sums()), Vec(b.center_sums()));
    if (iteration == 2) {
      EXPECT_TRUE(std::isnan(a.objective()));
      EXPECT_TRUE(std::isnan(b.objective()));
    } else {
      ExpectObjectiveNear<Scalar>(a.objective(), b.objective());
    }
    EXPECT_EQ(a.points_settled_by_bounds(), 0);
    EXPECT_EQ(a.labels_compared(), iteration > 0);
    EXPECT_EQ(a.labels_changed(), b.labels_changed());
    EXPECT_EQ(Vec(a.far_indices()), Vec(b.far_indices()));
    EXPECT_EQ(Vec(a.far_labels()), Vec(b.far_labels()));
    EXPECT_EQ(Vec(a.far_weights()), Vec(b.far_weights()));
    EXPECT_EQ(Vec(a.far_distances()), Vec(b.far_distances()));
    EXPECT_EQ(a.far_points_f32(), b.far_points_f32());
    EXPECT_EQ(a.far_points_f64(), b.far_points_f64());
    ASSERT_EQ(a.far_indices_size(), 2);
    Labels labels;
    ClusterSums sums(d, k);
    AssignNearest(dense, centers, &labels, nullptr, &sums, &weights);
    ApplyMeans(sums, &centers);
  }
  // The sums as compressed sparse rows: center_sums' bits in the clusters'
  // columns; refused on a dense shard.
  {
    v1::AssignStep step;
    step.set_k(k);
    PutBytes(Values(centers), step.mutable_centers_f32(), step.mutable_centers_f64());
    v1::JobResponse a, b;
    ASSERT_TRUE(sparse.Assign(step, &b).ok());
    step.set_sparse_sums(true);
    ASSERT_TRUE(sparse.Assign(step, &a).ok());
    ExpectSparseSums(a, b, k, d);
    EXPECT_EQ(full.Assign(step, &response).message(),
              "assign.sparse_sums is set for a dense shard (its points came dense): its sums come "
              "as center_sums");
  }
  // The centers as compressed sparse rows (centers_csr): the step of the
  // same centers sent dense, on either shard.
  {
    v1::AssignStep dense_centers;
    dense_centers.set_k(k);
    dense_centers.set_return_labels(true);
    PutBytes(Values(centers), dense_centers.mutable_centers_f32(),
             dense_centers.mutable_centers_f64());
    v1::AssignStep sparse_centers = dense_centers;
    sparse_centers.clear_centers_f32();
    sparse_centers.clear_centers_f64();
    const CsrMatrix<Scalar> rows = CsrMatrix<Scalar>::FromDense(centers);
    v1::CsrPoints* csr = sparse_centers.mutable_centers_csr();
    EncodeInt64(rows.indptr(), csr->mutable_indptr_i64());
    EncodeInt32(std::vector<int>(rows.indices().begin(), rows.indices().end()),
                csr->mutable_indices_i32());
    PutBytes(absl::MakeConstSpan(rows.values()), csr->mutable_values_f32(),
             csr->mutable_values_f64());
    csr->set_float64(kIsFloat64<Scalar>);
    EXPECT_LT(rows.nnz(), int64_t{k} * d);
    for (ResidentShard* shard : {&sparse, &full}) {
      v1::JobResponse a, b;
      ASSERT_TRUE(shard->Assign(dense_centers, &a).ok());
      const absl::Status s = shard->Assign(sparse_centers, &b);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(Vec(b.labels()), Vec(a.labels()));
      EXPECT_EQ(Vec(b.center_sums()), Vec(a.center_sums()));
      EXPECT_EQ(b.objective(), a.objective());
    }
    v1::AssignStep both = sparse_centers;
    PutBytes(Values(centers), both.mutable_centers_f32(), both.mutable_centers_f64());
    EXPECT_EQ(sparse.Assign(both, &response).message(),
              "centers_csr and a dense centers field are both set; send one of them");
    v1::AssignStep fewer = sparse_centers;
    fewer.set_k(k + 1);
    EXPECT_EQ(sparse.Assign(fewer, &response).message(),
              absl::StrCat("centers_csr has ", k, " rows for k = ", k + 1, " centers"));
  }
  // A refused step leaves the shard as it was.
  v1::AssignStep bad;
  bad.set_k(0);
  EXPECT_EQ(sparse.Assign(bad, &response).code(), absl::StatusCode::kInvalidArgument);

  v1::SeedStep seed;
  if constexpr (kIsFloat64<Scalar>) {
    EncodeFloat64(absl::MakeConstSpan(dense.col(3).data(), d), seed.mutable_add_centers_f64());
    EncodeFloat64(absl::MakeConstSpan(dense.col(9).data(), d), seed.mutable_candidates_f64());
  } else {
    seed.mutable_add_centers()->Add(dense.col(3).data(), dense.col(3).data() + d);
    seed.mutable_candidates()->Add(dense.col(9).data(), dense.col(9).data() + d);
  }
  seed.add_point_indices(17);
  seed.add_point_indices(n - 1);
  {
    v1::JobResponse a, b;
    ASSERT_TRUE(sparse.Seed(seed, &a).ok());
    ASSERT_TRUE(full.Seed(seed, &b).ok());
    ExpectObjectiveNear<Scalar>(a.potential(), b.potential());
    EXPECT_EQ(StepPoints(a.points(), a.points_f64()), StepPoints(b.points(), b.points_f64()));
    ASSERT_EQ(a.candidate_potentials_size(), 1);
    ExpectObjectiveNear<Scalar>(a.candidate_potentials(0), b.candidate_potentials(0));
  }

  const Matrix<Scalar> group = dense.middleCols(20, 2);
  v1::KMeansParallelStep take;
  PutBytes(Values(group), take.mutable_add_centers_f32(), take.mutable_add_centers_f64());
  v1::JobResponse a, b;
  ASSERT_TRUE(sparse.KMeansParallel(take, &a).ok());
  ASSERT_TRUE(full.KMeansParallel(take, &b).ok());
  ExpectObjectiveNear<Scalar>(a.potential(), b.potential());
  v1::KMeansParallelStep sample;
  sample.set_oversampling(40);
  sample.set_potential(b.potential());
  sample.set_seed(5);
  sample.set_round(1);
  sample.set_first_point(100);
  sample.set_return_weights(true);
  a.Clear();
  b.Clear();
  ASSERT_TRUE(sparse.KMeansParallel(sample, &a).ok());
  ASSERT_TRUE(full.KMeansParallel(sample, &b).ok());
  ASSERT_GT(b.sampled_indices_size(), 0);
  EXPECT_EQ(Vec(a.sampled_indices()), Vec(b.sampled_indices()));
  EXPECT_EQ(StepPoints(a.sampled_points(), a.sampled_points_f64()),
            StepPoints(b.sampled_points(), b.sampled_points_f64()));
  EXPECT_EQ(Vec(a.candidate_weights()), Vec(b.candidate_weights()));

  v1::CandidateWeightsStep weigh;
  PutBytes(Values(group), weigh.mutable_candidates_f32(), weigh.mutable_candidates_f64());
  a.Clear();
  b.Clear();
  ASSERT_TRUE(sparse.CandidateWeights(weigh, &a).ok());
  ASSERT_TRUE(full.CandidateWeights(weigh, &b).ok());
  EXPECT_EQ(Vec(a.candidate_weights()), Vec(b.candidate_weights()));

  // A mini-batch's rows, one drawn twice, then every row.
  v1::SampleSumsStep batch;
  batch.set_k(k);
  PutBytes(Values(centers), batch.mutable_centers_f32(), batch.mutable_centers_f64());
  Rng rng(5);
  for (int i = 0; i < 300; ++i) batch.add_rows(static_cast<int64_t>(rng.Uniform() * n));
  batch.add_rows(batch.rows(0));
  batch.set_return_labels(true);
  batch.add_fetch_rows(7);
  batch.add_fetch_rows(n - 1);
  for (const bool all_rows : {false, true}) {
    SCOPED_TRACE(all_rows);
    if (all_rows) batch.clear_rows();
    batch.set_all_rows(all_rows);
    a.Clear();
    b.Clear();
    ASSERT_TRUE(sparse.SampleSums(batch, &a).ok());
    ASSERT_TRUE(full.SampleSums(batch, &b).ok());
    ASSERT_EQ(a.labels_size(), all_rows ? n : 301);
    EXPECT_EQ(Vec(a.labels()), Vec(b.labels()));
    EXPECT_EQ(Vec(a.center_counts()), Vec(b.center_counts()));
    EXPECT_EQ(Vec(a.center_weights()), Vec(b.center_weights()));
    EXPECT_EQ(Vec(a.center_sums()), Vec(b.center_sums()));
    ExpectObjectiveNear<Scalar>(a.objective(), b.objective());
    EXPECT_EQ(StepPoints(a.points(), a.points_f64()), StepPoints(b.points(), b.points_f64()));
    EXPECT_EQ(StepPoints(a.points(), a.points_f64()).size(), 2u * d);
    batch.set_sparse_sums(true);
    v1::JobResponse rows;
    ASSERT_TRUE(sparse.SampleSums(batch, &rows).ok());
    batch.set_sparse_sums(false);
    ExpectSparseSums(rows, a, k, d);
    EXPECT_EQ(Vec(rows.labels()), Vec(a.labels()));
    EXPECT_EQ(rows.objective(), a.objective());
  }

  const v1::MiniBatchStepsStep steps = MiniBatchSteps(centers.template cast<double>(), 64, 5);
  a.Clear();
  b.Clear();
  ASSERT_TRUE(sparse.MiniBatchSteps(steps, &a).ok());
  ASSERT_TRUE(full.MiniBatchSteps(steps, &b).ok());
  EXPECT_EQ(a.minibatch().steps_run(), 5);
  EXPECT_EQ(a.minibatch().centers_f64(), b.minibatch().centers_f64());
  EXPECT_EQ(Vec(a.minibatch().counts()), Vec(b.minibatch().counts()));
  EXPECT_EQ(a.minibatch().reassigned(), b.minibatch().reassigned());
}

TEST(ResidentShard, ASparseShardAnswersEveryStepAsTheDenseShardOfItsPoints) {
  ExpectSparseShardAnswersAsDense<float>();
}

TEST(ResidentShard, AFloat64SparseShardAnswersEveryStepAsTheDenseShardOfItsPoints) {
  ExpectSparseShardAnswersAsDense<double>();
}

// Four rows in five columns, nonzeros in rows 0, 2 and 3.
CsrMatrix<float> SmallCsr() {
  return *CsrMatrix<float>::Create(4, 5, {0, 2, 2, 5, 6}, {0, 3, 1, 2, 4, 4},
                                   {1, 2, -1, 0.5f, 3, 1});
}

TEST(ResidentShard, ASparseShardReservesItsNonzerosAndRowOffsets) {
  // 8 bytes a float32 nonzero, 8 per row offset, 40 per point's state (as
  // a dense shard's), and 4 (float32) or 8 (float64) more per point for
  // weights.
  EXPECT_EQ(ResidentShard::SparseBytes(1000, 5000), 5000 * 8 + 8 * 1001 + 1000 * 40);
  EXPECT_EQ(ResidentShard::SparseBytes(1000, 5000, /*weighted=*/true, false, /*float64=*/true),
            5000 * 12 + 8 * 1001 + 1000 * (48 + 8));
  EXPECT_EQ(ResidentShard::SparseBytes(int64_t{1} << 62, 1), 0);

  const CsrMatrix<float> points = SmallCsr();
  ResidentMemory memory(1 << 20);
  v1::JobResponse response;
  {
    ResidentShard shard(&memory, Limits{});
    ASSERT_TRUE(shard.Load(CsrChunk<float>(points, nullptr, 0, 2), &response).ok());
    EXPECT_EQ(memory.held(), ResidentShard::SparseBytes(4, 6));
    EXPECT_EQ(response.points_loaded(), 2);
  }
  EXPECT_EQ(memory.held(), 0);
  // The reservation is the chunk's shard_nnz, however the rows come.
  ResidentMemory small(ResidentShard::SparseBytes(4, 6) - 1);
  ResidentShard shard(&small, Limits{});
  const absl::Status refused = shard.Load(CsrChunk<float>(points, nullptr, 0, 2), &response);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(small.held(), 0);
}

// A sparse shard's d is a vocabulary's, bound by max_sparse_d rather than
// max_d: two rows in 2^17 columns load and are assigned, as dense ones
// could not be.
TEST(ResidentShard, ASparseShardsDIsBoundByMaxSparseD) {
  const int d = 1 << 17;
  const CsrMatrix<float> points =
      *CsrMatrix<float>::Create(2, d, {0, 1, 3}, {d - 1, 0, 5}, {2, 1, 3});
  ResidentMemory memory(1 << 20);
  v1::JobResponse response;
  ResidentShard shard(&memory, Limits{});
  ASSERT_TRUE(shard.Load(CsrChunk<float>(points, nullptr, 0, 2), &response).ok());
  v1::AssignStep step;
  step.set_k(1);
  EncodeFloat32(std::vector<float>(d, 0.0f), step.mutable_centers_f32());
  ASSERT_TRUE(shard.Assign(step, &response).ok());
  ASSERT_EQ(response.center_sums_size(), d);
  EXPECT_EQ(response.center_sums(0), 1);
  EXPECT_EQ(response.center_sums(5), 3);
  EXPECT_EQ(response.center_sums(d - 1), 2);
  EXPECT_EQ(response.objective(), 4 + 1 + 9);

  Limits small;
  small.max_sparse_d = d - 1;
  ResidentShard refused(&memory, small);
  EXPECT_EQ(refused.Load(CsrChunk<float>(points, nullptr, 0, 2), &response).message(),
            "shard of n = 2, d = 131072: needs n >= 1 and 1 <= d <= 131071 (--max_sparse_d)");
  ResidentShard dense(&memory, Limits{});
  v1::ShardChunk chunk;
  chunk.set_n(2);
  chunk.set_d(d);
  chunk.mutable_points()->Resize(2 * d, 0.0f);
  EXPECT_EQ(dense.Load(chunk, &response).message(),
            "shard of n = 2, d = 131072: needs n >= 1 and 1 <= d <= 4096 (--max_d)");
}

// Each malformed sparse chunk is refused with INVALID_ARGUMENT naming the
// field, the rule and (for the rules CsrMatrix::Create checks) where the
// chunk's rows are in the shard. A bad chunk ends its job, so each case
// takes a shard of its own: the first chunk (rows 0 and 1) is good, the
// second (rows 2 and 3) is broken.
TEST(ResidentShard, BadSparseChunksAreNamed) {
  const CsrMatrix<float> points = SmallCsr();
  const v1::ShardChunk first = CsrChunk<float>(points, nullptr, 0, 2);
  const v1::ShardChunk second = CsrChunk<float>(points, nullptr, 2, 2);
  const auto indptr = [](std::vector<int64_t> values) {
    std::string bytes;
    EncodeInt64(values, &bytes);
    return bytes;
  };
  const auto indices = [](std::vector<int> values) {
    std::string bytes;
    EncodeInt32(values, &bytes);
    return bytes;
  };
  const std::string chunk_at = "the chunk from shard row 2 (its row r is shard row 2 + r): ";
  const std::string where = chunk_at + "points_csr: ";
  struct Case {
    const char* name;
    std::function<void(v1::ShardChunk*)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"indptr starts past 0",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indptr_i64(indptr({1, 3, 4}));
       },
       where + "indptr[0] = 1, expected 0"},
      {"indptr decreases",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indptr_i64(indptr({0, 3, 2}));
       },
       where + "indptr decreases at row 1: indptr[2] = 2 < indptr[1] = 3"},
      {"indptr ends short of the values",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indptr_i64(indptr({0, 3, 3}));
       },
       where + "indptr[2] = 3, expected the number of values, 4"},
      {"a column past d",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indices_i32(indices({1, 2, 5, 4}));
       },
       where + "indices[2] = 5 (row 0) is outside [0, cols = 5)"},
      {"a negative column",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indices_i32(indices({1, 2, 4, -1}));
       },
       where + "indices[3] = -1 (row 1) is outside [0, cols = 5)"},
      {"columns unsorted",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indices_i32(indices({2, 1, 4, 4}));
       },
       where + "indices[1] = 1 (row 0) is below indices[0] = 2: columns must increase within a row "
               "(scipy: sort_indices())"},
      {"a repeated column",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indices_i32(indices({1, 1, 4, 4}));
       },
       where + "indices[1] = 1 (row 0) repeats the column before it: duplicates must be summed "
               "first (scipy: sum_duplicates())"},
      {"a NaN value",
       [&](v1::ShardChunk* c) {
         EncodeFloat32(std::vector<float>{-1, std::numeric_limits<float>::quiet_NaN(), 3, 1},
                       c->mutable_points_csr()->mutable_values_f32());
       },
       where + "values[1] = nan (row 0, column 2) is not finite"},
      {"fewer columns than values",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indices_i32(indices({1, 2, 4}));
       },
       where + "indices has 3 values and values has 4: one column per value"},
      {"indptr in a part of an offset",
       [&](v1::ShardChunk* c) { c->mutable_points_csr()->mutable_indptr_i64()->resize(23); },
       chunk_at +
           "points_csr.indptr_i64 has 23 bytes, not a whole number of int64 offsets: it holds "
           "rows + 1 of them"},
      {"no indptr", [&](v1::ShardChunk* c) { c->mutable_points_csr()->clear_indptr_i64(); },
       chunk_at +
           "points_csr.indptr_i64 has 0 bytes, not a whole number of int64 offsets: it holds "
           "rows + 1 of them"},
      {"indices in a part of a column",
       [&](v1::ShardChunk* c) { c->mutable_points_csr()->mutable_indices_i32()->resize(15); },
       chunk_at + "points_csr.indices_i32 has 15 bytes, not a whole number of int32 columns"},
      {"values in a part of a value",
       [&](v1::ShardChunk* c) { c->mutable_points_csr()->mutable_values_f32()->resize(15); },
       chunk_at + "points_csr.values_f32 has 15 bytes, not a whole number of float32 values"},
      {"flagged float64 on a float32 shard",
       [&](v1::ShardChunk* c) { c->mutable_points_csr()->set_float64(true); },
       chunk_at +
           "points_csr.float64 is set where the points are float32: send points_csr.values_f32; "
           "one request's or job's payloads are all float32 or all float64"},
      {"float64 values on a float32 shard",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->clear_values_f32();
         EncodeFloat64(std::vector<double>{-1, 0.5, 3, 1},
                       c->mutable_points_csr()->mutable_values_f64());
       },
       chunk_at + "points_csr.values_f64 is set where the points are float32: send "
                  "points_csr.values_f32; one request's or job's payloads are all float32 or all "
                  "float64"},
      {"more rows than are left",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indptr_i64(indptr({0, 3, 4, 4}));
       },
       "points_csr has 3 rows after 2 of the shard's n = 4 points: at most the points left"},
      {"more nonzeros than shard_nnz",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indptr_i64(indptr({0, 3, 5}));
         c->mutable_points_csr()->set_indices_i32(indices({1, 2, 4, 0, 4}));
         EncodeFloat32(std::vector<float>{-1, 0.5, 3, 1, 1},
                       c->mutable_points_csr()->mutable_values_f32());
       },
       "points_csr has 5 nonzeros after the shard's 2: past its points_csr.shard_nnz = 6"},
      {"fewer nonzeros than shard_nnz",
       [&](v1::ShardChunk* c) {
         c->mutable_points_csr()->set_indptr_i64(indptr({0, 3, 3}));
         c->mutable_points_csr()->set_indices_i32(indices({1, 2, 4}));
         EncodeFloat32(std::vector<float>{-1, 0.5, 3},
                       c->mutable_points_csr()->mutable_values_f32());
       },
       "the shard's 4 points have 5 nonzeros; its chunks said points_csr.shard_nnz = 6"},
      {"another shard_nnz", [&](v1::ShardChunk* c) { c->mutable_points_csr()->set_shard_nnz(7); },
       "a chunk says points_csr.shard_nnz = 7, the shard's first said 6"},
      {"a dense chunk",
       [&](v1::ShardChunk* c) {
         c->clear_points_csr();
         c->mutable_points()->Resize(10, 0.0f);
       },
       "a chunk carries points for a sparse shard (its first chunk came as points_csr): every "
       "chunk of a sparse shard carries its points as points_csr"},
      {"no points", [&](v1::ShardChunk* c) { c->clear_points_csr(); },
       "a chunk carries no points_csr for a sparse shard (its first chunk came as points_csr): "
       "every chunk of a sparse shard carries its points as points_csr"},
      {"dense points too", [&](v1::ShardChunk* c) { c->set_points_f32(std::string(40, '\0')); },
       "points_csr and points_f32 are both set; send one of them"},
      {"an offset", [&](v1::ShardChunk* c) { c->mutable_points_offset()->Resize(5, 1.0f); },
       "points_offset is set for a sparse shard (its points came as points_csr): shifting would "
       "fill its rows"},
      {"weights on an unweighted shard",
       [&](v1::ShardChunk* c) { c->mutable_weights()->Resize(2, 1.0f); },
       "a chunk carries weights, but the shard's first chunk had none: weights come in every "
       "chunk or in none"},
  };
  ResidentMemory memory(1 << 20);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ResidentShard shard(&memory, Limits{});
    v1::JobResponse response;
    ASSERT_TRUE(shard.Load(first, &response).ok());
    v1::ShardChunk bad = second;
    c.change(&bad);
    const absl::Status status = shard.Load(bad, &response);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), c.message);
  }

  // The first chunk's rules: a shard_nnz n rows of d columns cannot hold,
  // and a sparse chunk on a dense shard.
  v1::JobResponse response;
  v1::ShardChunk too_many = first;
  too_many.mutable_points_csr()->set_shard_nnz(21);
  ResidentShard shard(&memory, Limits{});
  EXPECT_EQ(shard.Load(too_many, &response).message(),
            "points_csr.shard_nnz = 21, must be between 0 and n * d for n = 4, d = 5");
  too_many.mutable_points_csr()->set_shard_nnz(-1);
  EXPECT_EQ(shard.Load(too_many, &response).message(),
            "points_csr.shard_nnz = -1, must be between 0 and n * d for n = 4, d = 5");
  EXPECT_EQ(memory.held(), 0);
  const Matrix<float> dense = points.ToDense();
  ResidentShard full(&memory, Limits{});
  ASSERT_TRUE(full.Load(DenseChunk<float>(dense, nullptr, 0, 2), &response).ok());
  EXPECT_EQ(full.Load(second, &response).message(),
            "a chunk carries points_csr for a dense shard (its first chunk came as dense points): "
            "every chunk of one shard is sparse or none is");
  // Weighted: one weight with every row.
  Vector<float> weights = Vector<float>::Ones(4);
  ResidentShard weighted(&memory, Limits{});
  ASSERT_TRUE(weighted.Load(CsrChunk<float>(points, &weights, 0, 2), &response).ok());
  v1::ShardChunk short_weights = CsrChunk<float>(points, &weights, 2, 2);
  short_weights.mutable_weights_f32()->resize(4);
  EXPECT_EQ(weighted.Load(short_weights, &response).message(),
            "a chunk of 2 points has 1 weights; a weighted shard takes one with every point");
}

// A float64 sparse shard is decided by its first chunk's values_f64 or
// float64 flag; a float32 chunk after it is refused.
TEST(ResidentShard, AFloat64SparseShardTakesFloat64ValuesOnly) {
  const CsrMatrix<double> points = *CsrMatrix<double>::Create(
      4, 5, {0, 2, 2, 5, 6}, {0, 3, 1, 2, 4, 4}, {1, 2, -1, 0.5, 3, 1e6 + 1.0 / 1024});
  ResidentMemory memory(1 << 20);
  ResidentShard shard(&memory, Limits{});
  v1::JobResponse response;
  ASSERT_TRUE(shard.Load(CsrChunk<double>(points, nullptr, 0, 2), &response).ok());
  EXPECT_TRUE(shard.float64());
  EXPECT_EQ(memory.held(), ResidentShard::SparseBytes(4, 6, false, false, /*float64=*/true));
  v1::ShardChunk narrow = CsrChunk<double>(points, nullptr, 2, 2);
  EncodeFloat32(std::vector<float>{-1, 0.5, 3, 1},
                narrow.mutable_points_csr()->mutable_values_f32());
  narrow.mutable_points_csr()->clear_values_f64();
  EXPECT_EQ(shard.Load(narrow, &response).message(),
            "the chunk from shard row 2 (its row r is shard row 2 + r): points_csr.values_f32 is "
            "set where the points are float64: send points_csr.values_f64; one request's or "
            "job's payloads are all float32 or all float64");
  // A first chunk of empty rows has no values: its float64 flag makes the
  // shard float64; the flag on a float32 shard is refused.
  const CsrMatrix<double> late = *CsrMatrix<double>::Create(3, 5, {0, 0, 0, 1}, {2}, {0.25});
  ResidentShard flagged(&memory, Limits{});
  v1::ShardChunk empty_rows = CsrChunk<double>(late, nullptr, 0, 2);
  EXPECT_TRUE(empty_rows.points_csr().values_f64().empty());
  empty_rows.mutable_points_csr()->set_float64(true);
  ASSERT_TRUE(flagged.Load(empty_rows, &response).ok());
  EXPECT_TRUE(flagged.float64());
  v1::ShardChunk last_row = CsrChunk<double>(late, nullptr, 2, 1);
  last_row.mutable_points_csr()->set_float64(true);
  EXPECT_TRUE(flagged.Load(last_row, &response).ok());
  ResidentShard unflagged(&memory, Limits{});
  empty_rows.mutable_points_csr()->set_float64(false);
  ASSERT_TRUE(unflagged.Load(empty_rows, &response).ok());
  EXPECT_FALSE(unflagged.float64());
  EXPECT_EQ(unflagged.Load(last_row, &response).message(),
            "the chunk from shard row 2 (its row r is shard row 2 + r): points_csr.values_f64 is "
            "set where the points are float32: send points_csr.values_f32; one request's or "
            "job's payloads are all float32 or all float64");
  ResidentShard whole(&memory, Limits{});
  ASSERT_TRUE(whole.Load(CsrChunk<double>(points, nullptr, 0, 2), &response).ok());
  ASSERT_TRUE(whole.Load(CsrChunk<double>(points, nullptr, 2, 2), &response).ok());
  v1::AssignStep step;
  step.set_k(1);
  EncodeFloat64(std::vector<double>{0, 0, 0, 0, 1e6}, step.mutable_centers_f64());
  step.set_return_labels(true);
  ASSERT_TRUE(whole.Assign(step, &response).ok());
  // Row 3's 1e6 + 2^-10 is kept in double: its sum is not float32's.
  EXPECT_EQ(response.center_sums(4), 1e6 + 1.0 / 1024 + 3);
}

}  // namespace
}  // namespace kmt
