#include "reference/lloyd.h"

#include <gtest/gtest.h>

#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

TEST(Lloyd, WorkedExample) {
  Matrix<double> points(1, 5);
  points << 0, 1, 2, 10, 12;
  Matrix<double> init(1, 2);
  init << 0, 1;
  const auto history = ReferenceLloyd(points, init, 3);
  ASSERT_EQ(history.size(), 3u);
  // Iteration 1: {0} and {1, 2, 10, 12} -> centers 0 and 6.25.
  EXPECT_EQ(history[0].labels, (Labels{0, 1, 1, 1, 1}));
  EXPECT_EQ(history[0].centers(0, 0), 0);
  EXPECT_EQ(history[0].centers(0, 1), 6.25);
  // Iteration 2: {0, 1, 2} and {10, 12} -> 1 and 11, then stable.
  EXPECT_EQ(history[1].labels, (Labels{0, 0, 0, 1, 1}));
  EXPECT_EQ(history[1].centers(0, 0), 1);
  EXPECT_EQ(history[1].centers(0, 1), 11);
  EXPECT_EQ(history[2].centers, history[1].centers);
  EXPECT_EQ(history[2].objective, 1 + 0 + 1 + 1 + 1);
}

TEST(Lloyd, ObjectiveNeverIncreases) {
  const Clusters<double> task = GaussianClusters<double>({.n = 2000, .d = 6, .k = 9}, 4);
  const auto history = ReferenceLloyd(task.points, Matrix<double>(task.points.leftCols(9)), 15);
  for (size_t t = 1; t < history.size(); ++t) {
    EXPECT_LE(history[t].objective, history[t - 1].objective * (1 + 1e-12));
  }
}

}  // namespace
}  // namespace kmt
