#include "core/input_scaling.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kmt {
namespace {

TEST(InputScaling, NamesRoundTrip) {
  for (InputScaling s : {InputScaling::kNone, InputScaling::kMinMax, InputScaling::kGlobalMinMax}) {
    EXPECT_EQ(*ParseInputScaling(InputScalingName(s)), s);
  }
  EXPECT_EQ(ParseInputScaling("zscore").status().message(),
            "unknown input scaling 'zscore', expected none, min-max or global-min-max");
}

TEST(InputScaling, NoneIsTheIdentity) {
  Matrix<double> points(2, 3);
  points << 1, 2, 3, -4, 5, 60;
  const InputMap<double> map(InputScaling::kNone, points);
  EXPECT_TRUE(map.identity());
  EXPECT_EQ(map.ToModel(points), points);
  EXPECT_EQ(map.ToCaller(points), points);
}

TEST(InputScaling, MinMaxMapsEveryDimensionOntoZeroOneAndBack) {
  Matrix<double> points(3, 4);
  points << 1, 3, 2, 5,  //
      -10, 10, 0, 0,     //
      7, 7, 7, 7;        // constant: maps to 0
  const InputMap<double> map(InputScaling::kMinMax, points);
  EXPECT_FALSE(map.identity());
  Matrix<double> expected(3, 4);
  expected << 0, 0.5, 0.25, 1,  //
      0, 1, 0.5, 0.5,           //
      0, 0, 0, 0;
  EXPECT_EQ(map.ToModel(points), expected);
  // Back: the constant dimension returns to its value.
  EXPECT_EQ(map.ToCaller(expected), points);
  // Centers follow the same map.
  Matrix<double> center(3, 1);
  center << 3, 5, 7;
  EXPECT_EQ(map.ToCaller(map.ToModel(center)), center);
}

TEST(InputScaling, GlobalMinMaxScalesEveryDimensionByTheLargestRange) {
  Matrix<double> points(3, 4);
  points << 1, 3, 2, 5,  // range 4
      -10, 10, 0, 0,     // range 20: the scale
      7, 7, 7, 7;        // constant: maps to 0
  const InputMap<double> map(InputScaling::kGlobalMinMax, points);
  Matrix<double> expected(3, 4);
  expected << 0, 0.1, 0.05, 0.2,  //
      0, 1, 0.5, 0.5,             //
      0, 0, 0, 0;
  EXPECT_LE((map.ToModel(points) - expected).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_LE((map.ToCaller(map.ToModel(points)) - points).cwiseAbs().maxCoeff(), 1e-14);
  // The same points scaled uniformly and moved look the same to the model:
  // the caller's k-means problem is the model's, up to that map.
  const Matrix<double> moved =
      (3.5 * points).colwise() + (Vector<double>(3) << -2, 40, 0.25).finished();
  const InputMap<double> moved_map(InputScaling::kGlobalMinMax, moved);
  EXPECT_LE((moved_map.ToModel(moved) - map.ToModel(points)).cwiseAbs().maxCoeff(), 1e-14);
  // Distances keep their ratios (the per-dimension map does not).
  const auto ratio = [](const Matrix<double>& m) {
    return (m.col(1) - m.col(0)).squaredNorm() / (m.col(3) - m.col(0)).squaredNorm();
  };
  EXPECT_NEAR(ratio(map.ToModel(points)), ratio(points), 1e-12);
  EXPECT_GT(std::abs(ratio(InputMap<double>(InputScaling::kMinMax, points).ToModel(points)) -
                     ratio(points)),
            0.1);
}

}  // namespace
}  // namespace kmt
