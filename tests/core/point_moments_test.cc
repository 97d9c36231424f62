#include "core/point_moments.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/random.h"

namespace kmt {
namespace {

// The population variance of each dimension, averaged: the textbook sums.
double PlainMeanVariance(const std::vector<double>& values, int d) {
  const int64_t n = static_cast<int64_t>(values.size()) / d;
  double total = 0;
  for (int l = 0; l < d; ++l) {
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) mean += values[i * d + l];
    mean /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) {
      total += (values[i * d + l] - mean) * (values[i * d + l] - mean);
    }
  }
  return total / (static_cast<double>(n) * d);
}

TEST(PointMoments, IsThePopulationVarianceAveragedOverDimensions) {
  // Two points per dimension: (1, 3) and (10, 30); variances 1 and 100.
  const std::vector<float> values = {1, 10, 3, 30};
  PointMoments moments;
  moments.Add(values.data(), 2, 2);
  EXPECT_DOUBLE_EQ(moments.MeanVariance(), 50.5);
  EXPECT_EQ(moments.count(), 2);
}

// One part's moments are each coordinate's two passes in point order (the
// sum, the mean, the squared deviations from it), to the bit, with d a whole
// number of the passes' groups of coordinates or not.
template <typename Scalar>
void ExpectTwoPassesInPointOrder(int d, int64_t n) {
  SCOPED_TRACE(testing::Message() << "d=" << d << " n=" << n << " bytes=" << sizeof(Scalar));
  Rng rng(d);
  std::vector<Scalar> values(n * d);
  for (Scalar& v : values) v = static_cast<Scalar>(1e4 + rng.Normal() * 3);
  double m2_total = 0;
  for (int l = 0; l < d; ++l) {
    double sum = 0, m2 = 0;
    for (int64_t i = 0; i < n; ++i) sum += values[i * d + l];
    const double mean = sum / static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) {
      const double deviation = values[i * d + l] - mean;
      m2 += deviation * deviation;
    }
    m2_total += m2;
  }
  PointMoments moments;
  moments.Add(values.data(), n, d);
  EXPECT_EQ(moments.MeanVariance(), m2_total / (static_cast<double>(n) * d));
}

TEST(PointMoments, OnePartIsEachCoordinatesTwoPassesInPointOrder) {
  for (const int d : {1, 5, 8, 32, 37}) {
    ExpectTwoPassesInPointOrder<float>(d, 4099);
    ExpectTwoPassesInPointOrder<double>(d, 777);
  }
}

TEST(PointMoments, NoPointsHaveNoVariance) {
  PointMoments moments;
  EXPECT_EQ(moments.MeanVariance(), 0);
  moments.Add(static_cast<const float*>(nullptr), 0, 3);
  moments.Add(PointMoments());
  EXPECT_EQ(moments.MeanVariance(), 0);
}

TEST(PointMoments, PartsMergeToTheVarianceOfTheWhole) {
  Rng rng(7);
  const int d = 5;
  const int64_t n = 10007;
  std::vector<double> values(n * d);
  // Large offsets, where a one-pass sum of squares would lose the variance.
  for (int64_t i = 0; i < n; ++i) {
    for (int l = 0; l < d; ++l) values[i * d + l] = 1e6 * (l + 1) + rng.Normal() * (l + 1);
  }
  PointMoments whole, merged;
  whole.Add(values.data(), n, d);
  for (int64_t first = 0; first < n; first += 1000) {
    PointMoments part;
    part.Add(values.data() + first * d, std::min<int64_t>(1000, n - first), d);
    merged.Add(part);
  }
  const double plain = PlainMeanVariance(values, d);
  EXPECT_NEAR(whole.MeanVariance(), plain, 1e-9 * plain);
  EXPECT_NEAR(merged.MeanVariance(), plain, 1e-9 * plain);
  EXPECT_EQ(merged.count(), n);
}

// Sparse rows' moments are those of the rows made dense (zeros counted
// without being read), a row without nonzeros and a column without any
// included.
TEST(PointMoments, SparseRowsHaveTheMomentsOfTheirDenseRows) {
  Rng rng(11);
  const int d = 7;
  const int64_t n = 503;
  std::vector<double> dense(n * d, 0);
  std::vector<int64_t> indptr = {0};
  std::vector<int32_t> indices;
  std::vector<double> values;
  for (int64_t i = 0; i < n; ++i) {
    // Column 6 stays empty; every 10th row too.
    for (int l = 0; l < d - 1 && i % 10 != 0; ++l) {
      if (rng.Uniform() < 0.3) {
        dense[i * d + l] = 5 + rng.Normal() * (l + 1);
        indices.push_back(l);
        values.push_back(dense[i * d + l]);
      }
    }
    indptr.push_back(static_cast<int64_t>(indices.size()));
  }
  PointMoments sparse;
  // In two parts, the second's offsets from 0 as a chunk's are.
  const int64_t half = n / 2;
  sparse.AddSparse(indptr.data(), indices.data(), values.data(), half, d);
  std::vector<int64_t> rest(indptr.begin() + half, indptr.end());
  for (int64_t& offset : rest) offset -= indptr[half];
  sparse.AddSparse(rest.data(), indices.data() + indptr[half], values.data() + indptr[half],
                   n - half, d);
  const double plain = PlainMeanVariance(dense, d);
  EXPECT_NEAR(sparse.MeanVariance(), plain, 1e-12 * plain);
  EXPECT_EQ(sparse.count(), n);
}

}  // namespace
}  // namespace kmt
