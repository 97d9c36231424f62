#include "core/random.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace kmt {
namespace {

TEST(Random, ASeedNamesTheSameDraws) {
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) {
    const double x = a.Uniform();
    EXPECT_EQ(x, b.Uniform());
    EXPECT_GE(x, 0);
    EXPECT_LT(x, 1);
  }
  EXPECT_NE(Rng(7).Uniform(), c.Uniform());
  Rng r(3);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t v = r.Below(5);
    EXPECT_LT(v, 5u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 5u);
}

TEST(Random, CounterDrawsDependOnEveryCounterAndNothingElse) {
  const double u = CounterUniform(1, 2, 3, 4);
  EXPECT_EQ(u, CounterUniform(1, 2, 3, 4));
  EXPECT_NE(u, CounterUniform(2, 2, 3, 4));
  EXPECT_NE(u, CounterUniform(1, 3, 3, 4));
  EXPECT_NE(u, CounterUniform(1, 2, 4, 4));
  EXPECT_NE(u, CounterUniform(1, 2, 3, 5));
  EXPECT_EQ(CounterGumbel(1, 2, 3, 4), -std::log(-std::log(u)));
}

TEST(Random, CounterDrawsAreUniform) {
  // Chi-square over 20 equal bins of 100,000 draws along the index counter:
  // 19 degrees of freedom, 43.8 is the 0.001 critical value.
  constexpr int kBins = 20, kDraws = 100000;
  std::vector<int> bins(kBins, 0);
  for (int i = 0; i < kDraws; ++i) {
    const double u = CounterUniform(5, 0, 1, i);
    ASSERT_GT(u, 0);
    ASSERT_LT(u, 1);
    ++bins[static_cast<int>(u * kBins)];
  }
  const double expected = static_cast<double>(kDraws) / kBins;
  double chi2 = 0;
  for (int b : bins) chi2 += (b - expected) * (b - expected) / expected;
  EXPECT_LT(chi2, 43.8);
}

}  // namespace
}  // namespace kmt
