// Raw payloads through a real kmt-server: float32 bytes give the same answers
// as the repeated fields on Cluster and Job streams, and a bad byte count is
// refused with INVALID_ARGUMENT in its own response while the stream goes on.
// A float64 request is clustered in double, layer for layer the plain
// reference Lloyd's in double, with its offset, weights and distances in
// double too; one that mixes float32 and float64 payloads is refused.
// Binary16 and bfloat16 payloads are answered as the float32 request of the
// values they widen to, on Cluster and Job streams alike.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "learn/task_generator.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/raw_payload.h"
#include "reference/lloyd.h"
#include "tests/integration/server_process.h"
#include "tests/support/gaussian_clusters.h"

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

// ---- Float64 payloads: a batch clustered in double. ----

constexpr int kK = 4;

// Clusters far from the origin (around 1000 in every dimension), where
// float32 keeps about 4 decimal places of a coordinate and float64 all of
// them: a float32 run could not give the reference's double centers.
const Matrix<double>& Points64() {
  static const Matrix<double>* points = [] {
    auto* p = new Matrix<double>(
        GaussianClusters<double>({.n = 3000, .d = 5, .k = kK, .scale = 0.2}, 8).points);
    p->array() = p->array() * 3.0 + 1000.0 + 1.0 / 3;
    return p;
  }();
  return *points;
}

// The first k points, d x k: the given initial centers.
Matrix<double> InitialCenters() { return Points64().leftCols(kK); }

std::string Bytes64(const double* values, size_t count) {
  std::string bytes;
  EncodeFloat64(absl::MakeConstSpan(values, count), &bytes);
  return bytes;
}

std::vector<double> Doubles(const std::string& bytes) {
  std::vector<double> values(bytes.size() / 8);
  DecodeFloat64(bytes, values.data());
  return values;
}

// A float64 request of the points from the given centers, raw response.
v1::ClusterRequest Request64(const std::string& id, int iterations) {
  const Matrix<double>& points = Points64();
  v1::ClusterRequest r;
  r.set_request_id(id);
  r.set_model("lloyd-onehot");
  r.set_n(points.cols());
  r.set_d(static_cast<int>(points.rows()));
  r.set_k(kK);
  r.set_iterations(iterations);
  r.set_points_f64(Bytes64(points.data(), points.size()));
  r.set_init(v1::INIT_GIVEN);
  const Matrix<double> centers = InitialCenters();
  r.set_centers_f64(Bytes64(centers.data(), centers.size()));
  r.set_raw_response(true);
  return r;
}

std::vector<int> Labels32(const std::string& bytes) {
  std::vector<int> labels(bytes.size() / 4);
  std::memcpy(labels.data(), bytes.data(), bytes.size());
  return labels;
}

TEST_F(RawServiceTest, EachLayerIsTheReferenceLloydsInDouble) {
  constexpr int kLayers = 6;
  const std::vector<LloydIteration<double>> reference =
      ReferenceLloyd<double>(Points64(), InitialCenters(), kLayers);
  std::vector<v1::ClusterRequest> requests;
  for (int t = 1; t <= kLayers; ++t) requests.push_back(Request64(absl::StrCat("t", t), t));
  auto stub = Stub();
  const auto [responses, status] = Exchange(stub.get(), requests);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), static_cast<size_t>(kLayers));
  bool beyond_float32 = false;
  for (int t = 1; t <= kLayers; ++t) {
    SCOPED_TRACE(absl::StrCat("layer ", t));
    const v1::ClusterResponse& r = responses[t - 1];
    ASSERT_FALSE(r.has_error()) << r.error().message();
    EXPECT_EQ(r.iterations_run(), t);
    EXPECT_TRUE(r.centers_f32().empty());
    EXPECT_EQ(r.centers_size(), 0);
    const Matrix<double>& want = reference[t - 1].centers;
    const std::vector<double> centers = Doubles(r.centers_f64());
    ASSERT_EQ(centers.size(), static_cast<size_t>(want.size()));
    const Matrix<double> got = Eigen::Map<const Matrix<double>>(centers.data(), want.rows(), kK);
    // Means of the same points summed in another order: a few ulps of 1e3.
    EXPECT_LE((got - want).cwiseAbs().maxCoeff(), 1e-10);
    EXPECT_EQ(Labels32(r.labels_i32()), ReferenceLabels<double>(Points64(), want));
    const double objective = ReferenceObjective<double>(Points64(), want);
    EXPECT_NEAR(r.objective(), objective, 1e-10 * objective);
    for (double c : centers) beyond_float32 |= static_cast<double>(static_cast<float>(c)) != c;
  }
  EXPECT_TRUE(beyond_float32) << "every center is a float32 value: not a double run";
}

