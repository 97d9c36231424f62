// The normalizers on worked examples with exact values, against brute force
// (every support of the simplex for sparsemax, every r for normmax), and
// their tie rules.
#include "core/normalizers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/random.h"

namespace kmt {
namespace {

template <typename Scalar>
Vector<Scalar> Vec(std::initializer_list<double> values) {
  Vector<Scalar> v(static_cast<Eigen::Index>(values.size()));
  Eigen::Index i = 0;
  for (double x : values) v[i++] = static_cast<Scalar>(x);
  return v;
}

Vector<double> RandomVector(Eigen::Index n, Rng& rng, double scale) {
  Vector<double> v(n);
  for (Eigen::Index i = 0; i < n; ++i) v[i] = scale * rng.Normal();
  return v;
}

// The projection of z onto the simplex by brute force: for every support S
// the projection onto the affine hull of that face, max over S of z - t with
// t = (sum_S z - 1) / |S|; of those inside the simplex, the nearest to z.
Vector<double> BruteForceProjection(const Vector<double>& z) {
  const Eigen::Index n = z.size();
  Vector<double> best;
  double best_distance = INFINITY;
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    double sum = 0;
    int size = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      if (mask >> i & 1) {
        sum += z[i];
        ++size;
      }
    }
    const double t = (sum - 1) / size;
    Vector<double> p = Vector<double>::Zero(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      if (mask >> i & 1) p[i] = z[i] - t;
    }
    if (p.minCoeff() < 0) continue;
    const double distance = (p - z).squaredNorm();
    if (distance < best_distance) {
      best_distance = distance;
      best = p;
    }
  }
  return best;
}

template <typename Scalar>
class NormalizersTest : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(NormalizersTest, Scalars);

TYPED_TEST(NormalizersTest, SparsemaxWorkedExamples) {
  using S = TypeParam;
  // Sorted 1, 0.5, 0, -1: the support is the top two, t = (1.5 - 1) / 2.
  EXPECT_EQ(Sparsemax<S>(Vec<S>({1, 0.5, -1, 0})), Vec<S>({0.75, 0.25, 0, 0}));
  // A lead of at least 1 takes all the weight, exactly.
  EXPECT_EQ(Sparsemax<S>(Vec<S>({0, 3, 1.5})), Vec<S>({0, 1, 0}));
  EXPECT_EQ(Sparsemax<S>(Vec<S>({-7})), Vec<S>({1}));
  // Equal scores share equally.
  EXPECT_EQ(Sparsemax<S>(Vec<S>({2, 2, 2, 2})), Vec<S>({0.25, 0.25, 0.25, 0.25}));
  // A common shift changes nothing, however large.
  EXPECT_EQ(Sparsemax<S>(Vec<S>({1e6 + 0.5, 1e6, 1e6 - 2})), Vec<S>({0.75, 0.25, 0}));
  EXPECT_EQ(Sparsemax<S>(Vec<S>({-3e7, -3e7 - 4})), Vec<S>({1, 0}));
  // Inexact scores: an equal shift on the support, far scores at exactly 0.
  const Vector<S> p = Sparsemax<S>(Vec<S>({0.5, 0.1, -2, 0.45}));
  const double tolerance = sizeof(S) == 8 ? 1e-15 : 1e-7;
  EXPECT_NEAR(p.sum(), 1, tolerance);
  EXPECT_NEAR(p[0] - p[3], 0.05, tolerance);
  EXPECT_EQ(p[2], 0);
}

