#include "core/init.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "core/assign.h"
#include "core/random.h"
#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

// Index of the point a center copies, or -1.
template <typename Scalar>
int PointIndex(const Matrix<Scalar>& points, const Vector<Scalar>& center) {
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    if (points.col(i) == center) return static_cast<int>(i);
  }
  return -1;
}

TEST(Init, RandomSubsetPicksDistinctPointsReproducibly) {
  const Matrix<double> points = GaussianClusters<double>({.n = 300, .d = 3, .k = 4}, 1).points;
  const Matrix<double> a = *InitialCenters(points, 40, InitMethod::kRandomSubset, 9);
  std::set<int> picked;
  for (int j = 0; j < 40; ++j) picked.insert(PointIndex<double>(points, a.col(j)));
  EXPECT_EQ(picked.size(), 40u);
  EXPECT_EQ(picked.count(-1), 0u);
  EXPECT_EQ(*InitialCenters(points, 40, InitMethod::kRandomSubset, 9), a);
  EXPECT_NE(*InitialCenters(points, 40, InitMethod::kRandomSubset, 10), a);
  // k = n takes every point.
  EXPECT_EQ(InitialCenters(points, 300, InitMethod::kRandomSubset, 1)->cols(), 300);
}

TEST(Init, RandomSubsetIndicesAreTheDrawsOfAPlainShuffleAndOfWeightedKeys) {
  // Unweighted: a Fisher-Yates shuffle over the whole index list, stopped
  // after k swaps, with the same generator's draws.
  for (const int64_t n : {1, 10, 1000}) {
    const int k = static_cast<int>(std::min<int64_t>(n, 7));
    Rng rng(11);
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    for (int j = 0; j < k; ++j) std::swap(order[j], order[j + rng.Below(n - j)]);
    EXPECT_EQ(RandomSubsetIndices<float>(n, k, 11, nullptr),
              std::vector<int64_t>(order.begin(), order.begin() + k));
  }
  // Weighted: the k largest keys log(u) / w over the points of positive
  // weight, one draw per point, ties to the lower index.
  const int64_t n = 500;
  std::vector<float> weights(n);
  for (int64_t i = 0; i < n; ++i)
    weights[i] = i % 4 == 0 ? 0.0f : 0.25f * static_cast<float>(i % 9);
  Rng rng(12);
  std::vector<std::pair<double, int64_t>> keys;
  for (int64_t i = 0; i < n; ++i) {
    const double u = 1.0 - rng.Uniform();
    if (weights[i] > 0) keys.push_back({-std::log(u) / weights[i], i});
  }
  std::sort(keys.begin(), keys.end());
  std::vector<int64_t> want;
  for (int j = 0; j < 20; ++j) want.push_back(keys[j].second);
  EXPECT_EQ(RandomSubsetIndices<float>(n, 20, 12, weights.data()), want);
  // The engine's "random" takes those columns.
  Matrix<float> points(1, n);
  for (int64_t i = 0; i < n; ++i) points(0, i) = static_cast<float>(i);
  const Vector<float> w = Eigen::Map<const Vector<float>>(weights.data(), n);
  const Matrix<float> centers =
      *ChooseInitialCenters<float>(points, 20, InitMethod::kRandomSubset, 12, {}, &w);
  for (int j = 0; j < 20; ++j) EXPECT_EQ(centers(0, j), static_cast<float>(want[j]));
  // Fewer points of positive weight than k: those there are.
  std::vector<float> few(n, 0.0f);
  few[3] = few[9] = 1;
  EXPECT_EQ(RandomSubsetIndices<float>(n, 5, 1, few.data()).size(), 2u);
}

TEST(Init, KMeansPlusPlusSpreadsOverSeparatedClusters) {
  // Eight tight, well separated clusters: greedy k-means++ takes one point
  // from each, for every seed.
  const Clusters<float> task =
      GaussianClusters<float>({.n = 4000, .d = 5, .k = 8, .scale = 0.002}, 3);
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const Matrix<float> c = *InitialCenters(task.points, 8, InitMethod::kKMeansPlusPlus, seed);
    std::set<int> components;
    for (int j = 0; j < 8; ++j) {
      const int i = PointIndex<float>(task.points, c.col(j));
      ASSERT_GE(i, 0);
      components.insert(task.components[i]);
    }
    EXPECT_EQ(components.size(), 8u) << "seed " << seed;
  }
  EXPECT_EQ(*InitialCenters(task.points, 8, InitMethod::kKMeansPlusPlus, 4),
            *InitialCenters(task.points, 8, InitMethod::kKMeansPlusPlus, 4));
}

