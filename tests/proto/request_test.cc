// The translation between a ClusterRequest and the engine.
#include "proto/request.h"

#include <gtest/gtest.h>

#include <limits>

#include "absl/strings/match.h"
#include "core/engine.h"
#include "proto/raw_payload.h"

namespace kmt {
namespace {

v1::ClusterRequest Request() {
  v1::ClusterRequest r;
  r.set_n(4);
  r.set_d(2);
  r.set_k(2);
  r.set_iterations(3);
  r.set_seed(5);
  for (float v : {0.f, 0.f, 0.f, 1.f, 10.f, 10.f, 10.f, 11.f}) r.add_points(v);
  return r;
}

TEST(Request, FieldsBecomeTheBatch) {
  v1::ClusterRequest r = Request();
  r.set_init(v1::INIT_RANDOM);
  (*r.mutable_parameters())["beta"] = 3;
  r.set_return_cluster_sums(true);
  r.set_guard(true);
  const absl::StatusOr<Batch<float>> batch = BatchFromRequest(r);
  ASSERT_TRUE(batch.ok()) << batch.status();
  const BatchSpec<float>& spec = batch->spec();
  EXPECT_EQ(batch->d(), 2);
  EXPECT_EQ(batch->n(), 4);
  EXPECT_EQ(spec.k, 2);
  EXPECT_EQ(spec.layers, 3);
  EXPECT_EQ(spec.seed, 5u);
  EXPECT_EQ(spec.parameters, (ParameterValues{{"beta", 3}}));
  EXPECT_EQ(spec.init, InitMethod::kRandomSubset);
  EXPECT_TRUE(spec.cluster_sums);
  EXPECT_TRUE(spec.guard);
  EXPECT_EQ(spec.given_centers.size(), 0);
  // Point 1 is (0, 1): row-major on the wire, a column here.
  EXPECT_EQ(spec.points(0, 1), 0);
  EXPECT_EQ(spec.points(1, 1), 1);

  r.set_init(v1::INIT_GIVEN);
  for (float v : {0.f, 0.f, 10.f, 10.f}) r.add_centers(v);
  const absl::StatusOr<Batch<float>> with_centers = BatchFromRequest(r);
  ASSERT_TRUE(with_centers.ok()) << with_centers.status();
  const BatchSpec<float>& given = with_centers->spec();
  EXPECT_EQ(given.given_centers.cols(), 2);
  EXPECT_EQ(given.given_centers(0, 1), 10);
}

// The offset is subtracted from every point in float32, one rounding each,
// and leaves the given centers as they are; a wrong count or a value that is
// not finite is refused, naming the field.
TEST(Request, PointsOffsetShiftsThePointsOnly) {
  v1::ClusterRequest r = Request();
  r.set_init(v1::INIT_GIVEN);
  for (float v : {0.f, 0.f, 10.f, 10.f}) r.add_centers(v);
  const float offset[2] = {0.1f, -3.3f};
  r.add_points_offset(offset[0]);
  r.add_points_offset(offset[1]);
  const absl::StatusOr<Batch<float>> batch = BatchFromRequest(r);
  ASSERT_TRUE(batch.ok()) << batch.status();
  const BatchSpec<float>& spec = batch->spec();
  for (int i = 0; i < 4; ++i) {
    for (int l = 0; l < 2; ++l) {
      const float wire = r.points(2 * i + l);
      EXPECT_EQ(spec.points(l, i), wire - offset[l]) << i << "," << l;
    }
  }
  EXPECT_EQ(spec.given_centers(0, 1), 10);
  RunResult<float> run;
  run.centers = spec.given_centers;
  v1::ClusterResponse response;
  FillResponse(r, run, &response);
  EXPECT_TRUE(response.points_offset_applied());
  FillResponse(Request(), run, &response);
  EXPECT_FALSE(response.points_offset_applied());

  r.add_points_offset(1);
  EXPECT_EQ(BatchFromRequest(r).status().message(), "points_offset has 3 values; expected d = 2");
  r.clear_points_offset();
  r.add_points_offset(0);
  r.add_points_offset(std::numeric_limits<float>::infinity());
  EXPECT_EQ(BatchFromRequest(r).status().message(), "points_offset[1] is inf; it must be finite");
}

// Raw float64 bytes of `values`.
std::string Bytes64(const std::vector<double>& values) {
  std::string bytes;
  EncodeFloat64(values, &bytes);
  return bytes;
}

// Request()'s shape with float64 payloads: points that float32 cannot hold,
// given centers, weights and an offset.
v1::ClusterRequest Request64() {
  v1::ClusterRequest r = Request();
  r.clear_points();
  r.set_points_f64(Bytes64({0.1, 1e-10, 0.2, 1 + 1e-12, 10.3, 10, 10, 11.7}));
  r.set_init(v1::INIT_GIVEN);
  r.set_centers_f64(Bytes64({0, 0.1, 10.5, 10}));
  r.set_weights_f64(Bytes64({1, 0.25, 2, 1.0 / 3}));
  r.set_points_offset_f64(Bytes64({0.1, -1.0 / 3}));
  return r;
}

TEST(Request, Float64PayloadsBecomeADoubleBatch) {
  const v1::ClusterRequest r = Request64();
  EXPECT_EQ(RequestPayloadType(r).value(), PayloadType::kFloat64);
  EXPECT_EQ(RequestPayloadType(Request()).value(), PayloadType::kFloat32);
  const absl::StatusOr<Batch<double>> batch = BatchFromRequest<double>(r);
  ASSERT_TRUE(batch.ok()) << batch.status();
  const BatchSpec<double>& spec = batch->spec();
  const double points[8] = {0.1, 1e-10, 0.2, 1 + 1e-12, 10.3, 10, 10, 11.7};
  const double offset[2] = {0.1, -1.0 / 3};
  for (int i = 0; i < 4; ++i) {
    for (int l = 0; l < 2; ++l) {
      // Subtracted in double, as a float64 client computes it.
      EXPECT_EQ(spec.points(l, i), points[2 * i + l] - offset[l]) << i << "," << l;
    }
  }
  EXPECT_EQ(spec.given_centers(1, 0), 0.1);
  EXPECT_EQ(spec.weights[3], 1.0 / 3);
  // Each precision reads its own requests only.
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "the request's payloads are float64; this reads float32 ones");
  EXPECT_EQ(BatchFromRequest<double>(Request()).status().message(),
            "the request's payloads are float32; this reads float64 ones");
}

TEST(Request, MixedPayloadsAreRefusedNamingOneOfEach) {
  const std::string rule =
      " are both set: a request's payloads are all float32 (points, centers, weights, "
      "points_offset, their _f32 bytes, or points and centers as _f16 or _bf16 bytes) or all "
      "float64 (their _f64 bytes)";
  v1::ClusterRequest r = Request64();
  r.add_weights(1);
  EXPECT_EQ(RequestPayloadType(r).status().message(), "weights and points_f64" + rule);
  r = Request64();
  r.clear_points_f64();
  r.set_points_f32(std::string(4 * 8, '\0'));
  EXPECT_EQ(RequestPayloadType(r).status().message(), "points_f32 and centers_f64" + rule);
  EXPECT_EQ(BatchFromRequest<double>(r).status().code(), absl::StatusCode::kInvalidArgument);
  r = Request();
  r.set_points_offset_f64(Bytes64({0, 0}));
  EXPECT_EQ(BatchFromRequest(r).status().message(), "points and points_offset_f64" + rule);
  r = Request64();
  r.set_points_offset_f64(Bytes64({0, std::numeric_limits<double>::infinity()}));
  EXPECT_EQ(BatchFromRequest<double>(r).status().message(),
            "points_offset_f64[1] is inf; it must be finite");
}

TEST(Request, ADoubleRunAnswersInFloat64BytesOrRoundedFloats) {
  v1::ClusterRequest r = Request64();
  r.set_raw_response(true);
  RunResult<double> run;
  run.centers = Matrix<double>(2, 2);
  run.centers << 0.1, 10.5, 1.0 / 3, 10;
  run.labels = {0, 0, 1, 1};
  run.distances = Matrix<double>(1, 4);
  run.distances << 0.01, 1e-20, 2.0 / 3, 5;
  run.objective = 1.0 / 7;
  v1::ClusterResponse raw;
  FillResponse(r, run, &raw);
  EXPECT_EQ(raw.centers_f64(), Bytes64({0.1, 1.0 / 3, 10.5, 10}));
  EXPECT_EQ(raw.distances_f64(), Bytes64({0.01, 1e-20, 2.0 / 3, 5}));
  EXPECT_TRUE(raw.centers_f32().empty());
  EXPECT_TRUE(raw.distances_f32().empty());
  EXPECT_EQ(raw.labels_i32().size(), 16u);
  EXPECT_EQ(raw.objective(), 1.0 / 7);
  EXPECT_TRUE(raw.points_offset_applied());
  r.set_raw_response(false);
  v1::ClusterResponse repeated;
  FillResponse(r, run, &repeated);
  EXPECT_TRUE(repeated.centers_f64().empty());
  EXPECT_EQ(std::vector<float>(repeated.centers().begin(), repeated.centers().end()),
            (std::vector<float>{0.1f, 1.0f / 3, 10.5f, 10}));
  EXPECT_EQ(repeated.distances(2), 2.0f / 3);
}

// Raw float32 bytes of `values` (raw_payload_test checks them byte by byte).
std::string Bytes(const std::vector<float>& values) {
  std::string bytes;
  EncodeFloat32(values, &bytes);
  return bytes;
}

// The request's points and centers moved to their raw fields.
v1::ClusterRequest Raw(v1::ClusterRequest r) {
  r.set_points_f32(Bytes({r.points().begin(), r.points().end()}));
  r.clear_points();
  if (r.centers_size() > 0) {
    r.set_centers_f32(Bytes({r.centers().begin(), r.centers().end()}));
    r.clear_centers();
  }
  return r;
}

TEST(Request, RawBytesGiveTheBatchOfTheRepeatedFields) {
  v1::ClusterRequest r = Request();
  r.set_init(v1::INIT_GIVEN);
  // Values whose bytes differ from each other and in every position.
  r.set_points(3, -1.5e-7f);
  r.set_points(6, 3.25e5f);
  for (float v : {0.f, 0.1f, 10.f, 10.5f}) r.add_centers(v);
  const absl::StatusOr<Batch<float>> repeated = BatchFromRequest(r);
  const absl::StatusOr<Batch<float>> raw = BatchFromRequest(Raw(r));
  ASSERT_TRUE(repeated.ok()) << repeated.status();
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->spec().points, repeated->spec().points);
  EXPECT_EQ(raw->spec().given_centers, repeated->spec().given_centers);
  EXPECT_EQ(raw->spec().points(1, 1), -1.5e-7f);
}