TEST_F(RawServiceTest, OffsetWeightsAndDistancesAreInDouble) {
  const Matrix<double>& points = Points64();
  const int d = static_cast<int>(points.rows());
  // The offset subtracted on the server is the client's own subtraction.
  const Vector<double> offset = points.rowwise().mean();
  Matrix<double> shifted = points;
  shifted.colwise() -= offset;
  v1::ClusterRequest sent_shifted = Request64("shifted", 4);
  sent_shifted.set_points_f64(Bytes64(shifted.data(), shifted.size()));
  Matrix<double> centers = InitialCenters();
  centers.colwise() -= offset;
  sent_shifted.set_centers_f64(Bytes64(centers.data(), centers.size()));
  sent_shifted.set_return_distances(v1::DISTANCES_ALL);
  v1::ClusterRequest with_offset = sent_shifted;
  with_offset.set_request_id("offset");
  with_offset.set_points_f64(Bytes64(points.data(), points.size()));
  with_offset.set_points_offset_f64(Bytes64(offset.data(), d));
  // Every weight 2: every sum doubled, exactly, so the same centers.
  v1::ClusterRequest weighted = sent_shifted;
  weighted.set_request_id("weighted");
  const std::vector<double> twos(points.cols(), 2.0);
  weighted.set_weights_f64(Bytes64(twos.data(), twos.size()));
  auto stub = Stub();
  const auto [responses, status] = Exchange(stub.get(), {sent_shifted, with_offset, weighted});
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 3u);
  for (const v1::ClusterResponse& r : responses) {
    SCOPED_TRACE(r.request_id());
    ASSERT_FALSE(r.has_error()) << r.error().message();
    EXPECT_EQ(r.centers_f64(), responses[0].centers_f64());
    EXPECT_EQ(r.labels_i32(), responses[0].labels_i32());
    EXPECT_EQ(r.distances_f64(), responses[0].distances_f64());
    EXPECT_TRUE(r.distances_f32().empty());
  }
  EXPECT_TRUE(responses[1].points_offset_applied());
  EXPECT_EQ(responses[2].objective(), 2 * responses[0].objective());
  // The distances are the squared distances in double to the centers sent.
  const std::vector<double> c = Doubles(responses[0].centers_f64());
  const Matrix<double> final_centers = Eigen::Map<const Matrix<double>>(c.data(), d, kK);
  const std::vector<double> distances = Doubles(responses[0].distances_f64());
  ASSERT_EQ(distances.size(), static_cast<size_t>(points.cols() * kK));
  double worst = 0;
  for (Eigen::Index i = 0; i < shifted.cols(); ++i) {
    for (int j = 0; j < kK; ++j) {
      const double want = (shifted.col(i) - final_centers.col(j)).squaredNorm();
      worst = std::max(worst, std::abs(distances[i * kK + j] - want) / std::max(1.0, want));
    }
  }
  EXPECT_LE(worst, 1e-12);
}

TEST_F(RawServiceTest, WithoutRawResponseTheCentersComeRoundedToFloat32) {
  v1::ClusterRequest raw = Request64("raw", 3);
  v1::ClusterRequest repeated = raw;
  repeated.set_request_id("repeated");
  repeated.set_raw_response(false);
  auto stub = Stub();
  const auto [responses, status] = Exchange(stub.get(), {raw, repeated});
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 2u);
  ASSERT_FALSE(responses[1].has_error()) << responses[1].error().message();
  const std::vector<double> centers = Doubles(responses[0].centers_f64());
  ASSERT_EQ(responses[1].centers_size(), static_cast<int>(centers.size()));
  for (size_t i = 0; i < centers.size(); ++i) {
    EXPECT_EQ(responses[1].centers(static_cast<int>(i)), static_cast<float>(centers[i]));
  }
  EXPECT_TRUE(responses[1].centers_f64().empty());
  EXPECT_EQ(responses[1].objective(), responses[0].objective());
  EXPECT_EQ(std::vector<int>(responses[1].labels().begin(), responses[1].labels().end()),
            Labels32(responses[0].labels_i32()));
}

