#include "core/cluster_sums.h"

#include <gtest/gtest.h>

#include "core/random.h"
#include "tests/support/simd_levels.h"

namespace kmt {
namespace {

TEST(ClusterSums, CountsAndSumsPerLabel) {
  AtEachSimdLevel([&] {
    Matrix<double> points(2, 5);
    points << 1, 2, 3, 4, 5,  //
        10, 20, 30, 40, 50;
    ClusterSums sums(2, 3);
    AccumulateClusterSums(points, Labels{0, 2, 0, 2, 2}, &sums);
    EXPECT_EQ(sums.counts, (std::vector<int64_t>{2, 0, 3}));
    Matrix<double> expected(2, 3);
    expected << 4, 0, 11,  //
        40, 0, 110;
    EXPECT_EQ(sums.sums, expected);
  });
}

TEST(ClusterSums, BatchesAddUpToTheWholeAndTheThreadCountDoesNotMatter) {
  AtEachSimdLevel([&] {
    Rng rng(1);
    const int n = 100000, d = 3, k = 7;
    Matrix<float> points(d, n);
    Labels labels(n);
    for (int i = 0; i < n; ++i) {
      for (int l = 0; l < d; ++l) points(l, i) = static_cast<float>(rng.Normal());
      labels[i] = static_cast<int>(rng.Below(k));
    }
    ClusterSums whole(d, k), halves(d, k);
    AccumulateClusterSums(points, labels, &whole);
    const Matrix<float> first = points.leftCols(40000), second = points.rightCols(60000);
    AccumulateClusterSums(first, Labels(labels.begin(), labels.begin() + 40000), &halves);
    AccumulateClusterSums(second, Labels(labels.begin() + 40000, labels.end()), &halves);
    EXPECT_EQ(whole.counts, halves.counts);
    EXPECT_LE((whole.sums - halves.sums).norm(), 1e-9 * whole.sums.norm());
    ClusterSums again(d, k);
    AccumulateClusterSums(points, labels, &again);
    EXPECT_EQ(again.sums, whole.sums);
  });
}

TEST(ClusterSums, MeansReplaceCentersAndEmptyClustersKeepTheirs) {
  AtEachSimdLevel([&] {
    ClusterSums sums(1, 3);
    sums.sums << 6, 0, -3;
    sums.counts = {3, 0, 1};
    sums.weights = {3, 0, 1};  // unweighted points weigh 1 each
    Matrix<double> centers(1, 3);
    centers << 9, 9, 9;
    EXPECT_EQ(ApplyMeans(sums, &centers), 1);
    EXPECT_EQ(centers(0, 0), 2);
    EXPECT_EQ(centers(0, 1), 9);
    EXPECT_EQ(centers(0, 2), -3);
  });
}

}  // namespace
}  // namespace kmt