TEST(Request, BadRawPayloadsAreNamed) {
  v1::ClusterRequest r = Raw(Request());
  r.mutable_points_f32()->pop_back();
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "points_f32 has 31 bytes, expected n*d*4 = 4*2*4");
  r = Raw(Request());
  r.mutable_points_f32()->append(8, '\0');
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "points_f32 has 40 bytes, expected n*d*4 = 4*2*4");
  r = Raw(Request());
  r.add_points(1);
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "points and points_f32 are both set; send one of them");
  r = Raw(Request());
  r.set_n(-4);
  EXPECT_EQ(BatchFromRequest(r).status().code(), absl::StatusCode::kInvalidArgument);
  r = Raw(Request());
  r.set_points_f32(Bytes({0, 0, 0, 1, 10, 10, 10, NAN}));
  EXPECT_EQ(BatchFromRequest(r).status().message(), "point 3 has NaN in dimension 1");

  r = Request();
  r.set_init(v1::INIT_GIVEN);
  r.set_centers_f32(Bytes({0, 0, 10}));
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "centers_f32 has 12 bytes, expected k*d*4 = 2*2*4");
  r.add_centers(1);
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "centers and centers_f32 are both set; send one of them");
}

// Little-endian bytes of 16-bit values (binary16 or bfloat16) by their bits.
std::string Bytes16(const std::vector<uint16_t>& bits) {
  std::string bytes;
  for (uint16_t b : bits) bytes.append({static_cast<char>(b & 0xff), static_cast<char>(b >> 8)});
  return bytes;
}