TEST_F(RawServiceTest, MixedPayloadsAndBadByteCountsAreRefusedAndTheStreamGoesOn) {
  const Matrix<float> as_float = Points64().cast<float>();
  std::string points32;
  EncodeFloat32(absl::MakeConstSpan(as_float.data(), as_float.size()), &points32);
  v1::ClusterRequest centers32 = Request64("centers32", 2);
  centers32.clear_centers_f64();
  centers32.set_centers_f32(points32.substr(0, 4 * 5 * kK));
  v1::ClusterRequest weights64 = Request64("weights64", 2);
  weights64.clear_points_f64();
  weights64.set_points_f32(points32);
  weights64.clear_centers_f64();
  weights64.clear_init();
  weights64.set_weights_f64(std::string(8 * 3000, '\0'));
  v1::ClusterRequest offset32 = Request64("offset32", 2);
  for (int l = 0; l < 5; ++l) offset32.add_points_offset(1);
  v1::ClusterRequest short_points = Request64("short", 2);
  short_points.mutable_points_f64()->resize(short_points.points_f64().size() - 8);
  v1::ClusterRequest short_offset = Request64("short-offset", 2);
  short_offset.set_points_offset_f64(std::string(8 * 4, '\0'));
  auto stub = Stub();
  const auto [responses, status] =
      Exchange(stub.get(),
               {centers32, weights64, offset32, short_points, short_offset, Request64("after", 2)});
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 6u);
  const std::string kMix =
      " are both set: a request's payloads are all float32 (points, centers, weights, "
      "points_offset, their _f32 bytes, or points and centers as _f16 or _bf16 bytes) or all "
      "float64 (their _f64 bytes)";
  const std::string messages[] = {"centers_f32 and points_f64" + kMix,
                                  "points_f32 and weights_f64" + kMix,
                                  "points_offset and points_f64" + kMix,
                                  "points_f64 has 119992 bytes, expected n*d*8 = 3000*5*8",
                                  "points_offset_f64 has 32 bytes, expected d*8 = 5*8"};
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(responses[i].request_id());
    EXPECT_EQ(responses[i].error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_EQ(responses[i].error().message(), messages[i]);
  }
  EXPECT_FALSE(responses[5].has_error()) << responses[5].error().message();
  EXPECT_EQ(responses[5].centers_f64().size(), 8u * 5 * kK);
}

// ---- Narrow payloads: binary16 and bfloat16, clustered as float32. ----

// Points() cut to bfloat16 (their upper 16 bits), as bfloat16 bits and as
// binary16 bits of the same values: a value of 8 significant bits and a
// magnitude of 2^-14 to 2^15 is a binary16 value (smaller ones, a rare few
// near the origin, become 0 in both).
struct NarrowPoints {
  std::vector<uint16_t> f16, bf16;
  Matrix<float> widened;
};

const NarrowPoints& Narrow() {
  static const NarrowPoints* narrow = [] {
    auto* out = new NarrowPoints{{}, {}, Points()};
    for (Eigen::Index i = 0; i < out->widened.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &out->widened.data()[i], 4);
      bits &= 0xffff0000u;
      const int exponent = static_cast<int>((bits >> 23) & 0xff) - 127;
      if (exponent < -14) bits &= 0x80000000u;
      const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
      out->bf16.push_back(static_cast<uint16_t>(bits >> 16));
      out->f16.push_back(exponent < -14 ? sign
                                        : static_cast<uint16_t>(sign | (exponent + 15) << 10 |
                                                                ((bits >> 13) & 0x3ff)));
      out->widened.data()[i] = WidenBFloat16(out->bf16.back());
    }
    return out;
  }();
  return *narrow;
}

std::string Bytes16(const uint16_t* bits, size_t count) {
  std::string bytes;
  for (size_t i = 0; i < count; ++i) {
    bytes.append({static_cast<char>(bits[i] & 0xff), static_cast<char>(bits[i] >> 8)});
  }
  return bytes;
}

// Raw(id) with given centers (the first kK points), points and centers in
// float32 bytes of the narrow values.
v1::ClusterRequest Widened(const std::string& id) {
  const Matrix<float>& points = Narrow().widened;
  v1::ClusterRequest r = Raw(id);
  r.clear_points_f32();
  EncodeFloat32(absl::MakeConstSpan(points.data(), points.size()), r.mutable_points_f32());
  r.set_init(v1::INIT_GIVEN);
  EncodeFloat32(absl::MakeConstSpan(points.data(), kK * points.rows()), r.mutable_centers_f32());
  return r;
}