TEST(Init, KMeansPlusPlusHandlesDuplicatePoints) {
  const Matrix<double> points = Matrix<double>::Ones(2, 20);
  const Matrix<double> c = *InitialCenters(points, 3, InitMethod::kKMeansPlusPlus, 1);
  EXPECT_EQ(c, Matrix<double>::Ones(2, 3));
}

// Plain k-means++ written out directly: the first center a point drawn
// uniformly, each next one the point whose range of the running sum of
// squared distances to the nearest chosen center holds a uniform draw.
Matrix<double> StraightforwardKMeansPlusPlus(const Matrix<double>& points, int k, uint64_t seed) {
  Rng rng(seed);
  const Eigen::Index n = points.cols();
  Matrix<double> centers(points.rows(), k);
  centers.col(0) = points.col(static_cast<Eigen::Index>(rng.Below(n)));
  std::vector<double> nearest(n, INFINITY);
  for (int j = 1; j < k; ++j) {
    double total = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      nearest[i] = std::min(nearest[i], (points.col(i) - centers.col(j - 1)).squaredNorm());
      total += nearest[i];
    }
    const double target = rng.Uniform() * total;
    double running = 0;
    Eigen::Index pick = n - 1;
    for (Eigen::Index i = 0; i < n; ++i) {
      running += nearest[i];
      if (running > target) {
        pick = i;
        break;
      }
    }
    centers.col(j) = points.col(pick);
  }
  return centers;
}

TEST(Init, PlainKMeansPlusPlusIsOneDSquaredDrawPerCenter) {
  const Matrix<double> points = GaussianClusters<double>({.n = 700, .d = 5, .k = 8}, 4).points;
  int differ_from_greedy = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SCOPED_TRACE(seed);
    const Matrix<double> plain = *InitialCenters(points, 8, InitMethod::kPlainKMeansPlusPlus, seed);
    EXPECT_EQ(plain, StraightforwardKMeansPlusPlus(points, 8, seed));
    EXPECT_EQ(*InitialCenters(points, 8, InitMethod::kPlainKMeansPlusPlus, seed), plain);
    // The same first draw as greedy k-means++; greedy then picks the best of
    // 2 + floor(ln 8) = 4 candidates, so the rest mostly differs.
    const Matrix<double> greedy = *InitialCenters(points, 8, InitMethod::kKMeansPlusPlus, seed);
    EXPECT_EQ(plain.col(0), greedy.col(0));
    if (plain != greedy) ++differ_from_greedy;
  }
  EXPECT_GT(differ_from_greedy, 15);
}

TEST(Init, PlainKMeansPlusPlusDrawsWithSquaredDistanceProbabilities) {
  // Four points on a line, two of them equal. The first center is uniform
  // over the points; the second has value b with probability
  // (points of value b) (b - a)^2 / sum over points (x - a)^2, given the
  // first's value a, so a copy of the first center is never drawn.
  Matrix<double> points(1, 4);
  points << 0, 0, 2, 5;
  const double values[] = {0, 2, 5}, copies[] = {2, 1, 1};
  const auto value_index = [&](double v) { return v == 0 ? 0 : v == 2 ? 1 : 2; };
  const int draws = 40000;
  int count[3][3] = {};
  for (uint64_t seed = 0; seed < draws; ++seed) {
    const Matrix<double> c = *InitialCenters(points, 2, InitMethod::kPlainKMeansPlusPlus, seed);
    ++count[value_index(c(0, 0))][value_index(c(0, 1))];
  }
  for (int a = 0; a < 3; ++a) {
    double sum = 0;
    for (int b = 0; b < 3; ++b) sum += copies[b] * std::pow(values[b] - values[a], 2);
    for (int b = 0; b < 3; ++b) {
      SCOPED_TRACE(testing::Message() << "first " << values[a] << " second " << values[b]);
      const double p = copies[a] / 4 * copies[b] * std::pow(values[b] - values[a], 2) / sum;
      if (a == b) {
        EXPECT_EQ(count[a][b], 0);
      } else {
        // Binomial counts: within 4.5 standard deviations.
        EXPECT_NEAR(count[a][b], p * draws, 4.5 * std::sqrt(draws * p * (1 - p)));
      }
    }
  }
}

