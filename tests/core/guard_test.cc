// The guarded form of a learned model (Model::guard): every layer keeps the
// better of the learned step and an exact Lloyd's step from the same
// centers, so the objective never increases, whatever the weights.
#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/constructions.h"
#include "core/engine.h"
#include "core/transformer.h"
#include "reference/lloyd.h"
#include "tests/support/gaussian_clusters.h"
#include "tests/support/random_weights.h"
#include "tests/support/valid_batch.h"

namespace kmt {
namespace {

Model<double> Guarded(Model<double> model) {
  model.guard = true;
  return model;
}

// Random weights of two strengths: as the trainer starts them, and with
// theta3's values (the centers' update) ten times larger, which throws the
// centers far from the points.
std::vector<Model<double>> AdversarialModels(int d, int k, InputScaling scaling) {
  std::vector<Model<double>> models;
  for (uint64_t seed : {1, 2, 3}) {
    Model<double> model = RandomSoftmaxModel<double>(d, k, scaling, seed);
    models.push_back(model);
    model.layers[0][BlockId::kCentersToPoints].V *= 10.0;
    model.layers[0][BlockId::kCentersToPoints].bV *= 10.0;
    models.push_back(std::move(model));
  }
  return models;
}

TEST(Guard, NeverIncreasesTheObjectiveOnAdversarialWeights) {
  ClusterOptions options{.n = 120, .d = 4, .k = 5, .min_max_scale = false};
  const Matrix<double> points = GaussianClusters<double>(options, 7).points * 30.0;
  const Matrix<double> init = points.leftCols(options.k);
  const int layers = 8;
  for (InputScaling scaling : {InputScaling::kNone, InputScaling::kGlobalMinMax}) {
    int lloyd_layers = 0;
    for (const Model<double>& model : AdversarialModels(options.d, options.k, scaling)) {
      SCOPED_TRACE(absl::StrCat(InputScalingName(scaling), " ", lloyd_layers));
      const RunResult<double> run = *RunTransformer(Guarded(model), points, init,
                                                    {.layers = layers, .record_trajectory = true});
      ASSERT_EQ(run.layer_objectives.size(), static_cast<size_t>(layers));
      EXPECT_EQ(run.guard_learned_layers + run.guard_lloyd_layers, layers);
      lloyd_layers += run.guard_lloyd_layers;
      double before = ReferenceObjective(points, init);
      Matrix<double> centers = init;
      for (int t = 0; t < layers; ++t) {
        SCOPED_TRACE(absl::StrCat("layer ", t));
        EXPECT_LE(run.layer_objectives[t], before);
        // No layer is worse than the Lloyd's step from its own start.
        const double lloyd = ReferenceLloyd(points, centers, 1).back().objective;
        EXPECT_LE(run.layer_objectives[t], lloyd * (1 + 1e-12));
        EXPECT_NEAR(run.layer_objectives[t], ReferenceObjective(points, run.trajectory[t].centers),
                    1e-9 * before);
        before = run.layer_objectives[t];
        centers = run.trajectory[t].centers;
      }
      EXPECT_EQ(run.objective, run.layer_objectives.back());
    }
    // The random steps lose to Lloyd's on some layers at least.
    EXPECT_GT(lloyd_layers, 0);
  }
}

// Lloyd's circuit with its center update relaxed: c <- (1 - a) c + a mean,
// theta3 and theta4 scaled by a. Such a step is sometimes better than
// Lloyd's own and sometimes worse.
Model<double> RelaxedLloyd(int d, int k, double a) {
  Model<double> model = *LloydConstruction<double>(d, k, {});
  model.name = absl::StrCat("relaxed-", a);
  model.reembed = true;
  model.layers[0][BlockId::kCentersToPoints].V *= a;
  model.layers[0][BlockId::kCentersToCenters].V *= a;
  return model;
}

TEST(Guard, EachLayerKeepsTheBetterOfTheLearnedAndTheLloydStep) {
  ClusterOptions options{.n = 150, .d = 3, .k = 4};
  const Matrix<double> points = GaussianClusters<double>(options, 11).points;
  const int layers = 6;
  int learned_layers = 0, lloyd_layers = 0;
  std::vector<Model<double>> models = AdversarialModels(options.d, options.k, InputScaling::kNone);
  for (double a : {0.8, 1.3, 1.6}) models.push_back(RelaxedLloyd(options.d, options.k, a));
  for (const Model<double>& model : models) {
    SCOPED_TRACE(model.name);
    const Matrix<double> init = points.leftCols(options.k);
    const RunResult<double> run = *RunTransformer(Guarded(model), points, init,
                                                  {.layers = layers, .record_trajectory = true});
    learned_layers += run.guard_learned_layers;
    lloyd_layers += run.guard_lloyd_layers;
    Matrix<double> centers = init;
    int learned = 0;
    for (int t = 0; t < layers; ++t) {
      SCOPED_TRACE(absl::StrCat("layer ", t));
      // One step of each from the centers the guarded layer started from.
      const RunResult<double> step = *RunTransformer(model, points, centers, {.layers = 1});
      const RunResult<double> lloyd = *RunLloyd<double>({}, points, centers, {.layers = 1});
      const bool learned_wins = step.objective <= lloyd.objective;
      learned += learned_wins ? 1 : 0;
      const RunResult<double>& kept = learned_wins ? step : lloyd;
      EXPECT_NEAR(run.layer_objectives[t], kept.objective, 1e-12 * kept.objective);
      EXPECT_TRUE(run.trajectory[t].centers.isApprox(kept.centers, 1e-12));
      centers = run.trajectory[t].centers;
    }
    EXPECT_EQ(run.guard_learned_layers, learned);
    EXPECT_EQ(run.guard_lloyd_layers, layers - learned);
  }
  // Both branches are exercised.
  EXPECT_GT(learned_layers, 0);
  EXPECT_GT(lloyd_layers, 0);
}

TEST(Guard, IsRefusedWhereItHasNoMeaning) {
  Model<double> model = Guarded(RandomSoftmaxModel<double>(3, 4, InputScaling::kNone, 1));
  model.reembed = false;
  EXPECT_EQ(ValidateModel(model).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Guard, TheEngineRunsALearnedModelGuardedOnRequest) {
  const ServedModel<double> learned = *ServedModel<double>::FromWeights(
      RandomSoftmaxModel<double>(3, 4, InputScaling::kGlobalMinMax, 1), "");
  const Clusters<double> task = GaussianClusters<double>({.n = 60, .d = 3, .k = 4}, 2);
  const BatchSpec<double> spec{.points = task.points, .k = 4, .layers = 5, .seed = 3};
  BatchSpec<double> guarded_spec = spec;
  guarded_spec.guard = true;
  const RunResult<double> plain = *Cluster(learned, MakeBatch(spec));
  const RunResult<double> guarded = *Cluster(learned, MakeBatch(guarded_spec));
  EXPECT_EQ(plain.guard_learned_layers + plain.guard_lloyd_layers, 0);
  EXPECT_EQ(guarded.guard_learned_layers + guarded.guard_lloyd_layers, 5);
  EXPECT_TRUE(std::is_sorted(guarded.layer_objectives.rbegin(), guarded.layer_objectives.rend()));

  EXPECT_EQ(Cluster(ExactModels<double>()[0], MakeBatch(guarded_spec)).status().message(),
            "guard applies to the learned models; lloyd-onehot is exact");
  Model<double> exact = *LloydConstruction<double>(3, 4, {});
  exact.name = "learned-but-exact";
  EXPECT_EQ(Cluster(*ServedModel<double>::FromWeights(exact, ""), MakeBatch(guarded_spec))
                .status()
                .message(),
            "guard applies to learned models that re-embed; learned-but-exact is an exact Lloyd "
            "construction");
}

}  // namespace
}  // namespace kmt