TEST_F(RawServiceTest, NarrowRequestsAreAnsweredAsTheFloat32RequestOfTheirValues) {
  const NarrowPoints& narrow = Narrow();
  ASSERT_EQ(narrow.f16.size(), 3000u * 5);
  const size_t centers = kK * 5;
  v1::ClusterRequest f16 = Widened("f16");
  f16.clear_points_f32();
  f16.set_points_f16(Bytes16(narrow.f16.data(), narrow.f16.size()));
  f16.clear_centers_f32();
  f16.set_centers_f16(Bytes16(narrow.f16.data(), centers));
  v1::ClusterRequest bf16 = Widened("bf16");
  bf16.clear_points_f32();
  bf16.set_points_bf16(Bytes16(narrow.bf16.data(), narrow.bf16.size()));
  // Narrow points beside float32 centers.
  v1::ClusterRequest odd = f16;
  odd.set_request_id("odd");
  odd.mutable_points_f16()->pop_back();
  v1::ClusterRequest both = f16;
  both.set_request_id("both");
  both.set_points_bf16(bf16.points_bf16());
  v1::ClusterRequest with_f64 = bf16;
  with_f64.set_request_id("with-f64");
  with_f64.clear_centers_f32();
  with_f64.set_centers_f64(std::string(8 * centers, '\0'));
  auto stub = Stub();
  const auto [responses, status] =
      Exchange(stub.get(), {Widened("f32"), f16, bf16, odd, both, with_f64, Widened("after")});
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 7u);
  const v1::ClusterResponse& want = responses[0];
  ASSERT_FALSE(want.has_error()) << want.error().message();
  for (int i : {1, 2, 6}) {
    SCOPED_TRACE(responses[i].request_id());
    v1::ClusterResponse got = responses[i];
    ASSERT_FALSE(got.has_error()) << got.error().message();
    EXPECT_TRUE(got.labels_i32() == want.labels_i32());
    EXPECT_TRUE(got.centers_f32() == want.centers_f32());
    EXPECT_EQ(got.objective(), want.objective());
    EXPECT_EQ(got.iterations_run(), want.iterations_run());
  }
  const std::string messages[] = {
      "points_f16 has 29999 bytes, expected n*d*2 = 3000*5*2",
      "points_f16 and points_bf16 are both set; send one of them",
      "points_bf16 and centers_f64 are both set: a request's payloads are all float32 (points, "
      "centers, weights, points_offset, their _f32 bytes, or points and centers as _f16 or _bf16 "
      "bytes) or all float64 (their _f64 bytes)"};
  for (int i = 3; i < 6; ++i) {
    SCOPED_TRACE(responses[i].request_id());
    EXPECT_EQ(responses[i].error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_EQ(responses[i].error().message(), messages[i - 3]);
  }
}

TEST_F(RawServiceTest, AShardLoadedInNarrowChunksAnswersAsItsFloat32Values) {
  const NarrowPoints& narrow = Narrow();
  const Matrix<float>& widened = narrow.widened;
  const int d = static_cast<int>(widened.rows());
  const int64_t n = widened.cols(), half = n / 2;
  auto stub = Stub();
  std::vector<v1::JobResponse> answers;
  for (int load = 0; load < 2; ++load) {
    SCOPED_TRACE(load == 0 ? "float32" : "binary16, then bfloat16");
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub->Job(&context);
    std::vector<v1::JobRequest> chunks(2);
    for (int c = 0; c < 2; ++c) {
      v1::ShardChunk* chunk = chunks[c].mutable_shard();
      chunk->set_n(n);
      chunk->set_d(d);
      const size_t first = c * half * d, count = (c == 0 ? half : n - half) * d;
      if (load == 0) {
        EncodeFloat32(absl::MakeConstSpan(widened.data() + first, count),
                      chunk->mutable_points_f32());
      } else if (c == 0) {
        chunk->set_points_f16(Bytes16(narrow.f16.data() + first, count));
      } else {
        chunk->set_points_bf16(Bytes16(narrow.bf16.data() + first, count));
      }
    }
    v1::JobResponse r;
    if (load == 1) {
      // A chunk of half a value ends its stream, as a bad float32 one does.
      grpc::ClientContext odd_context;
      auto odd_stream = stub->Job(&odd_context);
      v1::JobRequest odd = chunks[0];
      odd.mutable_shard()->mutable_points_f16()->pop_back();
      ASSERT_TRUE(odd_stream->Write(odd));
      EXPECT_FALSE(odd_stream->Read(&r));
      const grpc::Status ended = odd_stream->Finish();
      EXPECT_EQ(ended.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_EQ(ended.error_message(),
                "points_f16 has 14999 bytes, not a whole number of binary16 values");
    }
    for (const v1::JobRequest& chunk : chunks) {
      ASSERT_TRUE(stream->Write(chunk));
      ASSERT_TRUE(stream->Read(&r));
      ASSERT_FALSE(r.has_error()) << r.error().message();
    }
    EXPECT_EQ(r.points_loaded(), n);
    v1::JobRequest assign;
    assign.mutable_assign()->set_k(kK);
    assign.mutable_assign()->set_return_labels(true);
    EncodeFloat32(absl::MakeConstSpan(widened.data(), kK * d),
                  assign.mutable_assign()->mutable_centers_f32());
    ASSERT_TRUE(stream->Write(assign));
    ASSERT_TRUE(stream->Read(&r));
    ASSERT_FALSE(r.has_error()) << r.error().message();
    r.clear_compute_seconds();
    answers.push_back(r);
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  EXPECT_TRUE(answers[0].SerializeAsString() == answers[1].SerializeAsString());
}

}  // namespace
}  // namespace kmt
