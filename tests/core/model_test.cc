#include "core/model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/constructions.h"

namespace kmt {
namespace {

TEST(Model, BlocksAreNamedInTheOrderTheyRun) {
  std::vector<std::string> names;
  for (BlockId id : kBlockIds) names.emplace_back(BlockName(id));
  EXPECT_EQ(names, (std::vector<std::string>{"theta1", "theta2", "theta3", "theta4"}));
  LayerWeights<double> w;
  w[BlockId::kCentersToPoints].beta = 3;
  EXPECT_EQ(w.blocks[2].beta, 3);
}

TEST(Model, ValidationNamesTheLayerAndBlock) {
  Model<double> m = *LloydConstruction<double>(2, 3, {});
  EXPECT_TRUE(ValidateModel(m).ok());
  EXPECT_EQ(m.dim(), 5);
  m.layers.push_back(m.layers[0]);
  m.layers[1][BlockId::kCentersToCenters].bQ.resize(4);
  EXPECT_EQ(ValidateModel(m).message(),
            "layer 1 theta4: biases have 4, 5, 5 entries; tokens have 5 dimensions");
  m.layers.pop_back();
  m.layers[0][BlockId::kPointsToPoints].K(0, 1) = NAN;
  EXPECT_EQ(ValidateModel(m).message(), "layer 0 theta2: weights contain NaN or Inf");
  m = *LloydConstruction<double>(2, 3, {});
  m.k = 0;
  EXPECT_EQ(ValidateModel(m).message(), "model k = 0, must be at least 1");
  m.k = 3;
  m.layers.clear();
  EXPECT_EQ(ValidateModel(m).message(), "model has no layer weights");
  m = *LloydConstruction<double>(2, 3,
                                 {.theta3 = Theta3Form::kLinear, .score = ScoreKind::kDotProduct});
  EXPECT_TRUE(ValidateModel(m).ok());
  m.layers[0].center_feed_forward->W2.resize(5, 4);
  EXPECT_EQ(ValidateModel(m).message(),
            "layer 0 center feed-forward: feed-forward W2 is 5x4, expected 6x4");
}

}  // namespace
}  // namespace kmt
