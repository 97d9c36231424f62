#include "core/init.h"

#include <gtest/gtest.h>

#include <set>

#include "learn/task_generator.h"

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
  const Matrix<double> points = GenerateTask<double>({.n = 300, .d = 3, .k = 4}, 1).points;
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

TEST(Init, KMeansPlusPlusSpreadsOverSeparatedClusters) {
  // Eight tight, well separated clusters: greedy k-means++ takes one point
  // from each, for every seed.
  const Task<float> task = GenerateTask<float>({.n = 4000, .d = 5, .k = 8, .scale = 0.002}, 3);
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

TEST(Init, RejectsImpossibleRequests) {
  const Matrix<double> points = Matrix<double>::Zero(2, 5);
  EXPECT_EQ(InitialCenters(points, 6, InitMethod::kRandomSubset, 1).status().message(),
            "n = 5 points is fewer than k = 6 clusters");
  EXPECT_EQ(InitialCenters(points, 0, InitMethod::kKMeansPlusPlus, 1).status().message(),
            "k = 0, must be at least 1");
  EXPECT_EQ(ParseInitMethod("forgy").status().message(),
            "unknown initialisation 'forgy', expected random or kmeans++");
  EXPECT_EQ(*ParseInitMethod("kmeans++"), InitMethod::kKMeansPlusPlus);
}

}  // namespace
}  // namespace kmt
