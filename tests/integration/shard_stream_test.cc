// One resident shard's stream (client/shard_stream.h) on real kmt-server
// processes on loopback ports: a shard loaded in chunks over the wire and
// through a memory file answers an assign step as the core does; the
// replays give a shard loaded again the seeding distances it had, to the
// bit; and ReplicaGone calls a replica's failure only a stream broken by a
// replica that died, never the job's own errors (the source's, an answer's,
// a replica without room).
#include "client/shard_stream.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "core/assign.h"
#include "core/random.h"
#include "proto/batch_error.h"
#include "proto/job_matrices.h"
#include "tests/integration/one_server_test.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

constexpr int kD = 5, kK = 4;

Matrix<float> RandomPoints(int64_t n, uint64_t seed) {
  Rng rng(seed);
  Matrix<float> points(kD, n);
  for (int64_t i = 0; i < points.size(); ++i) points.data()[i] = static_cast<float>(rng.Normal());
  return points;
}

PointSource SourceOf(const Matrix<float>& points) {
  return [&points](int64_t first, int64_t count, float* out) {
    std::copy_n(points.col(first).data(), count * kD, out);
    return absl::OkStatus();
  };
}

v1::JobRequest AssignRequest(const Matrix<float>& centers) {
  v1::JobRequest request;
  request.mutable_assign()->set_k(static_cast<int>(centers.cols()));
  request.mutable_assign()->set_return_labels(true);
  WriteMatrix(centers, wire::Centers(request.mutable_assign()));
  return request;
}

class ShardStreamTest : public OneServerTest {};

// Points [300, 2300) of a source of 3,000, in chunks of 40 points over the
// wire and in a memory file's slots: the labels are the core's, and the
// load counts its chunks and their bytes.
TEST_F(ShardStreamTest, ALoadedShardAssignsAsTheCoreOverTheWireAndThroughMemory) {
  const Matrix<float> points = RandomPoints(3000, 1);
  const Matrix<float> shard = points.middleCols(300, 2000);
  const Matrix<float> centers = points.leftCols(kK);
  Labels want;
  AssignNearest(shard, centers, &want);
  auto stub = ReplicaStub(server_->address(), ChannelSecurity());
  const ShardSource source = SourceOf(points);
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "through memory" : "over the wire");
    const ShardLoadOptions options{.d = kD, .chunk_bytes = 40 * kD * 4, .shared_points = shared};
    absl::StatusOr<std::unique_ptr<ShardStream>> stream = ShardStream::Load(
        stub.get(), server_->address(), source, options, {.first = 300, .count = 2000});
    ASSERT_TRUE(stream.ok()) << stream.status();
    EXPECT_EQ((*stream)->chunks(), 50);
    EXPECT_GT((*stream)->chunk_bytes_sent(), 0);
    if (!shared) {
      // Each chunk's 800 bytes of points, a few of framing more.
      EXPECT_GE((*stream)->largest_chunk_bytes(), 800);
      EXPECT_LT((*stream)->largest_chunk_bytes(), 800 + 64);
    }
    ASSERT_TRUE((*stream)->Send(AssignRequest(centers)).ok());
    absl::StatusOr<v1::JobResponse> answer = (*stream)->Receive();
    ASSERT_TRUE(answer.ok()) << answer.status();
    ASSERT_TRUE(FromBatchError(answer->error()).ok());
    ASSERT_EQ(answer->labels_size(), 2000);
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(answer->labels(i), want[i]) << i;
  }
}