TYPED_TEST(NormalizersTest, NormmaxWorkedExamples) {
  using S = TypeParam;
  // Sorted 3, 2, 1, 0. V(r) = mean of the top r - tau / r.
  const Vector<S> s = Vec<S>({3, 1, 2, 0});
  // tau = 0.5: V = 2.5, 2.25, ...: the argmax.
  EXPECT_EQ(Normmax<S>(s, 0.5), Vec<S>({1, 0, 0, 0}));
  // tau = 2: V = 1, 1.5, 1.33, 1.
  EXPECT_EQ(Normmax<S>(s, 2), Vec<S>({0.5, 0, 0.5, 0}));
  // tau = 4: V = -1, 0.5, 0.67, 0.5.
  const S third = S(1) / 3;
  EXPECT_EQ(Normmax<S>(s, 4), Vec<S>({third, third, third, 0}));
  // tau = 10: V = -7, -2.5, -1.33, -1: the uniform average.
  EXPECT_EQ(Normmax<S>(s, 10), Vec<S>({0.25, 0.25, 0.25, 0.25}));
  EXPECT_EQ(Normmax<S>(Vec<S>({-7}), 3), Vec<S>({1}));
}

TYPED_TEST(NormalizersTest, NormmaxTiesTakeTheLowerIndexAndTheSmallestR) {
  using S = TypeParam;
  const Vector<S> s = Vec<S>({3, 1, 2, 0});
  // tau = 1: V(1) = V(2) = 2; tau = 3: V(2) = V(3) = 1.
  EXPECT_EQ(Normmax<S>(s, 1), Vec<S>({1, 0, 0, 0}));
  EXPECT_EQ(Normmax<S>(s, 3), Vec<S>({0.5, 0, 0.5, 0}));
  // Two equal maxima and tau = 0: every r <= 2 is best; r = 1 keeps the
  // lower index.
  EXPECT_EQ(Normmax<S>(Vec<S>({1, 2, 2, 0}), 0), Vec<S>({0, 1, 0, 0}));
  EXPECT_EQ(Normmax<S>(Vec<S>({1, 2, 2, 0}), 0.5), Vec<S>({0, 0.5, 0.5, 0}));
  // Equal scores all round: tau = 0 keeps the first, tau > 0 all of them.
  EXPECT_EQ(Normmax<S>(Vec<S>({5, 5, 5, 5}), 0), Vec<S>({1, 0, 0, 0}));
  EXPECT_EQ(Normmax<S>(Vec<S>({5, 5, 5, 5}), 0.01), Vec<S>({0.25, 0.25, 0.25, 0.25}));
}

TYPED_TEST(NormalizersTest, GumbelMaxWorkedExamples) {
  using S = TypeParam;
  // Sums 1.5, 2, 2.25.
  EXPECT_EQ(GumbelMax<S>(Vec<S>({1, 3, 2}), Vec<S>({0.5, -1, 0.25})), Vec<S>({0, 0, 1}));
  // Sums 2, 2, 0: the lower index.
  EXPECT_EQ(GumbelMax<S>(Vec<S>({1, 2, 0}), Vec<S>({1, 0, 0})), Vec<S>({1, 0, 0}));
  // No noise: the argmax, lowest index among equals.
  EXPECT_EQ(GumbelMax<S>(Vec<S>({4, 9, 9}), Vec<S>({0, 0, 0})), Vec<S>({0, 1, 0}));
}

TEST(Sparsemax, EqualsTheBruteForceProjection) {
  Rng rng(21);
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(trial);
    const Vector<double> z = RandomVector(1 + rng.Below(8), rng, trial % 2 ? 0.3 : 2);
    const Vector<double> p = Sparsemax<double>(z);
    EXPECT_LE((p - BruteForceProjection(z)).cwiseAbs().maxCoeff(), 1e-14);
    EXPECT_NEAR(p.sum(), 1, 1e-14);
  }
}