// Request()'s points (0, 0, 0, 1, 10, 10, 10, 11) as binary16 and bfloat16.
const std::vector<uint16_t> kPointsF16 = {0, 0, 0, 0x3c00, 0x4900, 0x4900, 0x4900, 0x4980};
const std::vector<uint16_t> kPointsBF16 = {0, 0, 0, 0x3f80, 0x4120, 0x4120, 0x4120, 0x4130};

TEST(Request, NarrowPayloadsGiveTheFloat32BatchOfTheSameValues) {
  v1::ClusterRequest wide = Request();
  wide.set_init(v1::INIT_GIVEN);
  for (float v : {0.f, 0.f, 10.f, 10.f}) wide.add_centers(v);
  const absl::StatusOr<Batch<float>> want = BatchFromRequest(wide);
  ASSERT_TRUE(want.ok()) << want.status();
  v1::ClusterRequest f16 = wide;
  f16.clear_points();
  f16.set_points_f16(Bytes16(kPointsF16));
  f16.clear_centers();
  f16.set_centers_f16(Bytes16({0, 0, 0x4900, 0x4900}));
  v1::ClusterRequest bf16 = wide;
  bf16.clear_points();
  bf16.set_points_bf16(Bytes16(kPointsBF16));
  bf16.clear_centers();
  bf16.set_centers_bf16(Bytes16({0, 0, 0x4120, 0x4120}));
  for (const v1::ClusterRequest& r : {f16, bf16}) {
    EXPECT_EQ(RequestPayloadType(r).value(), PayloadType::kFloat32);
    const absl::StatusOr<Batch<float>> got = BatchFromRequest(r);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->spec().points, want->spec().points);
    EXPECT_EQ(got->spec().given_centers, want->spec().given_centers);
  }
}

