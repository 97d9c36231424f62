// The drivers' merge of the shards' cluster sums (AddStepSums,
// client/resident_job.h): a sparse shard's sums as rows of its clusters'
// columns (center_sums_csr) add to the bits of the same sums sent dense, and
// answers that do not fit k and d are refused by name.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "client/resident_job.h"
#include "core/random.h"
#include "proto/raw_payload.h"

namespace kmt {
namespace {

constexpr int kD = 7, kK = 3;

// A shard's answer of `sums` (d x k) and `counts`: as center_sums, or with
// `rows` as center_sums_csr, each center's nonzero entries in column order.
v1::JobResponse Answer(const Matrix<double>& sums, const std::vector<int64_t>& counts, bool rows) {
  v1::JobResponse answer;
  answer.mutable_center_counts()->Assign(counts.begin(), counts.end());
  if (!rows) {
    answer.mutable_center_sums()->Assign(sums.data(), sums.data() + sums.size());
    return answer;
  }
  std::vector<int64_t> indptr = {0};
  std::vector<int32_t> indices;
  std::vector<double> values;
  for (Eigen::Index j = 0; j < sums.cols(); ++j) {
    for (Eigen::Index l = 0; l < sums.rows(); ++l) {
      if (sums(l, j) == 0) continue;
      indices.push_back(static_cast<int32_t>(l));
      values.push_back(sums(l, j));
    }
    indptr.push_back(static_cast<int64_t>(indices.size()));
  }
  v1::CsrPoints* csr = answer.mutable_center_sums_csr();
  EncodeInt64(indptr, csr->mutable_indptr_i64());
  EncodeInt32(indices, csr->mutable_indices_i32());
  EncodeFloat64(values, csr->mutable_values_f64());
  csr->set_float64(true);
  return answer;
}

// Sums of a sparse shard: each center's columns a few of d, values whose
// additions round (thirds of large and small numbers).
Matrix<double> ShardSums(uint64_t seed) {
  Rng rng(seed);
  Matrix<double> sums = Matrix<double>::Zero(kD, kK);
  for (int j = 0; j < kK; ++j) {
    for (int l = 0; l < kD; ++l) {
      if (rng.Uniform() < 0.4) sums(l, j) = (1e8 * rng.Uniform() + 1) / 3;
    }
  }
  return sums;
}

TEST(AddStepSums, ASparseShardsRowsAddToTheBitsOfItsDenseSums) {
  ClusterSums dense(kD, kK), rows(kD, kK);
  for (const uint64_t seed : {1, 2, 3}) {
    const Matrix<double> sums = ShardSums(seed);
    const std::vector<int64_t> counts = {3, 0, static_cast<int64_t>(seed)};
    ASSERT_TRUE(AddStepSums(Answer(sums, counts, false), kD, kK, false, &dense).ok());
    ASSERT_TRUE(AddStepSums(Answer(sums, counts, true), kD, kK, false, &rows).ok());
  }
  for (int j = 0; j < kK; ++j) {
    for (int l = 0; l < kD; ++l) {
      SCOPED_TRACE(testing::Message() << "center " << j << " coordinate " << l);
      EXPECT_EQ(rows.sums(l, j), dense.sums(l, j));
    }
  }
  EXPECT_EQ(rows.counts, dense.counts);
  EXPECT_EQ(rows.counts, (std::vector<int64_t>{9, 0, 6}));
  // Unweighted: the weights are the counts.
  EXPECT_EQ(rows.weights, (std::vector<double>{9, 0, 6}));
}

TEST(AddStepSums, AnswersThatDoNotFitKAndDAreRefusedByName) {
  ClusterSums into(kD, kK);
  const Matrix<double> sums = ShardSums(4);
  // Rows for two centers of three.
  v1::JobResponse two = Answer(sums.leftCols(2), {1, 1}, true);
  two.add_center_counts(1);
  absl::Status refused = AddStepSums(two, kD, kK, false, &into);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  EXPECT_NE(refused.message().find("center_sums_csr of 2 rows for k = 3"), std::string::npos)
      << refused;
  // A column past d.
  Matrix<double> wide = sums;
  wide(kD - 1, 0) = 1;
  refused = AddStepSums(Answer(wide, {1, 1, 1}, true), kD - 1, kK, false, &into);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  EXPECT_NE(refused.message().find("center_sums_csr"), std::string::npos) << refused;
  // Dense sums of the wrong size, and weights missing on a weighted job.
  refused = AddStepSums(Answer(sums, {1, 1, 1}, false), kD + 1, kK, false, &into);
  EXPECT_NE(refused.message().find("3 counts, 21 sums and 0 weights for k = 3, d = 8"),
            std::string::npos)
      << refused;
  refused = AddStepSums(Answer(sums, {1, 1, 1}, true), kD, kK, true, &into);
  EXPECT_NE(refused.message().find("on weighted points"), std::string::npos) << refused;
}

}  // namespace
}  // namespace kmt
