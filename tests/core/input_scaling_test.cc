#include "core/input_scaling.h"

#include <gtest/gtest.h>

namespace kmt {
namespace {

TEST(InputScaling, NamesRoundTrip) {
  for (InputScaling s : {InputScaling::kNone, InputScaling::kMinMax}) {
    EXPECT_EQ(*ParseInputScaling(InputScalingName(s)), s);
  }
  EXPECT_EQ(ParseInputScaling("zscore").status().message(),
            "unknown input scaling 'zscore', expected none or min-max");
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

}  // namespace
}  // namespace kmt
