#include "core/empty_clusters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/cluster_sums.h"
#include "core/random.h"

namespace kmt {
namespace {

// Points on a small integer grid, so that every squared distance is exact
// and many are equal: the ties decide the order.
Matrix<float> GridPoints(int d, int n, uint64_t seed) {
  Rng rng(seed);
  Matrix<float> points(d, n);
  for (int i = 0; i < n; ++i) {
    for (int l = 0; l < d; ++l) points(l, i) = static_cast<float>(rng.Below(7));
  }
  return points;
}

TEST(EmptyClusters, FarthestPointsAreTheFarthestFromTheirCentersTiesToTheLowerIndex) {
  const int d = 3, n = 400, k = 5;
  const Matrix<float> points = GridPoints(d, n, 3);
  const Matrix<float> centers = GridPoints(d, k, 4);
  Labels labels(n);
  Vector<float> weights(n);
  Rng rng(5);
  for (int i = 0; i < n; ++i) {
    labels[i] = static_cast<int>(rng.Below(k));
    weights[i] = i % 3 == 0 ? 0.0f : 1.5f;
  }
  // The straightforward order: all points of positive weight sorted by
  // distance, farthest first, then by index.
  std::vector<int64_t> want;
  std::vector<double> distance(n);
  for (int i = 0; i < n; ++i) {
    distance[i] = (points.col(i) - centers.col(labels[i])).cast<double>().squaredNorm();
    if (weights[i] > 0) want.push_back(i);
  }
  std::stable_sort(want.begin(), want.end(),
                   [&](int64_t a, int64_t b) { return distance[a] > distance[b]; });
  for (const int64_t m : {0, 1, 7, 50}) {
    std::vector<float> got_distances;
    const std::vector<int64_t> got =
        FarthestPoints(points, &weights, labels, centers, m, &got_distances);
    EXPECT_EQ(got, std::vector<int64_t>(want.begin(), want.begin() + m)) << "m = " << m;
    for (size_t r = 0; r < got.size(); ++r) EXPECT_EQ(got_distances[r], distance[got[r]]);
  }
  // More than there are: every point of positive weight.
  EXPECT_EQ(FarthestPoints(points, &weights, labels, centers, n).size(), want.size());
  // Unweighted: every point is a candidate.
  EXPECT_EQ(FarthestPoints<float>(points, nullptr, labels, centers, n).size(),
            static_cast<size_t>(n));
}

TEST(EmptyClusters, RelocationMovesTheFarthestPointsIntoTheEmptyClusters) {
  const int d = 2, n = 60, k = 4;
  const Matrix<float> points = GridPoints(d, n, 8);
  Matrix<float> centers = points.leftCols(k);
  Labels labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 2;  // clusters 2 and 3 are empty
  ClusterSums sums(d, k);
  AccumulateClusterSums(points, labels, &sums);
  ClusterSums want = sums;
  const std::vector<int64_t> far = FarthestPoints<float>(points, nullptr, labels, centers, 2);
  ASSERT_EQ(far.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const Vector<double> x = points.col(far[r]).cast<double>();
    want.sums.col(labels[far[r]]) -= x;
    want.weights[labels[far[r]]] -= 1;
    --want.counts[labels[far[r]]];
    want.sums.col(2 + r) = x;
    want.weights[2 + r] = 1;
    want.counts[2 + r] = 1;
  }
  EXPECT_EQ(RelocateEmptyClusters<float>(points, nullptr, labels, centers, &sums), 2);
  EXPECT_EQ(sums.sums, want.sums);
  EXPECT_EQ(sums.weights, want.weights);
  EXPECT_EQ(sums.counts, want.counts);
}

}  // namespace
}  // namespace kmt
