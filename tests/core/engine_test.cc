// The engine's entry point against the pieces it puts together: exact models
// against the plain reference Lloyd's, fixed weights with an input scaling
// against the transformer run on mapped points, and the model's checks.
#include "core/engine.h"

#include <gtest/gtest.h>

#include "core/assign.h"
#include "reference/lloyd.h"
#include "tests/support/gaussian_clusters.h"
#include "tests/support/random_weights.h"
#include "tests/support/valid_batch.h"

namespace kmt {
namespace {

TEST(Engine, ExactModelsAreTheLloydConstructionsAndTheVariants) {
  std::vector<std::string> names;
  for (const ServedModel<double>& m : ExactModels<double>()) {
    EXPECT_TRUE(m.exact());
    EXPECT_EQ(m.weights(), nullptr);
    EXPECT_FALSE(m.description().empty());
    names.push_back(m.name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"lloyd-onehot", "lloyd-binary", "lloyd-onehot-dot",
                                             "lloyd-onehot-linear", "soft-kmeans", "trimmed-kmeans",
                                             "robust-kmeans", "kmedoids", "spherical-kmeans"}));
}

TEST(Engine, ExactModelFromGivenCentersIsReferenceLloyd) {
  const Clusters<double> task = GaussianClusters<double>({.n = 600, .d = 5, .k = 7}, 11);
  const Matrix<double> init = task.points.leftCols(7);
  const auto reference = ReferenceLloyd(task.points, init, 6);
  for (const ServedModel<double>& model : ExactModels<double>()) {
    // Lloyd's, and Lloyd's linear circuit at its default hardmax.
    const std::string& algorithm = model.algorithm().name();
    if (algorithm != "lloyd" && algorithm != "softmax-lloyd") continue;
    SCOPED_TRACE(model.name());
    const Batch<double> batch = MakeBatch(
        {.points = task.points, .k = 7, .layers = 6, .given_centers = init, .cluster_sums = true});
    EXPECT_FALSE(model.Plan(batch)->dense);
    const absl::StatusOr<RunResult<double>> run = Cluster(model, batch);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->path, Path::kFast);
    EXPECT_EQ(run->layers_run, 6);
    for (int t = 0; t < 6; ++t) {
      EXPECT_NEAR(run->layer_objectives[t], reference[t].objective, 1e-12 * reference[t].objective);
    }
    EXPECT_LE((run->centers - reference.back().centers).norm(),
              1e-12 * reference.back().centers.norm());
    Labels labels;
    AssignNearest(task.points, reference.back().centers, &labels);
    EXPECT_EQ(run->labels, labels);
    // The sums are those of the final labels.
    ASSERT_TRUE(run->cluster_sums.has_value());
    int64_t total = 0;
    for (int j = 0; j < 7; ++j) {
      int64_t count = 0;
      Vector<double> sum = Vector<double>::Zero(5);
      for (int i = 0; i < 600; ++i) {
        if (run->labels[i] != j) continue;
        ++count;
        sum += task.points.col(i);
      }
      EXPECT_EQ(run->cluster_sums->counts[j], count);
      EXPECT_LE((run->cluster_sums->sums.col(j) - sum).norm(), 1e-12 * (1 + sum.norm()));
      total += count;
    }
    EXPECT_EQ(total, 600);
  }
}

TEST(Engine, InitialisationIsTheSeededChoiceOnThePoints) {
  const Clusters<double> task = GaussianClusters<double>({.n = 300, .d = 3, .k = 4}, 2);
  const ServedModel<double> model = ExactModels<double>()[0];
  for (InitMethod method : {InitMethod::kRandomSubset, InitMethod::kKMeansPlusPlus}) {
    SCOPED_TRACE(InitMethodName(method));
    const Batch<double> batch =
        MakeBatch({.points = task.points, .k = 4, .layers = 3, .init = method, .seed = 9});
    const Matrix<double> init = *InitialCenters(task.points, 4, method, 9);
    const RunResult<double> expected =
        *RunLloyd<double>({.embedding = Embedding::kOneHot}, task.points, init, {.layers = 3});
    const RunResult<double> run = *Cluster(model, batch);
    EXPECT_EQ(run.centers, expected.centers);
    EXPECT_EQ(run.labels, expected.labels);
    EXPECT_EQ(run.layer_objectives, expected.layer_objectives);
  }
}