TEST(Init, RejectsImpossibleRequests) {
  const Matrix<double> points = Matrix<double>::Zero(2, 5);
  EXPECT_EQ(InitialCenters(points, 6, InitMethod::kRandomSubset, 1).status().message(),
            "n = 5 points is fewer than k = 6 clusters");
  EXPECT_EQ(InitialCenters(points, 0, InitMethod::kKMeansPlusPlus, 1).status().message(),
            "k = 0, must be at least 1");
  EXPECT_EQ(ParseInitMethod("forgy").status().message(),
            "unknown initialisation 'forgy', expected random, kmeans++ (or k-means++), "
            "plain-kmeans++ or two-level");
  for (InitMethod m : {InitMethod::kRandomSubset, InitMethod::kKMeansPlusPlus,
                       InitMethod::kPlainKMeansPlusPlus, InitMethod::kTwoLevel}) {
    EXPECT_EQ(*ParseInitMethod(InitMethodName(m)), m);
  }
  EXPECT_EQ(*ParseInitMethod("plain-kmeans++"), InitMethod::kPlainKMeansPlusPlus);
  EXPECT_EQ(*ParseInitMethod("k-means++"), InitMethod::kKMeansPlusPlus);
}

TEST(TwoLevel, CoarseCountIsTheFloorOfTheSquareRoot) {
  for (const auto& [k, coarse] : std::vector<std::pair<int, int>>{
           {1, 1}, {2, 1}, {3, 1}, {4, 2}, {15, 3}, {16, 4}, {65535, 255}, {65536, 256}}) {
    SCOPED_TRACE(k);
    EXPECT_EQ(TwoLevelCoarseCount(k), coarse);
  }
}

TEST(TwoLevel, FineCountsAreDHondtsFromOneEachUpToTheCapacities) {
  // One each, then 60/2, 60/3, 60/4 = 30/2 (tie: the lower index), 60/4,
  // 60/5, 60/6 = 30/3, 60/6: exactly in proportion here.
  EXPECT_EQ(TwoLevelFineCounts({10, 30, 0, 60}, {10, 30, 0, 60}, 10),
            (std::vector<int>{1, 3, 0, 6}));
  // Capacities bind: a cluster never gets more centers than points.
  EXPECT_EQ(TwoLevelFineCounts({100, 1}, {2, 1}, 3), (std::vector<int>{2, 1}));
  EXPECT_EQ(TwoLevelFineCounts({5, 7, 9}, {5, 7, 9}, 21), (std::vector<int>{5, 7, 9}));
  // Weights, not point counts, set the shares.
  EXPECT_EQ(TwoLevelFineCounts({1, 3}, {50, 50}, 8), (std::vector<int>{2, 6}));

  Rng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(trial);
    const int clusters = 1 + static_cast<int>(rng.Below(40));
    std::vector<double> sizes(clusters);
    std::vector<int64_t> capacities(clusters);
    int64_t total = 0;
    int positive = 0;
    for (int c = 0; c < clusters; ++c) {
      capacities[c] = c % 7 == 3 ? 0 : static_cast<int64_t>(rng.Below(500));
      sizes[c] = static_cast<double>(capacities[c]);
      total += capacities[c];
      positive += capacities[c] > 0;
    }
    if (positive == 0) continue;
    const int k = positive + static_cast<int>(rng.Below(total - positive + 1));
    const std::vector<int> counts = TwoLevelFineCounts(sizes, capacities, k);
    EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), 0), k);
    for (int c = 0; c < clusters; ++c) {
      EXPECT_EQ(counts[c] >= 1, capacities[c] > 0) << c;
      EXPECT_LE(counts[c], capacities[c]) << c;
      // D'Hondt is monotone: a larger cluster never gets fewer centers
      // (the capacities are the sizes here).
      for (int b = 0; b < clusters; ++b) {
        if (sizes[b] > sizes[c]) {
          EXPECT_GE(counts[b], counts[c]) << b << " " << c;
        }
      }
    }
  }
}

