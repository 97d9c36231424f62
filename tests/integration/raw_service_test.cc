// Raw float32 payloads through a real kmt-server: the same answers as the
// repeated fields on Cluster and Job streams, and a bad byte count refused
// with INVALID_ARGUMENT in its own response while the stream goes on.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "learn/task_generator.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/raw_payload.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

class RawServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = ServerProcess::Start({"--model_dir=", "--workers=2"}).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(absl::Seconds(30)), 0);
    delete server_;
  }
  static std::unique_ptr<v1::KMeansTransformer::Stub> Stub() {
    return v1::KMeansTransformer::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  static ServerProcess* server_;
};
ServerProcess* RawServiceTest::server_ = nullptr;

const Matrix<float>& Points() {
  static const Matrix<float>* points =
      new Matrix<float>(GenerateTask<float>({.n = 3000, .d = 5, .k = 4, .scale = 0.2}, 8).points);
  return *points;
}

v1::ClusterRequest Repeated(const std::string& id) {
  const Matrix<float>& points = Points();
  v1::ClusterRequest r;
  r.set_request_id(id);
  r.set_model("lloyd-onehot");
  r.set_n(points.cols());
  r.set_d(static_cast<int>(points.rows()));
  r.mutable_points()->Add(points.data(), points.data() + points.size());
  r.set_k(4);
  r.set_iterations(6);
  r.set_seed(3);
  return r;
}

v1::ClusterRequest Raw(const std::string& id) {
  v1::ClusterRequest r = Repeated(id);
  EncodeFloat32(r.points(), r.mutable_points_f32());
  r.clear_points();
  r.set_raw_response(true);
  return r;
}

// Every request on one stream; the responses and the stream's status.
std::pair<std::vector<v1::ClusterResponse>, grpc::Status> Exchange(
    v1::KMeansTransformer::Stub* stub, const std::vector<v1::ClusterRequest>& requests) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub->Cluster(&context);
  for (const v1::ClusterRequest& r : requests) EXPECT_TRUE(stream->Write(r));
  stream->WritesDone();
  std::vector<v1::ClusterResponse> responses;
  for (v1::ClusterResponse r; stream->Read(&r);) responses.push_back(r);
  return {responses, stream->Finish()};
}

TEST_F(RawServiceTest, ARawRequestIsAnsweredAsTheRepeatedOneInBytes) {
  auto stub = Stub();
  v1::ClusterRequest given = Raw("raw-given");
  given.set_init(v1::INIT_GIVEN);
  EncodeFloat32(absl::MakeConstSpan(Points().data(), 4 * 5), given.mutable_centers_f32());
  v1::ClusterRequest given_repeated = Repeated("repeated-given");
  given_repeated.set_init(v1::INIT_GIVEN);
  given_repeated.mutable_centers()->Add(Points().data(), Points().data() + 4 * 5);
  const auto [responses, status] =
      Exchange(stub.get(), {Repeated("repeated"), Raw("raw"), given_repeated, given});
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 4u);
  for (int pair : {0, 2}) {
    SCOPED_TRACE(responses[pair + 1].request_id());
    const v1::ClusterResponse &repeated = responses[pair], &raw = responses[pair + 1];
    ASSERT_FALSE(raw.has_error()) << raw.error().message();
    EXPECT_EQ(raw.labels_size(), 0);
    EXPECT_EQ(raw.centers_size(), 0);
    std::string labels, centers;
    EncodeInt32(std::vector<int>(repeated.labels().begin(), repeated.labels().end()), &labels);
    EncodeFloat32(repeated.centers(), &centers);
    EXPECT_EQ(raw.labels_i32(), labels);
    EXPECT_EQ(raw.centers_f32(), centers);
    EXPECT_EQ(raw.objective(), repeated.objective());
    EXPECT_EQ(raw.iterations_run(), repeated.iterations_run());
  }
}