TEST(Engine, ABatchWithoutAnInitGetsTheModelsDefault) {
  // Exact models: greedy k-means++. Fixed weights: the first initialisation
  // they were trained from, else the same default.
  const Clusters<double> task = GaussianClusters<double>({.n = 300, .d = 3, .k = 4}, 2);
  Model<double> weights = *LloydConstruction<double>(3, 4, {.embedding = Embedding::kOneHot});
  weights.name = "trained";
  const ServedModel<double> exact = ExactModels<double>()[0];
  const ServedModel<double> unrecorded = *ServedModel<double>::FromWeights(weights, "");
  weights.trained_inits = {InitMethod::kRandomSubset, InitMethod::kKMeansPlusPlus};
  const ServedModel<double> trained = *ServedModel<double>::FromWeights(weights, "");
  EXPECT_EQ(exact.default_init(), InitMethod::kKMeansPlusPlus);
  EXPECT_EQ(unrecorded.default_init(), InitMethod::kKMeansPlusPlus);
  EXPECT_EQ(trained.default_init(), InitMethod::kRandomSubset);
  // No layer: the centers reported are the initial ones.
  const Batch<double> unset = MakeBatch({.points = task.points, .k = 4, .layers = 0, .seed = 9});
  const Matrix<double> random = *InitialCenters(task.points, 4, InitMethod::kRandomSubset, 9);
  const Matrix<double> greedy = *InitialCenters(task.points, 4, InitMethod::kKMeansPlusPlus, 9);
  ASSERT_NE(random, greedy);  // so that the checks below tell them apart
  EXPECT_EQ(Cluster(exact, unset)->centers, greedy);
  EXPECT_EQ(Cluster(unrecorded, unset)->centers, greedy);
  EXPECT_EQ(Cluster(trained, unset)->centers, random);
}

TEST(Engine, BetaMakesLloydsLinearCircuitRunTheSoftmaxConstructionDensely) {
  const Clusters<double> task = GaussianClusters<double>({.n = 200, .d = 4, .k = 3}, 5);
  const Matrix<double> init = task.points.leftCols(3);
  const ServedModel<double> model = ExactModels<double>()[3];
  ASSERT_EQ(model.name(), "lloyd-onehot-linear");
  const Batch<double> batch = MakeBatch({.points = task.points,
                                         .k = 3,
                                         .layers = 2,
                                         .given_centers = init,
                                         .parameters = {{"beta", 50}}});
  EXPECT_TRUE(model.Plan(batch)->dense);
  const RunResult<double> run = *Cluster(model, batch);
  EXPECT_EQ(run.path, Path::kDense);
  const RunResult<double> expected = *RunLloyd<double>(
      {.embedding = Embedding::kOneHot, .theta3 = Theta3Form::kLinear, .beta = 50}, task.points,
      init, {.layers = 2});
  EXPECT_EQ(run.centers, expected.centers);
  EXPECT_EQ(run.layer_objectives, expected.layer_objectives);
}

TEST(Engine, MinMaxScaledWeightsSeeMappedPointsAndReportInTheCallersUnits) {
  const Clusters<double> task = GaussianClusters<double>({.n = 120, .d = 3, .k = 4}, 8);
  Matrix<double> points = task.points;
  points.row(0) = points.row(0) * 40.0 + Vector<double>::Constant(120, 3.0).transpose();
  points.row(2) *= 0.01;
  const Model<double> weights = RandomSoftmaxModel<double>(3, 4, InputScaling::kMinMax, 1);
  const absl::StatusOr<ServedModel<double>> model =
      ServedModel<double>::FromWeights(weights, "test");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_FALSE(model->exact());
  EXPECT_EQ(model->input_scaling(), InputScaling::kMinMax);
  const Batch<double> batch = MakeBatch({.points = points, .k = 4, .layers = 3, .seed = 4});
  EXPECT_TRUE(model->Plan(batch)->dense);
  const RunResult<double> run = *Cluster(*model, batch);

  // By hand: map, choose k-means++ centers among the mapped points, run the
  // same weights without scaling, map the centers back.
  const InputMap<double> map(InputScaling::kMinMax, points);
  const Matrix<double> mapped = map.ToModel(points);
  const Matrix<double> init = *InitialCenters(mapped, 4, InitMethod::kKMeansPlusPlus, 4);
  Model<double> unscaled = weights;
  unscaled.input_scaling = InputScaling::kNone;
  const RunResult<double> inner = *RunTransformer(unscaled, mapped, init, {.layers = 3});
  const Matrix<double> centers = map.ToCaller(inner.centers);
  EXPECT_LE((run.centers - centers).norm(), 1e-12 * centers.norm());
  Labels labels;
  AssignNearest(points, centers, &labels);
  EXPECT_EQ(run.labels, labels);
  EXPECT_NEAR(run.objective, Objective(points, centers), 1e-9 * run.objective);
  ASSERT_EQ(run.layer_objectives.size(), 3u);
  EXPECT_NEAR(run.layer_objectives[2], run.objective, 1e-12 * run.objective);
}