template <typename Scalar>
std::set<std::vector<Scalar>> DistinctColumns(const Matrix<Scalar>& m) {
  std::set<std::vector<Scalar>> distinct;
  for (Eigen::Index j = 0; j < m.cols(); ++j)
    distinct.insert(std::vector<Scalar>(m.col(j).data(), m.col(j).data() + m.rows()));
  return distinct;
}

template <typename Scalar>
void TwoLevelIsDeterministicWithKDistinctCenters() {
  const Matrix<Scalar> points = GaussianClusters<Scalar>({.n = 20000, .d = 8, .k = 30}, 4).points;
  for (const int k : {1, 2, 37, 300}) {
    SCOPED_TRACE(k);
    const Matrix<Scalar> a = *InitialCenters(points, k, InitMethod::kTwoLevel, 5);
    ASSERT_EQ(a.rows(), 8);
    ASSERT_EQ(a.cols(), k);
    EXPECT_TRUE(a.allFinite());
    EXPECT_EQ(DistinctColumns(a).size(), static_cast<size_t>(k));
    EXPECT_EQ(*InitialCenters(points, k, InitMethod::kTwoLevel, 5), a);
    if (k > 1) {
      EXPECT_NE(*InitialCenters(points, k, InitMethod::kTwoLevel, 6), a);
    }
    // Better than a random subset, as a seeding should be, on these
    // well-separated components.
    if (k == 37) {
      EXPECT_LT(Objective(points, a),
                Objective(points, *InitialCenters(points, k, InitMethod::kRandomSubset, 5)));
    }
  }
}

TEST(TwoLevel, IsDeterministicWithKDistinctCenters) {
  TwoLevelIsDeterministicWithKDistinctCenters<double>();
  TwoLevelIsDeterministicWithKDistinctCenters<float>();
}

TEST(TwoLevel, KEqualToNGivesEveryPointACenterOfItsOwn) {
  // Every coarse cluster's fine count is its size, so each fine center is
  // one point, and the centers are the points in some order.
  const Matrix<double> points = GaussianClusters<double>({.n = 200, .d = 3, .k = 5}, 2).points;
  const Matrix<double> centers = *InitialCenters(points, 200, InitMethod::kTwoLevel, 1);
  EXPECT_EQ(DistinctColumns(centers), DistinctColumns(points));
}

TEST(TwoLevel, PointsOfWeightZeroTakeNoPart) {
  // Half the points far away with weight 0: no center goes near them.
  const Matrix<double> near = GaussianClusters<double>({.n = 3000, .d = 4, .k = 8}, 7).points;
  Matrix<double> points(4, 6000);
  points << near, near.array() + 100.0;
  Vector<double> weights(6000);
  weights << Vector<double>::Constant(3000, 2.0), Vector<double>::Zero(3000);
  const Matrix<double> centers =
      *ChooseInitialCenters(points, 50, InitMethod::kTwoLevel, 3, {}, &weights);
  ASSERT_EQ(centers.cols(), 50);
  EXPECT_LE(centers.maxCoeff(), 1.0);
  EXPECT_EQ(DistinctColumns(centers).size(), 50u);
  EXPECT_EQ(
      ChooseInitialCenters(points, 3001, InitMethod::kTwoLevel, 3, {}, &weights).status().message(),
      "only 3000 points have a positive weight, fewer than k = 3001");
}

TEST(TwoLevel, ReachesSixteenThousandCenters) {
  // The scale it is for: k = 16,384 of 100,000 points (its time is a
  // benchmark's figure, not checked here).
  const Matrix<float> points = GaussianClusters<float>({.n = 100000, .d = 16, .k = 64}, 8).points;
  const Matrix<float> centers = *InitialCenters(points, 16384, InitMethod::kTwoLevel, 9);
  ASSERT_EQ(centers.cols(), 16384);
  EXPECT_TRUE(centers.allFinite());
  EXPECT_EQ(DistinctColumns(centers).size(), 16384u);
}

}  // namespace
}  // namespace kmt