// A NaN or an infinity widens to float32's and is refused as one there is.
TEST(Request, NarrowNaNsAndInfinitiesAreRefusedAsFloat32Ones) {
  v1::ClusterRequest r = Request();
  r.clear_points();
  std::vector<uint16_t> points = kPointsF16;
  points[7] = 0x7e00;
  r.set_points_f16(Bytes16(points));
  EXPECT_EQ(BatchFromRequest(r).status().message(), "point 3 has NaN in dimension 1");
  points[7] = 0xfc00;
  r.set_points_f16(Bytes16(points));
  EXPECT_EQ(BatchFromRequest(r).status().message(), "point 3 has Inf in dimension 1");
  r.clear_points_f16();
  points = kPointsBF16;
  points[2] = 0x7f80;
  r.set_points_bf16(Bytes16(points));
  EXPECT_EQ(BatchFromRequest(r).status().message(), "point 1 has Inf in dimension 0");
  r.set_init(v1::INIT_GIVEN);
  r.set_points_bf16(Bytes16(kPointsBF16));
  r.set_centers_bf16(Bytes16({0, 0, 0x7fc1, 0}));
  EXPECT_EQ(BatchFromRequest(r).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(BatchFromRequest(r).status().message().find("NaN"), std::string::npos)
      << BatchFromRequest(r).status();
}

TEST(Request, NarrowPayloadsBesideAnotherOfTheirMatrixOrFloat64AreRefusedByName) {
  v1::ClusterRequest r = Request();
  r.set_points_f16(Bytes16(kPointsF16));
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "points and points_f16 are both set; send one of them");
  r.clear_points();
  r.set_points_f32(Bytes({0, 0, 0, 1, 10, 10, 10, 11}));
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "points_f32 and points_f16 are both set; send one of them");
  r.clear_points_f32();
  r.set_points_bf16(Bytes16(kPointsBF16));
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "points_f16 and points_bf16 are both set; send one of them");
  r.clear_points_f16();
  r.set_init(v1::INIT_GIVEN);
  r.set_centers_f64(Bytes64({0, 0, 10, 10}));
  EXPECT_EQ(RequestPayloadType(r).status().message(),
            "points_bf16 and centers_f64 are both set: a request's payloads are all float32 "
            "(points, centers, weights, points_offset, their _f32 bytes, or points and centers as "
            "_f16 or _bf16 bytes) or all float64 (their _f64 bytes)");
  r.clear_centers_f64();
  r.set_centers_f16(Bytes16({0, 0, 0x4900}));
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "centers_f16 has 6 bytes, expected k*d*2 = 2*2*2");
  r.set_centers_f16(Bytes16({0, 0, 0x4900, 0x4900}));
  r.mutable_points_bf16()->pop_back();
  EXPECT_EQ(BatchFromRequest(r).status().message(),
            "points_bf16 has 15 bytes, expected n*d*2 = 4*2*2");
}