// k-means++'s first centers taken in on one shard; the same points loaded
// again with that step kept (KeepForReplay) answer the next step's
// candidate potentials to the bit.
TEST_F(ShardStreamTest, ReplaysGiveAShardLoadedAgainItsSeedingDistances) {
  const Matrix<float> points = RandomPoints(1500, 2);
  auto stub = ReplicaStub(server_->address(), ChannelSecurity());
  const ShardSource source = SourceOf(points);
  const ShardLoadOptions options{.d = kD};
  absl::StatusOr<std::unique_ptr<ShardStream>> first =
      ShardStream::Load(stub.get(), server_->address(), source, options, {.count = 1500});
  ASSERT_TRUE(first.ok()) << first.status();

  v1::JobRequest take;
  const Matrix<float> taken = points.middleCols(10, 3);
  take.mutable_seed()->mutable_add_centers()->Assign(taken.data(), taken.data() + taken.size());
  take.mutable_seed()->add_point_indices(7);  // not replayed
  std::vector<v1::JobRequest> replays;
  KeepForReplay(take, &replays);
  ASSERT_EQ(replays.size(), 1u);
  EXPECT_EQ(replays[0].seed().add_centers_size(), taken.size());
  EXPECT_EQ(replays[0].seed().point_indices_size(), 0);
  KeepForReplay(AssignRequest(taken), &replays);  // not a seeding step
  ASSERT_EQ(replays.size(), 1u);

  ASSERT_TRUE((*first)->Send(take).ok());
  ASSERT_TRUE((*first)->Receive().ok());
  absl::StatusOr<std::unique_ptr<ShardStream>> again = ShardStream::Load(
      stub.get(), server_->address(), source, options, {.count = 1500, .replays = &replays});
  ASSERT_TRUE(again.ok()) << again.status();

  v1::JobRequest next;
  const Matrix<float> candidates = points.middleCols(500, 6);
  next.mutable_seed()->mutable_candidates()->Assign(candidates.data(),
                                                    candidates.data() + candidates.size());
  std::string answers[2];
  int s = 0;
  for (ShardStream* stream : {first->get(), again->get()}) {
    ASSERT_TRUE(stream->Send(next).ok());
    absl::StatusOr<v1::JobResponse> answer = stream->Receive();
    ASSERT_TRUE(answer.ok()) << answer.status();
    ASSERT_TRUE(FromBatchError(answer->error()).ok());
    ASSERT_EQ(answer->candidate_potentials_size(), 6);
    answer->clear_compute_seconds();
    answers[s++] = answer->SerializeAsString();
  }
  EXPECT_EQ(answers[0], answers[1]);
}

// The job's own failures: the source's, an error the replica answers, a
// replica without room. None is the replica's.
TEST_F(ShardStreamTest, TheJobsOwnErrorsAreNotTheReplicas) {
  const Matrix<float> points = RandomPoints(100, 3);
  auto stub = ReplicaStub(server_->address(), ChannelSecurity());
  const ShardLoadOptions options{.d = kD};
  const ShardSource failing =
      PointSource([](int64_t, int64_t, float*) { return absl::AbortedError("the source failed"); });
  absl::StatusOr<std::unique_ptr<ShardStream>> stream =
      ShardStream::Load(stub.get(), server_->address(), failing, options, {.count = 100});
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().message(), "the source failed");
  EXPECT_FALSE(ReplicaGone(stream.status()));

  stream =
      ShardStream::Load(stub.get(), server_->address(), SourceOf(points), options, {.count = 100});
  ASSERT_TRUE(stream.ok()) << stream.status();
  v1::JobRequest bad = AssignRequest(points.leftCols(kK));
  bad.mutable_assign()->set_k(kK + 1);  // more centers than it carries
  ASSERT_TRUE((*stream)->Send(bad).ok());
  absl::StatusOr<v1::JobResponse> answer = (*stream)->Receive();
  ASSERT_TRUE(answer.ok()) << answer.status();
  const absl::Status answered = FromBatchError(answer->error());
  EXPECT_EQ(answered.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ReplicaGone(answered));

  std::unique_ptr<ServerProcess> small = ServerProcess::Start({"--max_resident_bytes=1024"});
  auto small_stub = ReplicaStub(small->address(), ChannelSecurity());
  stream = ShardStream::Load(small_stub.get(), small->address(), SourceOf(points), options,
                             {.count = 100});
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kResourceExhausted) << stream.status();
  EXPECT_FALSE(ReplicaGone(stream.status()));
}

// A replica killed under a loaded shard: its next step fails, and that is
// the replica's failure; so is a load on a replica that is gone.
TEST_F(ShardStreamTest, AReplicaKilledIsGone) {
  const Matrix<float> points = RandomPoints(200, 4);
  std::unique_ptr<ServerProcess> doomed = ServerProcess::Start({});
  const std::string address = doomed->address();
  auto stub = ReplicaStub(address, ChannelSecurity());
  const ShardLoadOptions options{.d = kD};
  absl::StatusOr<std::unique_ptr<ShardStream>> stream =
      ShardStream::Load(stub.get(), address, SourceOf(points), options, {.count = 200});
  ASSERT_TRUE(stream.ok()) << stream.status();
  doomed->Signal(SIGKILL);
  doomed->Wait(absl::Seconds(30));
  absl::Status failed = (*stream)->Send(AssignRequest(points.leftCols(kK)));
  if (failed.ok()) failed = (*stream)->Receive().status();
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(ReplicaGone(failed)) << failed;
  // The mark is not part of the message.
  EXPECT_EQ(failed.ToString(absl::StatusToStringMode::kWithNoExtraData).find("replica-gone"),
            std::string::npos);

  const ShardLoadOptions quick{.d = kD, .stream_timeout = absl::Seconds(5)};
  stream = ShardStream::Load(stub.get(), address, SourceOf(points), quick, {.count = 200});
  ASSERT_FALSE(stream.ok());
  EXPECT_TRUE(ReplicaGone(stream.status())) << stream.status();
}

}  // namespace
}  // namespace kmt
