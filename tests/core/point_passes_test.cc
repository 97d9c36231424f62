#include "core/point_passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/random.h"
#include "tests/support/simd_levels.h"

namespace kmt {
namespace {

template <typename Scalar>
ScalarBits<Scalar> BitsOf(Scalar v) {
  ScalarBits<Scalar> bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

// The largest magnitude's bits are those of the largest |value|, found one
// value at a time, at every level and at every length around a vector's.
template <typename Scalar>
void ExpectLargestMagnitude() {
  Rng rng(3);
  for (const int count : {0, 1, 7, 8, 15, 16, 17, 33, 1000}) {
    SCOPED_TRACE(testing::Message() << "count=" << count << " bytes=" << sizeof(Scalar));
    std::vector<Scalar> values(count);
    for (Scalar& v : values) v = static_cast<Scalar>(rng.Normal() * 1e3);
    Scalar largest = 0;
    for (Scalar v : values) largest = std::max(largest, std::abs(v));
    EXPECT_EQ(LargestMagnitudeBits(values.data(), count), BitsOf(largest));
  }
}

TEST(PointPasses, LargestMagnitudeIsTheLargestAbsoluteValue) {
  AtEachSimdLevel([&] {
    ExpectLargestMagnitude<float>();
    ExpectLargestMagnitude<double>();
  });
}

// NaN and the infinities of either sign, anywhere, lie above the largest
// finite value; -0 counts as 0.
template <typename Scalar>
void ExpectNonFiniteAboveEveryFinite() {
  const Scalar largest_finite = std::numeric_limits<Scalar>::max();
  for (const Scalar bad :
       {std::numeric_limits<Scalar>::quiet_NaN(), -std::numeric_limits<Scalar>::quiet_NaN(),
        std::numeric_limits<Scalar>::infinity(), -std::numeric_limits<Scalar>::infinity()}) {
    for (const int at : {0, 5, 18}) {
      std::vector<Scalar> values(19, Scalar(1));
      values[3] = -largest_finite;
      values[at] = bad;
      EXPECT_GT(LargestMagnitudeBits(values.data(), 19), BitsOf(largest_finite))
          << "value " << bad << " at " << at;
    }
  }
  const Scalar zeros[] = {Scalar(-0.0), Scalar(0)};
  EXPECT_EQ(LargestMagnitudeBits(zeros, 2), 0u);
}

TEST(PointPasses, NonFiniteValuesLieAboveEveryFiniteOne) {
  AtEachSimdLevel([&] {
    ExpectNonFiniteAboveEveryFinite<float>();
    ExpectNonFiniteAboveEveryFinite<double>();
  });
}

// Each coordinate's sums are a plain loop's over the points in order, in
// double, to the bit, at every d around the passes' groups of coordinates.
template <typename Scalar>
void ExpectCoordinateSumsInPointOrder(int d, int64_t n) {
  SCOPED_TRACE(testing::Message() << "d=" << d << " n=" << n << " bytes=" << sizeof(Scalar));
  Rng rng(d);
  std::vector<Scalar> values(n * d);
  for (Scalar& v : values) v = static_cast<Scalar>(1e4 + rng.Normal() * 3);
  std::vector<double> center(d), sums(d), deviations(d);
  for (int l = 0; l < d; ++l) center[l] = 1e4 + rng.Normal();
  CoordinateSums(values.data(), n, d, nullptr, sums.data());
  CoordinateSums(values.data(), n, d, center.data(), deviations.data());
  for (int l = 0; l < d; ++l) {
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum += values[i * d + l];
      const double deviation = values[i * d + l] - center[l];
      squares += deviation * deviation;
    }
    EXPECT_EQ(sums[l], sum) << "coordinate " << l;
    EXPECT_EQ(deviations[l], squares) << "coordinate " << l;
  }
}

TEST(PointPasses, CoordinateSumsArePlainLoopsInPointOrder) {
  AtEachSimdLevel([&] {
    for (const int d : {1, 5, 8, 31, 32, 37, 45, 64, 71}) {
      ExpectCoordinateSumsInPointOrder<float>(d, 1025);
      ExpectCoordinateSumsInPointOrder<double>(d, 333);
    }
  });
}

}  // namespace
}  // namespace kmt