TEST(Request, EachInitValueNamesItsMethod) {
  const std::pair<v1::Init, InitMethod> cases[] = {
      {v1::INIT_KMEANS_PLUS_PLUS, InitMethod::kKMeansPlusPlus},
      {v1::INIT_RANDOM, InitMethod::kRandomSubset},
      {v1::INIT_PLAIN_KMEANS_PLUS_PLUS, InitMethod::kPlainKMeansPlusPlus}};
  for (const auto& [init, method] : cases) {
    SCOPED_TRACE(InitMethodName(method));
    v1::ClusterRequest r = Request();
    r.set_init(init);
    const absl::StatusOr<Batch<float>> batch = BatchFromRequest(r);
    ASSERT_TRUE(batch.ok()) << batch.status();
    EXPECT_EQ(batch->spec().init, method);
  }
}

TEST(Request, AnInitLeftUnsetIsLeftToTheModel) {
  // Explicitly greedy k-means++ (the enum's zero) is told apart from unset.
  v1::ClusterRequest r = Request();
  absl::StatusOr<Batch<float>> batch = BatchFromRequest(r);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->spec().init, std::nullopt);
  r.set_init(v1::INIT_KMEANS_PLUS_PLUS);
  batch = BatchFromRequest(r);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->spec().init, InitMethod::kKMeansPlusPlus);
}

TEST(Request, BadRequestsSayWhatIsWrong) {
  v1::ClusterRequest r = Request();
  r.set_n(5);
  EXPECT_EQ(BatchFromRequest(r).status().message(), "points has 8 values, expected n*d = 5*2");
  r = Request();
  r.set_points(6, NAN);
  EXPECT_EQ(BatchFromRequest(r).status().message(), "point 3 has NaN in dimension 0");
  r = Request();
  r.set_k(5);
  EXPECT_EQ(BatchFromRequest(r).status().message(), "n = 4 points is fewer than k = 5 clusters");
  r = Request();
  r.set_init(v1::INIT_GIVEN);
  r.add_centers(1);
  EXPECT_EQ(BatchFromRequest(r).status().message(), "centers has 1 values, expected k*d = 2*2");
  r = Request();
  r.set_init(static_cast<v1::Init>(7));
  EXPECT_EQ(BatchFromRequest(r).status().message(), "unknown init 7");
}

// Every point's distance to every center is n * k values in one response:
// past kMaxAllDistancesBytes the request is refused before anything is read
// (no payload here at all), where the server would otherwise allocate them.
TEST(Request, AllDistancesPastWhatAResponseCarriesAreRefused) {
  v1::ClusterRequest r;
  r.set_n(1000000);
  r.set_d(32);
  r.set_k(65536);
  r.set_return_distances(v1::DISTANCES_ALL);
  const absl::Status refused = BatchFromRequest(r).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "return_distances = DISTANCES_ALL asks for n * k = 1000000 * 65536 distances "
            "(262144000000 bytes), more than a response carries (1073741824 bytes): ask "
            "DISTANCES_NEAREST, or send fewer points a batch");
  // In double, half as many fit: 2^20 * 129 values pass the check as
  // float, not as double.
  r.set_n(int64_t{1} << 20);
  r.set_k(129);
  EXPECT_FALSE(absl::StartsWith(BatchFromRequest<float>(r).status().message(),
                                "return_distances = DISTANCES_ALL"));
  EXPECT_TRUE(absl::StartsWith(BatchFromRequest<double>(r).status().message(),
                               "return_distances = DISTANCES_ALL"));
}

