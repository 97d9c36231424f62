#include "core/embedding.h"

#include <gtest/gtest.h>

namespace kmt {
namespace {

TEST(Embedding, RegisterCounts) {
  EXPECT_EQ(RegisterDim(Embedding::kOneHot, 10), 10);
  EXPECT_EQ(RegisterDim(Embedding::kNone, 10), 0);
  for (const auto& [k, m] : std::vector<std::pair<int, int>>{
           {1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {9, 4}, {1000, 10}}) {
    SCOPED_TRACE(k);
    EXPECT_EQ(RegisterDim(Embedding::kBinary, k), m);
  }
}

TEST(Embedding, BinaryCodesAreTheBitsOfTheIndexLeastSignificantFirst) {
  const Matrix<double> codes = CenterRegisters<double>(Embedding::kBinary, 6);
  ASSERT_EQ(codes.rows(), 3);
  for (int j = 0; j < 6; ++j) {
    for (int b = 0; b < 3; ++b) EXPECT_EQ(codes(b, j), (j >> b) & 1) << j << ", " << b;
  }
  EXPECT_EQ(CenterRegisters<double>(Embedding::kOneHot, 4), Matrix<double>::Identity(4, 4));
  EXPECT_EQ(CenterRegisters<double>(Embedding::kNone, 4).rows(), 0);
}

TEST(Embedding, TokensArePointsOverZerosAndCentersOverTheirCodes) {
  Matrix<double> points(2, 3);
  points << 1, 2, 3, 4, 5, 6;
  const Matrix<double> x = EmbedPoints(points, 2);
  ASSERT_EQ(x.rows(), 4);
  EXPECT_EQ(x.topRows(2), points);
  EXPECT_EQ(x.bottomRows(2), Matrix<double>::Zero(2, 3));
  const Matrix<double> c = EmbedCenters(points, Embedding::kOneHot);
  ASSERT_EQ(c.rows(), 5);
  EXPECT_EQ(c.topRows(2), points);
  EXPECT_EQ(c.bottomRows(3), Matrix<double>::Identity(3, 3));
}

TEST(Embedding, NamesRoundTrip) {
  for (Embedding e : {Embedding::kOneHot, Embedding::kBinary, Embedding::kNone}) {
    EXPECT_EQ(*ParseEmbedding(EmbeddingName(e)), e);
  }
  EXPECT_FALSE(ParseEmbedding("ternary").ok());
}

}  // namespace
}  // namespace kmt
