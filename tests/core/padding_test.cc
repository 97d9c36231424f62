// Serving a learned model for smaller d and k by padding (core/padding.h):
// zero coordinates up to the model's d, the batch's centers as the model's
// first clusters with the other center tokens masked, the centers held at
// zero in the padded coordinates; the result in the batch's own space.
#include "core/padding.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/attention.h"
#include "core/embedding.h"
#include "core/engine.h"
#include "tests/support/gaussian_clusters.h"
#include "tests/support/random_weights.h"
#include "tests/support/valid_batch.h"

namespace kmt {
namespace {

// The model's layers written out on the padded tokens, one block at a time:
// k' center tokens with the first k' of the model's k codes, re-embedded
// before every layer, the centers' padded coordinates reset to zero after
// it. Returns the final centers in d' dimensions.
Matrix<double> ByHand(const Model<double>& model, const Matrix<double>& points,
                      const Matrix<double>& init, int layers) {
  const int d = static_cast<int>(points.rows()), k = static_cast<int>(init.cols());
  const int m = model.registers();
  const Matrix<double> codes = CenterRegisters<double>(model.embedding, model.k).leftCols(k);
  Matrix<double> padded = Matrix<double>::Zero(model.d, points.cols());
  padded.topRows(d) = points;
  Matrix<double> c = Matrix<double>::Zero(model.d + m, k);
  c.topRows(d) = init;
  for (int t = 0; t < layers; ++t) {
    const LayerWeights<double>& w = model.layers[t % model.layers.size()];
    Matrix<double> x = Matrix<double>::Zero(model.d + m, points.cols());
    x.topRows(model.d) = padded;
    c.middleRows(model.d, m) = codes;
    const Matrix<double> a1 = Attend(w[BlockId::kPointsToCenters], x, c);
    const Matrix<double> a2 = Attend(w[BlockId::kPointsToPoints], x, x);
    x += a2;
    x += a1;
    const Matrix<double> a3 = Attend(w[BlockId::kCentersToPoints], c, x);
    const Matrix<double> a4 = Attend(w[BlockId::kCentersToCenters], c, c);
    c += a4;
    c += a3;
    c.middleRows(d, model.d - d).setZero();
  }
  return c.topRows(d);
}

TEST(Padding, AtTheModelsOwnSizeTheEngineReproducesTheUnpaddedModel) {
  Model<double> weights = RandomSoftmaxModel<double>(5, 4, InputScaling::kGlobalMinMax, 3);
  const RunResult<double> plain = [&] {
    const Clusters<double> task = GaussianClusters<double>({.n = 80, .d = 5, .k = 4}, 2);
    return *RunTransformer(weights, task.points, Matrix<double>(task.points.leftCols(4)),
                           {.layers = 6});
  }();
  weights.padded_sizes = {{.d = 3, .k = 2}, {.d = 5, .k = 3}};
  const ServedModel<double> model = *ServedModel<double>::FromWeights(weights, "");
  const Clusters<double> task = GaussianClusters<double>({.n = 80, .d = 5, .k = 4}, 2);
  const RunResult<double> served = *Cluster(
      model,
      MakeBatch(
          {.points = task.points, .k = 4, .layers = 6, .given_centers = task.points.leftCols(4)}));
  EXPECT_EQ(served.centers, plain.centers);
  EXPECT_EQ(served.labels, plain.labels);
  EXPECT_EQ(served.objective, plain.objective);
  EXPECT_EQ(served.layer_objectives, plain.layer_objectives);
}

TEST(Padding, AllClustersAndDimensionsGiveTheEmbeddingOfBefore) {
  Rng rng(5);
  const Matrix<double> centers = UniformMatrix<double>(4, 6, rng);
  for (Embedding embedding : {Embedding::kOneHot, Embedding::kBinary, Embedding::kNone}) {
    SCOPED_TRACE(EmbeddingName(embedding));
    EXPECT_EQ(EmbedCentersOf(centers, embedding, 6), EmbedCenters(centers, embedding));
  }
  EXPECT_EQ(PadRows(centers, 4), centers);
}

TEST(Padding, APaddedRunIsTheModelRunByHandOnThePaddedBatch) {
  const Model<double> model = RandomSoftmaxModel<double>(6, 5, InputScaling::kNone, 4);
  for (const ModelSize size : {ModelSize{3, 2}, ModelSize{6, 3}, ModelSize{2, 5}}) {
    SCOPED_TRACE(absl::StrCat("d = ", size.d, ", k = ", size.k));
    const Clusters<double> task = GaussianClusters<double>({.n = 60, .d = size.d, .k = size.k}, 9);
    const Matrix<double> init = task.points.leftCols(size.k);
    const int layers = 4;
    const RunResult<double> run = *RunPadded(model, task.points, init, {.layers = layers});
    const Matrix<double> expected = ByHand(model, task.points, init, layers);
    ASSERT_EQ(run.centers.rows(), size.d);
    ASSERT_EQ(run.centers.cols(), size.k);
    // The same operations in the same order; only the distance kernel's
    // blocking differs.
    EXPECT_LT((run.centers - expected).cwiseAbs().maxCoeff(), 1e-12);
    // Labels and objective are the caller's, in d' dimensions.
    Labels labels;
    EXPECT_DOUBLE_EQ(run.objective, AssignNearest(task.points, run.centers, &labels));
    EXPECT_EQ(run.labels, labels);
    ASSERT_EQ(run.layer_objectives.size(), static_cast<size_t>(layers));
    EXPECT_EQ(run.layer_objectives.back(), run.objective);
  }
}

TEST(Padding, TheEngineServesAListedSizeAsRunPaddedDoes) {
  Model<double> weights = RandomSoftmaxModel<double>(6, 5, InputScaling::kGlobalMinMax, 2);
  weights.padded_sizes = {{.d = 4, .k = 3}};
  const ServedModel<double> model = *ServedModel<double>::FromWeights(weights, "");
  const Clusters<double> task = GaussianClusters<double>({.n = 70, .d = 4, .k = 3}, 5);
  // Not min-max scaled, so that the input map does something.
  const Matrix<double> points = (task.points.array() * 7.0 + 3.0).matrix();
  const RunResult<double> served = *Cluster(model, MakeBatch({.points = points,
                                                              .k = 3,
                                                              .layers = 5,
                                                              .given_centers = points.leftCols(3),
                                                              .cluster_sums = true}));
  const RunResult<double> padded =
      *RunPadded(weights, points, Matrix<double>(points.leftCols(3)), {.layers = 5});
  EXPECT_EQ(served.centers, padded.centers);
  EXPECT_EQ(served.labels, padded.labels);
  EXPECT_EQ(served.objective, padded.objective);
  ASSERT_TRUE(served.cluster_sums.has_value());
  EXPECT_EQ(served.cluster_sums->sums.rows(), 4);
  // The padded model chooses its own centers among the batch's points too.
  const absl::StatusOr<RunResult<double>> chosen = Cluster(
      model,
      MakeBatch({.points = points, .k = 3, .layers = 2, .init = InitMethod::kKMeansPlusPlus}));
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->centers.rows(), 4);
}

TEST(Padding, SizesAboveTheModelsOrNotListedAreRefusedNamingTheAcceptedOnes) {
  Model<double> weights = RandomSoftmaxModel<double>(6, 5, InputScaling::kNone, 1);
  weights.padded_sizes = {{.d = 4, .k = 3}, {.d = 6, .k = 4}};
  const ServedModel<double> model = *ServedModel<double>::FromWeights(weights, "");
  for (const ModelSize size : {ModelSize{7, 5}, ModelSize{6, 6}, ModelSize{4, 2}}) {
    SCOPED_TRACE(absl::StrCat("d = ", size.d, ", k = ", size.k));
    const Clusters<double> task = GaussianClusters<double>({.n = 50, .d = size.d, .k = size.k}, 1);
    const absl::Status status =
        Cluster(model, MakeBatch({.points = task.points, .k = size.k})).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(),
              absl::StrCat("model random was trained for d = 6, k = 5 and serves by padding "
                           "(d, k) = (4, 3), (6, 4); the batch has d = ",
                           size.d, ", k = ", size.k));
  }
  const std::vector<ModelSize> expected = {{6, 5}, {4, 3}, {6, 4}};
  EXPECT_EQ(model.accepted_sizes(), expected);
  const Clusters<double> big = GaussianClusters<double>({.n = 50, .d = 7, .k = 6}, 1);
  EXPECT_EQ(
      RunPadded(weights, big.points, Matrix<double>(big.points.leftCols(5)), {}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunPadded(weights, Matrix<double>(big.points.topRows(6)),
                      Matrix<double>(big.points.topRows(6).leftCols(6)), {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Padding, AModelListsOnlySmallerDistinctSizes) {
  for (const std::vector<ModelSize>& sizes :
       std::vector<std::vector<ModelSize>>{{{7, 5}}, {{6, 5}}, {{0, 3}}, {{4, 3}, {4, 3}}}) {
    Model<double> weights = RandomSoftmaxModel<double>(6, 5, InputScaling::kNone, 1);
    weights.padded_sizes = sizes;
    EXPECT_EQ(ValidateModel(weights).code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace kmt