TEST(Request, TheResponseCarriesWhatWasAskedFor) {
  v1::ClusterRequest r = Request();
  r.set_init(v1::INIT_GIVEN);
  for (float v : {0.f, 0.f, 10.f, 10.f}) r.add_centers(v);
  r.set_return_cluster_sums(true);
  r.set_return_trajectory(true);
  const RunResult<float> run = *Cluster(ExactModels<float>()[0], *BatchFromRequest(r));
  v1::ClusterResponse response;
  FillResponse(r, run, &response);
  EXPECT_EQ(std::vector<int>(response.labels().begin(), response.labels().end()),
            (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(std::vector<float>(response.centers().begin(), response.centers().end()),
            (std::vector<float>{0, 0.5, 10, 10.5}));
  EXPECT_EQ(response.objective(), 1.0);
  EXPECT_EQ(response.layer_objectives_size(), 3);
  EXPECT_EQ(response.iterations_run(), 3);
  EXPECT_EQ(std::vector<int64_t>(response.center_counts().begin(), response.center_counts().end()),
            (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::vector<double>(response.center_sums().begin(), response.center_sums().end()),
            (std::vector<double>{0, 1, 20, 21}));

  r.set_omit_labels(true);
  r.set_return_cluster_sums(false);
  r.set_return_trajectory(false);
  const RunResult<float> plain = *Cluster(ExactModels<float>()[0], *BatchFromRequest(r));
  v1::ClusterResponse lean;
  FillResponse(r, plain, &lean);
  EXPECT_EQ(lean.labels_size(), 0);
  EXPECT_EQ(lean.layer_objectives_size(), 0);
  EXPECT_EQ(lean.center_counts_size(), 0);
  EXPECT_EQ(lean.centers_size(), 4);
}

TEST(Request, TheResponseSaysWhichStepsAGuardedRunKept) {
  RunResult<float> run;
  run.centers = Matrix<float>::Zero(2, 2);
  run.guard_learned_layers = 3;
  run.guard_lloyd_layers = 2;
  v1::ClusterResponse response;
  FillResponse(Request(), run, &response);
  EXPECT_EQ(response.guard_learned_layers(), 3);
  EXPECT_EQ(response.guard_lloyd_layers(), 2);
}

TEST(Request, ARawResponseCarriesTheValuesAsBytesOnly) {
  v1::ClusterRequest r = Request();
  r.set_init(v1::INIT_GIVEN);
  for (float v : {0.f, 0.f, 10.f, 10.f}) r.add_centers(v);
  r.set_raw_response(true);
  const RunResult<float> run = *Cluster(ExactModels<float>()[0], *BatchFromRequest(r));
  v1::ClusterResponse response;
  FillResponse(r, run, &response);
  EXPECT_EQ(response.labels_size(), 0);
  EXPECT_EQ(response.centers_size(), 0);
  EXPECT_EQ(response.labels_i32(), std::string("\0\0\0\0\0\0\0\0\x01\0\0\0\x01\0\0\0", 16));
  EXPECT_EQ(response.centers_f32(), Bytes({0, 0.5, 10, 10.5}));
  EXPECT_EQ(response.objective(), 1.0);

  r.set_omit_labels(true);
  v1::ClusterResponse lean;
  FillResponse(r, run, &lean);
  EXPECT_TRUE(lean.labels_i32().empty());
  EXPECT_EQ(lean.centers_f32().size(), 16u);
}

}  // namespace
}  // namespace kmt
