#include "core/parameters.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace kmt {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<ParameterSpec>& Specs() {
  static const std::vector<ParameterSpec> specs = {
      {.name = "beta", .default_value = 2, .min = 0, .max = kInf, .min_exclusive = true},
      {.name = "tau", .default_value = 1, .min = 0, .max = kInf, .max_exclusive = true},
  };
  return specs;
}

TEST(Parameters, ValuesWithinTheirRangesAreAccepted) {
  EXPECT_TRUE(ResolveParameters("m", Specs(), {}).ok());
  EXPECT_TRUE(ResolveParameters("m", Specs(), {{"beta", kInf}, {"tau", 0}}).ok());
  EXPECT_TRUE(ResolveParameters("m", Specs(), {{"beta", 1e-300}}).ok());
}

TEST(Parameters, EachBoundIsNamedWithTheRange) {
  EXPECT_EQ(ResolveParameters("m", Specs(), {{"beta", 0}}).status().message(),
            "beta = 0 is out of range for m: (0, inf]");
  EXPECT_EQ(ResolveParameters("m", Specs(), {{"tau", -1}}).status().message(),
            "tau = -1 is out of range for m: [0, inf)");
  EXPECT_EQ(ResolveParameters("m", Specs(), {{"tau", kInf}}).status().message(),
            "tau = inf is out of range for m: [0, inf)");
  EXPECT_EQ(ResolveParameters("m", Specs(), {{"tau", std::nan("")}}).status().message(),
            "tau = nan is out of range for m: [0, inf)");
}

TEST(Parameters, AnUndeclaredNameIsRefusedWithTheHint) {
  EXPECT_EQ(ResolveParameters("m", Specs(), {{"gamma", 3}}).status().message(),
            "gamma = 3: model m has no parameter gamma");
  EXPECT_EQ(ResolveParameters("m", {}, {{"beta", 3}}, "try n").status().message(),
            "beta = 3: model m has no parameter beta (try n)");
}

TEST(Parameters, AbsentNamesTakeTheirDefaultsAndPresentOnesKeepTheirValue) {
  EXPECT_EQ(ResolveParameters("m", Specs(), {}).value(),
            (ParameterValues{{"beta", 2}, {"tau", 1}}));
  EXPECT_EQ(ResolveParameters("m", Specs(), {{"tau", 0}}).value(),
            (ParameterValues{{"beta", 2}, {"tau", 0}}));
}

}  // namespace
}  // namespace kmt
