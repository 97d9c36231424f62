// The job messages' matrices: each read and written through its forms in a
// job's precision, the refusals naming the form and the numbers.
#include "proto/job_matrices.h"

#include <gtest/gtest.h>

#include <vector>

namespace kmt {
namespace {

// Two centers in three dimensions (d x m, a center per column).
template <typename Scalar>
Matrix<Scalar> TwoCenters() {
  Matrix<Scalar> m(3, 2);
  m << 1, 4, 2.5, -5, 3, 6.25;
  return m;
}

TEST(JobMatrices, AFloatMatrixTravelsAsItsF32BytesWhereTheMessageHasThem) {
  v1::JobRequest request;
  v1::AssignStep* step = request.mutable_assign();
  WriteMatrix(TwoCenters<float>(), wire::Centers(step));
  EXPECT_EQ(step->centers_size(), 0);
  EXPECT_EQ(step->centers_f32().size(), 6 * sizeof(float));
  EXPECT_TRUE(step->centers_f64().empty());
  const absl::StatusOr<Matrix<float>> back = ReadMatrix<float>(wire::Centers(*step), "k", 2, 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, TwoCenters<float>());
}

TEST(JobMatrices, AFloatMatrixTravelsRepeatedWhereTheMessageHasNoF32Bytes) {
  v1::SeedStep step;
  WriteMatrix(TwoCenters<float>(), wire::AddCenters(&step));
  // Row-major: the first center, then the second.
  EXPECT_EQ(std::vector<float>(step.add_centers().begin(), step.add_centers().end()),
            (std::vector<float>{1, 2.5, 3, 4, -5, 6.25}));
  EXPECT_TRUE(step.add_centers_f64().empty());
  const absl::StatusOr<Matrix<float>> back = ReadRows<float>(wire::AddCenters(step), 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, TwoCenters<float>());
}

TEST(JobMatrices, ADoubleMatrixTravelsAsItsF64BytesAndReadsBackToTheBit) {
  Matrix<double> centers = TwoCenters<double>();
  centers(0, 0) = 0.1;  // not a float value
  v1::JobResponse answer;
  WriteMatrix(centers, wire::SampledPoints(&answer));
  EXPECT_EQ(answer.sampled_points_size(), 0);
  EXPECT_EQ(answer.sampled_points_f64().size(), 6 * sizeof(double));
  const absl::StatusOr<Matrix<double>> back = ReadRows<double>(wire::SampledPoints(answer), 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, centers);
}

TEST(JobMatrices, NothingSentReadsAsNoRows) {
  const v1::SeedStep step;
  const absl::StatusOr<Matrix<float>> f = ReadRows<float>(wire::Candidates(step), 3);
  const absl::StatusOr<Matrix<double>> d = ReadRows<double>(wire::Candidates(step), 3);
  ASSERT_TRUE(f.ok() && d.ok());
  EXPECT_EQ(f->cols(), 0);
  EXPECT_EQ(d->cols(), 0);
  EXPECT_TRUE(IsEmpty(wire::Candidates(step)));
}

TEST(JobMatrices, AFormOfTheOtherPrecisionIsRefusedNamingIt) {
  v1::KMeansParallelStep step;
  WriteMatrix(TwoCenters<double>(), wire::AddCenters(&step));
  EXPECT_EQ(ReadRows<float>(wire::AddCenters(step), 3).status().message(),
            "add_centers_f64 is set for a float32 shard (its points came as float32): send "
            "add_centers or add_centers_f32; one job's shards and steps are all float32 or all "
            "float64");
  step.Clear();
  WriteMatrix(TwoCenters<float>(), wire::AddCenters(&step));
  EXPECT_EQ(ReadRows<double>(wire::AddCenters(step), 3).status().message(),
            "add_centers comes as float32 (add_centers or add_centers_f32) for a float64 shard "
            "(its points came as points_f64): send add_centers_f64; one job's shards and steps "
            "are all float32 or all float64");
}

TEST(JobMatrices, TwoFormsOrAWrongCountAreRefusedNamingTheForm) {
  v1::CandidateWeightsStep step;
  WriteMatrix(TwoCenters<float>(), wire::Candidates(&step));
  step.add_candidates(1);
  EXPECT_EQ(ReadRows<float>(wire::Candidates(step), 3).status().message(),
            "candidates and candidates_f32 are both set; send one of them");
  step.clear_candidates_f32();
  EXPECT_EQ(ReadRows<float>(wire::Candidates(step), 3).status().message(),
            "candidates has 1 values, not a multiple of d = 3");
  step.clear_candidates();
  step.set_candidates_f32(std::string(10, '\0'));
  EXPECT_EQ(ReadRows<float>(wire::Candidates(step), 3).status().message(),
            "candidates_f32 has 10 bytes, not a multiple of 4 * d = 12");
  step.clear_candidates_f32();
  step.set_candidates_f64(std::string(10, '\0'));
  EXPECT_EQ(ReadRows<double>(wire::Candidates(step), 3).status().message(),
            "candidates_f64 has 10 bytes, not a multiple of 8 * d = 24");
}

TEST(JobMatrices, AMatrixOfAGivenRowCountTakesExactlyThatMany) {
  v1::AssignStep step;
  WriteMatrix(TwoCenters<float>(), wire::Centers(&step));
  EXPECT_EQ(ReadMatrix<float>(wire::Centers(step), "k", 3, 3).status().message(),
            "centers_f32 has 24 bytes, expected k*d*4 = 3*3*4");
  step.clear_centers_f32();
  step.add_centers(1);
  EXPECT_EQ(ReadMatrix<float>(wire::Centers(step), "k", 2, 3).status().message(),
            "centers has 1 values, expected k*d = 2*3");
  // Nothing sent is too few values, in the precision's own form.
  const v1::SampleSumsStep none;
  EXPECT_EQ(ReadMatrix<double>(wire::Centers(none), "k", 2, 3).status().message(),
            "centers_f64 has 0 bytes, expected k*d*8 = 2*3*8");
}

TEST(JobMatrices, NarrowPointsAreWrittenRoundedAndReadWidened) {
  v1::ShardChunk chunk;
  const std::vector<float> values = {1, 0.5f, -2, 3};
  WriteValues<float>(values, wire::Points(&chunk), RawType::kBFloat16);
  EXPECT_EQ(chunk.points_bf16().size(), 8u);
  EXPECT_EQ(FirstSetForm(wire::Points(chunk)), "points_bf16");
  const absl::StatusOr<Matrix<float>> back = ReadRows<float>(wire::Points(chunk), 2);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(std::vector<float>(back->data(), back->data() + back->size()), values);
  WriteValues<float>(values, wire::Points(&chunk), RawType::kFloat16);
  EXPECT_EQ(OneForm<float>(wire::Points(chunk)).status().message(),
            "points_f16 and points_bf16 are both set; send one of them");
}

TEST(JobMatrices, WireBytesCountEveryFormSent) {
  v1::ShardChunk chunk;
  EXPECT_EQ(WireBytes(wire::Points(chunk)), 0);
  chunk.add_points(1);
  chunk.add_points(2);
  EXPECT_EQ(WireBytes(wire::Points(chunk)), 8);
  WriteValues<float>(std::vector<float>{1, 2, 3}, wire::Points(&chunk), RawType::kFloat16);
  EXPECT_EQ(WireBytes(wire::Points(chunk)), 8 + 6);
  WriteValues<double>(std::vector<double>{1}, wire::Points(&chunk));
  EXPECT_EQ(WireBytes(wire::Points(chunk)), 8 + 6 + 8);
}

TEST(JobMatrices, CopyFormsCarriesEverySetForm) {
  v1::KMeansParallelStep from, to;
  WriteMatrix(TwoCenters<double>(), wire::AddCenters(&from));
  from.set_oversampling(2);
  CopyForms(wire::AddCenters(from), wire::AddCenters(&to));
  EXPECT_EQ(to.add_centers_f64(), from.add_centers_f64());
  EXPECT_EQ(to.oversampling(), 0);  // the matrix alone
  from.Clear();
  WriteMatrix(TwoCenters<float>(), wire::AddCenters(&from));
  v1::KMeansParallelStep to32;
  CopyForms(wire::AddCenters(from), wire::AddCenters(&to32));
  EXPECT_EQ(to32.add_centers_f32(), from.add_centers_f32());
  EXPECT_TRUE(to32.add_centers_f64().empty());
}

}  // namespace
}  // namespace kmt
