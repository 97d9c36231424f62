// The distance kernel against plain loops, in float and double.
#include "core/distances.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/random.h"
#include "tests/support/random_weights.h"

namespace kmt {
namespace {

template <typename Scalar>
class DistancesTest : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(DistancesTest, Scalars);

TYPED_TEST(DistancesTest, ProductFormIsWithinItsRoundOffBoundOfTheDirectDistance) {
  using Scalar = TypeParam;
  Rng rng(3);
  for (const double scale : {1e-3, 1.0, 1e3}) {
    SCOPED_TRACE(scale);
    const Matrix<Scalar> a = NormalMatrix<Scalar>(17, 40, rng, scale);
    const Matrix<Scalar> b = NormalMatrix<Scalar>(17, 9, rng, scale);
    const Vector<Scalar> a_sq = SquaredNorms<Scalar>(a), b_sq = SquaredNorms<Scalar>(b);
    Matrix<Scalar> out;
    SquaredDistances<Scalar>(a, a_sq, b, b_sq, &out);
    ASSERT_EQ(out.rows(), 40);
    ASSERT_EQ(out.cols(), 9);
    for (int i = 0; i < 40; ++i) {
      EXPECT_EQ(a_sq[i], a.col(i).squaredNorm());
      for (int j = 0; j < 9; ++j) {
        const Scalar direct = DirectSquaredDistance(a.col(i).data(), b.col(j).data(), 17);
        EXPECT_LE(std::abs(out(i, j) - direct), SquaredDistanceRoundOff(17, a_sq[i], b_sq[j]))
            << i << ", " << j;
        EXPECT_GE(out(i, j), 0);
      }
    }
  }
}

TYPED_TEST(DistancesTest, ATokenIsAtDistanceZeroFromItselfAfterClamping) {
  using Scalar = TypeParam;
  Rng rng(5);
  const Matrix<Scalar> a = NormalMatrix<Scalar>(8, 30, rng, 100.0);
  const Vector<Scalar> a_sq = SquaredNorms<Scalar>(a);
  Matrix<Scalar> out;
  SquaredDistances<Scalar>(a, a_sq, a, a_sq, &out);
  for (int i = 0; i < 30; ++i) {
    // The product form may leave round-off, never a negative value.
    EXPECT_GE(out(i, i), 0);
    EXPECT_LE(out(i, i), 2 * SquaredDistanceRoundOff(8, a_sq[i], a_sq[i]));
    EXPECT_EQ(DirectSquaredDistance(a.col(i).data(), a.col(i).data(), 8), 0);
  }
}

TYPED_TEST(DistancesTest, InterleavedDirectDistancesHaveTheDirectDistancesBits) {
  using Scalar = TypeParam;
  Rng rng(9);
  // One point against many (a near tie's candidates), and pairs of
  // different points (a block's near ties).
  const Matrix<Scalar> a = NormalMatrix<Scalar>(1001, kDirectChains, rng, 1.0);
  const Matrix<Scalar> b = NormalMatrix<Scalar>(1001, kDirectChains, rng, 1.0);
  const Scalar* points[kDirectChains];
  const Scalar* columns[kDirectChains];
  for (int t = 0; t < kDirectChains; ++t) {
    points[t] = a.col(t).data();
    columns[t] = b.col(t).data();
  }
  for (int count = 1; count <= kDirectChains; ++count) {
    SCOPED_TRACE(count);
    Scalar one[kDirectChains], pairs[kDirectChains];
    DirectSquaredDistances(a.data(), columns, count, 1001, one);
    DirectSquaredDistancePairs(points, columns, count, 1001, pairs);
    for (int t = 0; t < count; ++t) {
      const Scalar direct = DirectSquaredDistance(a.data(), columns[t], 1001);
      EXPECT_EQ(std::memcmp(&one[t], &direct, sizeof(Scalar)), 0) << t;
      const Scalar paired = DirectSquaredDistance(points[t], columns[t], 1001);
      EXPECT_EQ(std::memcmp(&pairs[t], &paired, sizeof(Scalar)), 0) << t;
    }
  }
}

TYPED_TEST(DistancesTest, BlocksOfColumnsGiveTheSameDistancesAsTheWhole) {
  using Scalar = TypeParam;
  Rng rng(7);
  const Matrix<Scalar> a = NormalMatrix<Scalar>(5, 64, rng, 1.0);
  const Matrix<Scalar> b = NormalMatrix<Scalar>(5, 6, rng, 1.0);
  const Vector<Scalar> a_sq = SquaredNorms<Scalar>(a), b_sq = SquaredNorms<Scalar>(b);
  Matrix<Scalar> whole, part;
  SquaredDistances<Scalar>(a, a_sq, b, b_sq, &whole);
  SquaredDistances<Scalar>(a.middleCols(16, 32), a_sq.segment(16, 32), b, b_sq, &part);
  EXPECT_EQ(part, whole.middleRows(16, 32));
}

}  // namespace
}  // namespace kmt
