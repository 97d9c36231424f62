// Paper A's numerical validation: d = 2, n = 10,000, k = 5 Gaussian clusters
// (scale 0.1 around U(0,1)^2 means, min-max scaled), 10 layers. With a finite
// softmax temperature (beta = 1e4) almost every point ends with a discrete
// assignment and the objective follows Lloyd's; with hardmax the circuit is
// Lloyd's exactly.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/constructions.h"
#include "core/init.h"
#include "core/lloyd.h"
#include "core/transformer.h"
#include "learn/task_generator.h"

namespace kmt {
namespace {

constexpr int kLayers = 10;

struct PaperData {
  Matrix<double> points;
  Matrix<double> init;
  std::vector<LloydIteration<double>> lloyd;
};

const PaperData& PaperSetup() {
  static const PaperData* setup = [] {
    auto* s = new PaperData;
    s->points = GenerateTask<double>({.n = 10000, .d = 2, .k = 5, .scale = 0.1}, 2025).points;
    s->init = *InitialCenters(s->points, 5, InitMethod::kRandomSubset, 2025);
    s->lloyd = ReferenceLloyd(s->points, s->init, kLayers);
    return s;
  }();
  return *setup;
}

TEST(PaperAValidation, SoftmaxBeta1e4FollowsLloyd) {
  const PaperData& s = PaperSetup();
  const Model<double> model = *LloydConstruction<double>(
      2, 5, {.embedding = Embedding::kOneHot, .theta3 = Theta3Form::kLinear, .beta = 1e4});
  const RunResult<double> run =
      *RunTransformer(model, s.points, s.init, {.layers = kLayers, .record_trajectory = true});
  ASSERT_EQ(run.path, Path::kDense);

  std::printf("layer  transformer(beta=1e4)  Lloyd's      relative gap\n");
  for (int t = 0; t < kLayers; ++t) {
    const double got = run.layer_objectives[t], want = s.lloyd[t].objective;
    std::printf("%5d  %20.10f  %12.10f  %.2e\n", t + 1, got, want, std::abs(got - want) / want);
    // A soft boundary moves the centers a little: the objective stays within
    // 1e-3 of Lloyd's at every layer.
    EXPECT_NEAR(got, want, 1e-3 * want) << "layer " << t + 1;
  }
  // A point's assignment is discrete when its register is one-hot to within
  // a tolerance; the paper does not state its tolerance, so several are shown.
  const Matrix<double>& registers = run.trajectory.back().registers;
  const double tolerances[] = {1e-2, 1e-3, 1e-6, 0};
  int counts[4] = {0, 0, 0, 0};
  for (Eigen::Index i = 0; i < registers.cols(); ++i) {
    const double top = registers.col(i).maxCoeff();
    for (int c = 0; c < 4; ++c) counts[c] += top >= 1 - tolerances[c];
  }
  std::printf("discrete assignments after %d layers (paper A reports 9921 of 10000):\n", kLayers);
  for (int c = 0; c < 4; ++c) {
    std::printf("  one-hot to within %g: %d of 10000\n", tolerances[c], counts[c]);
  }
  // At 1e-2 the count lands next to the paper's (9923 with this seed).
  const int discrete = counts[0];
  RecordProperty("discrete_assignments", discrete);
  EXPECT_GE(discrete, 9800);
  EXPECT_LT(discrete, 10000);  // softmax does leave boundary points soft
}

TEST(PaperAValidation, HardmaxIsLloydExactly) {
  const PaperData& s = PaperSetup();
  for (Theta3Form form : {Theta3Form::kLinear, Theta3Form::kHardmax}) {
    const Model<double> model = *LloydConstruction<double>(2, 5, {.theta3 = form});
    for (Path path : {Path::kFast, Path::kDense}) {
      const RunResult<double> run = *RunTransformer(
          model, s.points, s.init, {.layers = kLayers, .path = path, .record_trajectory = true});
      for (int t = 0; t < kLayers; ++t) {
        SCOPED_TRACE(t + 1);
        EXPECT_EQ(run.trajectory[t].labels, s.lloyd[t].labels);
        EXPECT_LE((run.trajectory[t].centers - s.lloyd[t].centers).norm(),
                  1e-12 * s.lloyd[t].centers.norm());
      }
    }
  }
}

}  // namespace
}  // namespace kmt