TEST_F(RawServiceTest, ABadByteCountIsRefusedInItsResponseAndTheStreamGoesOn) {
  auto stub = Stub();
  v1::ClusterRequest short_points = Raw("short");
  short_points.mutable_points_f32()->resize(short_points.points_f32().size() - 3);
  v1::ClusterRequest both = Raw("both");
  both.add_points(1);
  v1::ClusterRequest centers = Raw("centers");
  centers.set_init(v1::INIT_GIVEN);
  centers.set_centers_f32(std::string(4 * 5 * 4 + 4, '\0'));
  const auto [responses, status] =
      Exchange(stub.get(), {short_points, both, centers, Raw("after")});
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 4u);
  const std::string messages[] = {"points_f32 has 59997 bytes, expected n*d*4 = 3000*5*4",
                                  "points and points_f32 are both set; send one of them",
                                  "centers_f32 has 84 bytes, expected k*d*4 = 4*5*4"};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(responses[i].request_id());
    EXPECT_EQ(responses[i].error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_EQ(responses[i].error().message(), messages[i]);
  }
  EXPECT_FALSE(responses[3].has_error()) << responses[3].error().message();
  EXPECT_EQ(responses[3].labels_i32().size(), 3000u * 4);
}

TEST_F(RawServiceTest, AJobLoadedAndAskedInRawBytesAnswersAsARepeatedOne) {
  const Matrix<float>& points = Points();
  auto stub = Stub();
  // One shard loaded with repeated fields, one with raw bytes, each asked the
  // same step with its centers in the same encoding.
  std::vector<v1::JobResponse> answers;
  for (bool raw : {false, true}) {
    SCOPED_TRACE(raw ? "raw" : "repeated");
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub->Job(&context);
    v1::JobRequest load;
    v1::ShardChunk* chunk = load.mutable_shard();
    chunk->set_n(points.cols());
    chunk->set_d(static_cast<int>(points.rows()));
    const absl::Span<const float> values(points.data(), points.size());
    v1::JobRequest assign;
    assign.mutable_assign()->set_k(4);
    assign.mutable_assign()->set_return_labels(true);
    const absl::Span<const float> centers(points.data(), 4 * points.rows());
    if (raw) {
      EncodeFloat32(values, chunk->mutable_points_f32());
      EncodeFloat32(centers, assign.mutable_assign()->mutable_centers_f32());
    } else {
      chunk->mutable_points()->Add(values.begin(), values.end());
      assign.mutable_assign()->mutable_centers()->Add(centers.begin(), centers.end());
    }
    v1::JobRequest bad = assign;
    bad.mutable_assign()->clear_centers();
    bad.mutable_assign()->set_centers_f32("12345");
    v1::JobResponse r;
    ASSERT_TRUE(stream->Write(load));
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_EQ(r.points_loaded(), points.cols());
    // A bad step gets its own error; the shard stays for the next.
    ASSERT_TRUE(stream->Write(bad));
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_EQ(r.error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_EQ(r.error().message(), "centers_f32 has 5 bytes, expected k*d*4 = 4*5*4");
    ASSERT_TRUE(stream->Write(assign));
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_FALSE(r.has_error()) << r.error().message();
    r.clear_compute_seconds();
    answers.push_back(r);
    // The same step with its labels as int32 bytes: the same labels.
    v1::JobRequest raw_labels = assign;
    raw_labels.mutable_assign()->set_raw_labels(true);
    ASSERT_TRUE(stream->Write(raw_labels));
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_FALSE(r.has_error()) << r.error().message();
    EXPECT_EQ(r.labels_size(), 0);
    std::string want_labels;
    EncodeInt32(std::vector<int>(answers.back().labels().begin(), answers.back().labels().end()),
                &want_labels);
    EXPECT_EQ(r.labels_i32(), want_labels);
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  EXPECT_EQ(answers[0].SerializeAsString(), answers[1].SerializeAsString());
  EXPECT_EQ(answers[0].labels_size(), points.cols());
}

}  // namespace
}  // namespace kmt
