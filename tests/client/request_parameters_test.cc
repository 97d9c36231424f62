#include "client/request_parameters.h"

#include <cmath>

#include "gtest/gtest.h"

namespace kmt {
namespace {

TEST(RequestParameters, PairsBecomeNamedValues) {
  const auto parsed = ParseParameters("beta=2, tau = 0.5,gamma=inf");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size(), 3u);
  EXPECT_EQ(parsed->at("beta"), 2);
  EXPECT_EQ(parsed->at("tau"), 0.5);
  EXPECT_TRUE(std::isinf(parsed->at("gamma")));
}

TEST(RequestParameters, EmptyIsNoParameter) {
  EXPECT_TRUE(ParseParameters("")->empty());
  EXPECT_TRUE(ParseParameters("  ")->empty());
}

TEST(RequestParameters, MalformedPairsAndRepeatsAreNamed) {
  EXPECT_EQ(ParseParameters("beta").status().message(),
            "parameter 'beta' is not name=value with a number for the value");
  EXPECT_EQ(ParseParameters("beta=x").status().message(),
            "parameter 'beta=x' is not name=value with a number for the value");
  EXPECT_EQ(ParseParameters("=2").status().message(),
            "parameter '=2' is not name=value with a number for the value");
  EXPECT_EQ(ParseParameters("beta=1,beta=2").status().message(), "parameter beta is given twice");
}

}  // namespace
}  // namespace kmt