TEST(Sparsemax, MatchesItsClosedForms) {
  Rng rng(22);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(trial);
    // Two scores: the first weight is (z1 - z2 + 1) / 2 clipped to [0, 1].
    const Vector<double> pair = RandomVector(2, rng, 1);
    const double first = std::clamp((pair[0] - pair[1] + 1) / 2, 0.0, 1.0);
    const Vector<double> p = Sparsemax<double>(pair);
    EXPECT_NEAR(p[0], first, 1e-15);
    EXPECT_NEAR(p[1], 1 - first, 1e-15);
    // Scores within 1/n of their mean: all in the support, z - mean + 1/n.
    const Eigen::Index n = 2 + static_cast<Eigen::Index>(rng.Below(7));
    const Vector<double> z = RandomVector(n, rng, 0.02 / static_cast<double>(n));
    const Vector<double> want = (z.array() - z.mean() + 1.0 / static_cast<double>(n)).matrix();
    ASSERT_GT(want.minCoeff(), 0);
    EXPECT_LE((Sparsemax<double>(z) - want).cwiseAbs().maxCoeff(), 1e-15);
  }
}

TEST(Normmax, EqualsTheBestROfABruteForce) {
  // Scores and tau on a grid of halves keep every sum and product exact, so
  // V(a) against V(b) is decided exactly, ties included, as
  // (S_a - tau) b against (S_b - tau) a.
  Rng rng(23);
  for (int trial = 0; trial < 2000; ++trial) {
    SCOPED_TRACE(trial);
    const Eigen::Index n = 1 + static_cast<Eigen::Index>(rng.Below(8));
    Vector<double> s(n);
    for (Eigen::Index i = 0; i < n; ++i) s[i] = 0.5 * static_cast<double>(rng.Below(9));
    const double tau = 0.5 * static_cast<double>(rng.Below(16));
    std::vector<Eigen::Index> order(n);
    std::iota(order.begin(), order.end(), Eigen::Index{0});
    std::stable_sort(order.begin(), order.end(),
                     [&s](Eigen::Index a, Eigen::Index b) { return s[a] > s[b]; });
    std::vector<double> top_sum(n + 1, 0);
    for (Eigen::Index r = 1; r <= n; ++r) top_sum[r] = top_sum[r - 1] + s[order[r - 1]];
    Eigen::Index best = 1;
    for (Eigen::Index r = 2; r <= n; ++r) {
      if ((top_sum[r] - tau) * static_cast<double>(best) >
          (top_sum[best] - tau) * static_cast<double>(r)) {
        best = r;
      }
    }
    Vector<double> want = Vector<double>::Zero(n);
    for (Eigen::Index j = 0; j < best; ++j) want[order[j]] = 1.0 / static_cast<double>(best);
    EXPECT_EQ(Normmax<double>(s, tau), want);
  }
}

TEST(Normmax, IsTheArgmaxOverTheSimplex) {
  // <p, s> - tau ||p||_inf at normmax against every vertex, every uniform
  // distribution on a top set and random points of the simplex.
  Rng rng(24);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(trial);
    const Eigen::Index n = 1 + static_cast<Eigen::Index>(rng.Below(8));
    const Vector<double> s = RandomVector(n, rng, 1);
    const double tau = 3 * rng.Uniform();
    const auto value = [&](const Vector<double>& p) {
      return p.dot(s) - tau * p.cwiseAbs().maxCoeff();
    };
    const double got = value(Normmax<double>(s, tau));
    std::vector<Eigen::Index> order(n);
    std::iota(order.begin(), order.end(), Eigen::Index{0});
    std::sort(order.begin(), order.end(),
              [&s](Eigen::Index a, Eigen::Index b) { return s[a] > s[b]; });
    for (Eigen::Index r = 1; r <= n; ++r) {
      Vector<double> uniform = Vector<double>::Zero(n);
      for (Eigen::Index j = 0; j < r; ++j) uniform[order[j]] = 1.0 / static_cast<double>(r);
      EXPECT_GE(got, value(uniform) - 1e-14);
      EXPECT_GE(got, value(Vector<double>::Unit(n, r - 1)) - 1e-14);
    }
    for (int sample = 0; sample < 50; ++sample) {
      Vector<double> p(n);
      for (Eigen::Index i = 0; i < n; ++i) p[i] = -std::log(1 - rng.Uniform());
      EXPECT_GE(got, value(p / p.sum()) - 1e-14);
    }
  }
}

}  // namespace
}  // namespace kmt
