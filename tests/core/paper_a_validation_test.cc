// Paper A's numerical validation: d = 2, n = 10,000, k = 5 Gaussian clusters
// (scale 0.1 around U(0,1)^2 means, min-max scaled), random data points as
// initial centers, 10 layers over which Lloyd's centers keep moving. With a
// finite softmax temperature (beta = 1e4) almost every point ends with a
// discrete assignment and the objective follows Lloyd's, in float32 (the
// precision the paper's framework computes in by default) and double; with
// hardmax the circuit is Lloyd's exactly.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/constructions.h"
#include "core/init.h"
#include "core/transformer.h"
#include "reference/lloyd.h"
#include "tests/support/gaussian_clusters.h"

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
    s->points = GaussianClusters<double>({.n = 10000, .d = 2, .k = 5, .scale = 0.1}, 2025).points;
    s->init = *InitialCenters(s->points, 5, InitMethod::kRandomSubset, 2025);
    s->lloyd = ReferenceLloyd(s->points, s->init, kLayers);
    return s;
  }();
  return *setup;
}

TEST(PaperAValidation, LloydsCentersMoveAtEveryLayer) {
  // The validation is only telling if the trajectory is not at rest: as in
  // the paper's figure, Lloyd's centers move at each of the 10 layers.
  const PaperData& s = PaperSetup();
  Matrix<double> previous = s.init;
  for (int t = 0; t < kLayers; ++t) {
    EXPECT_GT((s.lloyd[t].centers - previous).norm(), 1e-4) << "layer " << t + 1;
    previous = s.lloyd[t].centers;
  }
}

// How many points end discrete, by several criteria, for one precision.
struct Discrete {
  int exact = 0;         // the largest register is exactly 1 (the others exactly 0)
  int within[3] = {};    // the largest register within 1e-2, 1e-3, 1e-6 of 1
  int lloyd_labels = 0;  // the largest register is Lloyd's label after 10 layers
};

template <typename Scalar>
Discrete SoftmaxRun(const PaperData& s) {
  const Model<Scalar> model = *LloydConstruction<Scalar>(
      2, 5, {.embedding = Embedding::kOneHot, .theta3 = Theta3Form::kLinear, .beta = 1e4});
  const RunResult<Scalar> run = *RunTransformer(model, Matrix<Scalar>(s.points.cast<Scalar>()),
                                                Matrix<Scalar>(s.init.cast<Scalar>()),
                                                {.layers = kLayers, .record_trajectory = true});
  EXPECT_EQ(run.path, Path::kDense);
  std::printf("%s: layer  transformer(beta=1e4)  Lloyd's      relative gap\n",
              sizeof(Scalar) == 4 ? "float" : "double");
  for (int t = 0; t < kLayers; ++t) {
    const double got = run.layer_objectives[t], want = s.lloyd[t].objective;
    std::printf("%5d  %20.10f  %12.10f  %.2e\n", t + 1, got, want, std::abs(got - want) / want);
    // A soft boundary moves the centers a little: the objective stays within
    // 1e-3 of Lloyd's at every layer.
    EXPECT_NEAR(got, want, 1e-3 * want) << "layer " << t + 1;
  }
  const Matrix<Scalar>& registers = run.trajectory.back().registers;
  const double tolerances[] = {1e-2, 1e-3, 1e-6};
  Discrete d;
  for (Eigen::Index i = 0; i < registers.cols(); ++i) {
    Eigen::Index label;
    const Scalar top = registers.col(i).maxCoeff(&label);
    d.exact += top == Scalar(1);
    for (int c = 0; c < 3; ++c) d.within[c] += top >= 1 - tolerances[c];
    d.lloyd_labels += label == s.lloyd.back().labels[i];
  }
  return d;
}

TEST(PaperAValidation, SoftmaxBeta1e4FollowsLloyd) {
  const PaperData& s = PaperSetup();
  const Discrete f = SoftmaxRun<float>(s), d = SoftmaxRun<double>(s);
  std::printf("discrete assignments after %d layers, of 10000 (paper A: 9921)\n", kLayers);
  std::printf("                                   float32  double\n");
  std::printf("  register exactly one-hot         %7d  %6d\n", f.exact, d.exact);
  std::printf("  one-hot to within 1e-2           %7d  %6d\n", f.within[0], d.within[0]);
  std::printf("  one-hot to within 1e-3           %7d  %6d\n", f.within[1], d.within[1]);
  std::printf("  one-hot to within 1e-6           %7d  %6d\n", f.within[2], d.within[2]);
  std::printf("  largest register = Lloyd's label %7d  %6d\n", f.lloyd_labels, d.lloyd_labels);
  RecordProperty("exact_float32", f.exact);
  RecordProperty("exact_double", d.exact);
  // Softmax weights underflow to exactly 0 sooner in float32 (e^-104) than
  // in double (e^-745), so more float32 registers are exactly one-hot; a
  // looser criterion only admits more points; softmax leaves the points
  // nearest a boundary soft in both.
  EXPECT_GT(f.exact, d.exact);
  for (const Discrete& x : {f, d}) {
    EXPECT_LE(x.exact, x.within[2]);
    EXPECT_LE(x.within[2], x.within[1]);
    EXPECT_LE(x.within[1], x.within[0]);
    EXPECT_LT(x.within[0], 10000);
    EXPECT_GE(x.exact, 9000);
    // The soft centers are within 1e-4 of Lloyd's: only points at a
    // boundary can take another label.
    EXPECT_GE(x.lloyd_labels, 9990);
  }
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
