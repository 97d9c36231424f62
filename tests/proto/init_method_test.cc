// The translation between the wire's Init and the core's InitMethod.
#include "proto/init_method.h"

#include <gtest/gtest.h>

namespace kmt {
namespace {

TEST(InitMethodProto, EveryMethodGoesThereAndBack) {
  for (InitMethod method : {InitMethod::kRandomSubset, InitMethod::kKMeansPlusPlus,
                            InitMethod::kPlainKMeansPlusPlus, InitMethod::kTwoLevel}) {
    SCOPED_TRACE(InitMethodName(method));
    const absl::StatusOr<InitMethod> back = InitFromProto(InitToProto(method));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, method);
  }
  EXPECT_EQ(InitToProto(InitMethod::kKMeansPlusPlus), v1::INIT_KMEANS_PLUS_PLUS);
  EXPECT_EQ(InitToProto(InitMethod::kRandomSubset), v1::INIT_RANDOM);
  EXPECT_EQ(InitToProto(InitMethod::kPlainKMeansPlusPlus), v1::INIT_PLAIN_KMEANS_PLUS_PLUS);
  EXPECT_EQ(InitToProto(InitMethod::kTwoLevel), v1::INIT_TWO_LEVEL);
}

TEST(InitMethodProto, GivenAndUnknownValuesAreNoMethod) {
  EXPECT_EQ(InitFromProto(v1::INIT_GIVEN).status().message(),
            "INIT_GIVEN names no method: the centers are given");
  EXPECT_EQ(InitFromProto(17).status().message(), "unknown init 17");
  EXPECT_EQ(InitFromProto(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kmt
