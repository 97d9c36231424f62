// The feed-forward block against a plain loop, and the exact squares of
// Theorem 2.2's norm update.
#include "core/feed_forward.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/random.h"
#include "tests/support/random_weights.h"

namespace kmt {
namespace {

TEST(FeedForward, EqualsAPlainLoop) {
  Rng rng(3);
  const FeedForward<double> f = RandomFeedForward<double>(5, 7, rng);
  const Matrix<double> tokens = NormalMatrix<double>(5, 9, rng);
  const Matrix<double> got = FeedForwardOutput(f, tokens);
  ASSERT_EQ(got.rows(), 5);
  ASSERT_EQ(got.cols(), 9);
  for (int c = 0; c < 9; ++c) {
    for (int r = 0; r < 5; ++r) {
      double want = f.b2[r];
      for (int h = 0; h < 7; ++h) {
        double u = f.b1[h];
        for (int l = 0; l < 5; ++l) u += f.W1(h, l) * tokens(l, c);
        const double relu = u > 0 ? u : 0;
        want += f.W2(r, h) * relu * relu;
      }
      EXPECT_NEAR(got(r, c), want, 1e-12 * (1 + std::abs(want)));
    }
  }
}

TEST(FeedForward, APairOfUnitsSquaresACoordinateExactly) {
  // Hidden units +x and -x: relu(x)^2 + relu(-x)^2 = x^2, one of them 0.
  FeedForward<float> f;
  f.W1.resize(2, 1);
  f.W1 << 1, -1;
  f.b1 = Vector<float>::Zero(2);
  f.W2 = Matrix<float>::Ones(1, 2);
  f.b2 = Vector<float>::Zero(1);
  Matrix<float> x(1, 4);
  x << -3.1f, 0.f, 1e-20f, 7.25f;
  const Matrix<float> y = FeedForwardOutput(f, x);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y(0, i), x(0, i) * x(0, i)) << i;
}

TEST(FeedForward, ValidationSaysWhatIsWrong) {
  Rng rng(1);
  FeedForward<double> f = RandomFeedForward<double>(4, 3, rng);
  EXPECT_TRUE(ValidateFeedForward(f, 4).ok());
  EXPECT_EQ(ValidateFeedForward(f, 5).message(), "feed-forward W1 is 3x4, expected 3x5");
  f.b2.resize(3);
  EXPECT_EQ(ValidateFeedForward(f, 4).message(), "feed-forward b2 is 3x1, expected 4x1");
  f = RandomFeedForward<double>(4, 3, rng);
  f.W2(1, 2) = INFINITY;
  EXPECT_EQ(ValidateFeedForward(f, 4).message(), "feed-forward W2 has a non-finite value");
  f.W1.resize(0, 4);
  EXPECT_EQ(ValidateFeedForward(f, 4).message(), "feed-forward block has no hidden unit");
}

}  // namespace
}  // namespace kmt
