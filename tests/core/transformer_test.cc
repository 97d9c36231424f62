// A model whose later layers are Lloyd's (Model::lloyd_after): its own layers
// first, exactly as without the switch, then steps that equal the plain
// reference Lloyd's from the centers those layers left.
#include "core/transformer.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "reference/lloyd.h"
#include "tests/support/gaussian_clusters.h"
#include "tests/support/random_weights.h"

namespace kmt {
namespace {

// The same weights, handing over to Lloyd's after `lloyd_after` layers.
Model<double> WithLloydAfter(Model<double> model, int lloyd_after) {
  model.lloyd_after = lloyd_after;
  return model;
}

TEST(Transformer, LayersFromLloydAfterOnAreReferenceLloydsSteps) {
  ClusterOptions options;
  options.n = 200;
  options.d = 4;
  options.k = 5;
  options.min_max_scale = false;
  const Matrix<double> points = GaussianClusters<double>(options, 3).points * 7.0;
  const Matrix<double> init = points.leftCols(options.k);
  const int own = 2, layers = 7;
  for (InputScaling scaling : {InputScaling::kNone, InputScaling::kGlobalMinMax}) {
    SCOPED_TRACE(absl::StrCat("input scaling ", InputScalingName(scaling)));
    const Model<double> learned = RandomSoftmaxModel<double>(options.d, options.k, scaling, 1);
    const Model<double> hybrid = WithLloydAfter(learned, own);
    const RunResult<double> run = *RunTransformer(hybrid, points, init, {.layers = layers});
    const RunResult<double> first = *RunTransformer(learned, points, init, {.layers = own});
    ASSERT_EQ(run.layers_run, layers);
    ASSERT_EQ(run.layer_objectives.size(), static_cast<size_t>(layers));
    // The model's own layers, to the last bit.
    for (int t = 0; t < own; ++t) EXPECT_EQ(run.layer_objectives[t], first.layer_objectives[t]);
    // Then Lloyd's, step by step, from where they left the centers.
    const auto reference = ReferenceLloyd(points, first.centers, layers - own);
    for (int t = own; t < layers; ++t) {
      const LloydIteration<double>& step = reference[t - own];
      EXPECT_NEAR(run.layer_objectives[t], step.objective, 1e-9 * step.objective) << "layer " << t;
    }
    EXPECT_LE((run.centers - reference.back().centers).norm(),
              1e-9 * reference.back().centers.norm());
    EXPECT_EQ(run.labels, ReferenceLabels(points, reference.back().centers));
    // Lloyd's steps never raise the objective.
    for (int t = own + 1; t < layers; ++t) {
      EXPECT_LE(run.layer_objectives[t], run.layer_objectives[t - 1] * (1 + 1e-12));
    }
  }
}

TEST(Transformer, RunsNoLongerThanLloydAfterAreTheModelsOwn) {
  ClusterOptions options;
  options.n = 100;
  options.d = 3;
  options.k = 4;
  const Matrix<double> points = GaussianClusters<double>(options, 5).points;
  const Matrix<double> init = points.leftCols(options.k);
  const Model<double> learned =
      RandomSoftmaxModel<double>(options.d, options.k, InputScaling::kNone, 1);
  const Model<double> hybrid = WithLloydAfter(learned, 3);
  for (int layers : {0, 1, 3}) {
    const RunResult<double> a = *RunTransformer(hybrid, points, init, {.layers = layers});
    const RunResult<double> b = *RunTransformer(learned, points, init, {.layers = layers});
    EXPECT_EQ(a.centers, b.centers) << layers << " layers";
    EXPECT_EQ(a.layer_objectives, b.layer_objectives) << layers << " layers";
  }
}

TEST(Transformer, LloydAfterIsRefusedWhereItHasNoMeaning) {
  Model<double> model =
      WithLloydAfter(RandomSoftmaxModel<double>(3, 4, InputScaling::kNone, 1), -1);
  EXPECT_EQ(ValidateModel(model).message(), "model lloyd_after = -1, must not be negative");
  model.lloyd_after = 2;
  model.unit_norm = true;
  EXPECT_EQ(ValidateModel(model).message(),
            "model lloyd_after is for models whose centers are k-means centers of their points; "
            "this one has a norm layer or a norm coordinate");
}

}  // namespace
}  // namespace kmt