TEST(Engine, FixedWeightsThatAreLloydsRunTheFastPath) {
  Model<double> weights = *LloydConstruction<double>(4, 5, {.embedding = Embedding::kBinary});
  weights.name = "learned-but-exact";
  const ServedModel<double> model = *ServedModel<double>::FromWeights(weights, "");
  const Clusters<double> task = GaussianClusters<double>({.n = 5000, .d = 4, .k = 5}, 3);
  const Batch<double> batch = MakeBatch({.points = task.points, .k = 5, .layers = 4});
  EXPECT_FALSE(model.Plan(batch)->dense);
  EXPECT_EQ(Cluster(model, batch)->path, Path::kFast);
}

TEST(Engine, AModelRefusesBatchesItCannotRun) {
  const ServedModel<double> learned = *ServedModel<double>::FromWeights(
      RandomSoftmaxModel<double>(3, 4, InputScaling::kNone, 1), "");
  const Clusters<double> task = GaussianClusters<double>({.n = 50, .d = 3, .k = 4}, 1);
  EXPECT_EQ(Cluster(learned, MakeBatch({.points = task.points, .k = 5})).status().message(),
            "model random was trained for d = 3, k = 4; the batch has d = 3, k = 5");
  EXPECT_EQ(
      Cluster(learned, MakeBatch({.points = task.points, .k = 4, .parameters = {{"beta", 2}}}))
          .status()
          .message(),
      "beta applies to the exact models; random is learned");
  Model<double> broken = RandomSoftmaxModel<double>(3, 4, InputScaling::kNone, 1);
  broken.layers[0][BlockId::kCentersToPoints].V.resize(2, 2);
  EXPECT_EQ(ServedModel<double>::FromWeights(broken, "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Engine, TheStopCheckEndsTheRunWithItsStatus) {
  const Clusters<double> task = GaussianClusters<double>({.n = 100, .d = 2, .k = 3}, 1);
  int calls = 0;
  const StopCheck check = [&calls] {
    return ++calls > 3 ? absl::DeadlineExceededError("too late") : absl::OkStatus();
  };
  const absl::StatusOr<RunResult<double>> run = Cluster(
      ExactModels<double>()[0], MakeBatch({.points = task.points, .k = 3, .layers = 10}), check);
  EXPECT_EQ(run.status(), absl::DeadlineExceededError("too late"));
}

}  // namespace
}  // namespace kmt

namespace kmt {
namespace {

TEST(Engine, WeightsThatOverflowAreAnErrorNotAnInfiniteObjective) {
  // theta3 multiplies the centers by 1e200 every layer: finite centers whose
  // squared distances overflow double.
  Model<double> weights = RandomSoftmaxModel<double>(3, 4, InputScaling::kNone, 1);
  weights.layers[0][BlockId::kCentersToPoints].V *= 1e200;
  const ServedModel<double> model = *ServedModel<double>::FromWeights(weights, "test");
  const Clusters<double> task = GaussianClusters<double>({.n = 50, .d = 3, .k = 4}, 3);
  const absl::StatusOr<RunResult<double>> run =
      Cluster(model, MakeBatch({.points = task.points, .k = 4, .layers = 2}));
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(run.status().message(),
            "model random produced non-finite centers or objective on this batch; its weights are "
            "unfit for these points");
}

}  // namespace
}  // namespace kmt

namespace kmt {
namespace {

TEST(Engine, GlobalScalingKeepsTheCallersProblem) {
  // Anisotropic data: one axis 50 times the other's range.
  Clusters<double> task = GaussianClusters<double>({.n = 200, .d = 3, .k = 4}, 21);
  task.points.row(0) *= 50.0;
  const ServedModel<double> model = *ServedModel<double>::FromWeights(
      RandomSoftmaxModel<double>(3, 4, InputScaling::kGlobalMinMax, 1), "test");
  const RunResult<double> run =
      *Cluster(model, MakeBatch({.points = task.points, .k = 4, .layers = 3, .seed = 2}));
  // The objective reported is the caller's: that of the centers returned on
  // the caller's points, every point at its nearest center.
  Labels nearest;
  Vector<double> sq;
  AssignNearest(task.points, run.centers, &nearest, &sq);
  EXPECT_EQ(run.labels, nearest);
  EXPECT_NEAR(run.objective, sq.sum(), 1e-9 * sq.sum());
  // The same points scaled by 7 and moved: the same labels, the centers
  // scaled and moved alike, the objective 49 times larger.
  const Vector<double> shift = (Vector<double>(3) << 100, -3, 0.5).finished();
  const Matrix<double> moved = (7.0 * task.points).colwise() + shift;
  const RunResult<double> again =
      *Cluster(model, MakeBatch({.points = moved, .k = 4, .layers = 3, .seed = 2}));
  EXPECT_EQ(again.labels, run.labels);
  const Matrix<double> expected = (7.0 * run.centers).colwise() + shift;
  EXPECT_LE((again.centers - expected).cwiseAbs().maxCoeff(),
            1e-9 * expected.cwiseAbs().maxCoeff());
  EXPECT_NEAR(again.objective, 49 * run.objective, 1e-9 * again.objective);
}

}  // namespace
}  // namespace kmt
