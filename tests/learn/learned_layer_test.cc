// Every backward pass of the trainable layer against central finite
// differences in double, its forward pass against the evaluator that serves
// learned models, and a reused cache against a fresh one.
#include "learn/learned_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "core/random.h"
#include "core/transformer.h"
#include "learn/smoothed_objective.h"
#include "tests/support/random_weights.h"

namespace kmt {
namespace {

// Compares an analytic gradient with central differences of f over every
// entry of `param`: |analytic - numeric| <= 1e-6 |numeric| + 1e-9.
void ExpectGradient(const std::function<double()>& f, double* param, Eigen::Index size,
                    const double* analytic, const std::string& what) {
  SCOPED_TRACE(what);
  constexpr double h = 1e-5;
  double worst = 0;
  for (Eigen::Index i = 0; i < size; ++i) {
    const double saved = param[i];
    param[i] = saved + h;
    const double up = f();
    param[i] = saved - h;
    const double down = f();
    param[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double error = std::abs(analytic[i] - numeric) / (std::abs(numeric) + 1e-3);
    worst = std::max(worst, error);
    ASSERT_LE(std::abs(analytic[i] - numeric), 1e-6 * std::abs(numeric) + 1e-9)
        << "entry " << i << ": analytic " << analytic[i] << ", numeric " << numeric;
  }
  ::testing::Test::RecordProperty(what, absl::StrCat(worst));
}

void ExpectBlockGradients(const std::function<double()>& f, AttentionBlock<double>& params,
                          const AttentionBlock<double>& grad, const std::string& block) {
  ExpectGradient(f, params.Q.data(), params.Q.size(), grad.Q.data(), block + " Q");
  ExpectGradient(f, params.K.data(), params.K.size(), grad.K.data(), block + " K");
  ExpectGradient(f, params.V.data(), params.V.size(), grad.V.data(), block + " V");
  ExpectGradient(f, params.bQ.data(), params.bQ.size(), grad.bQ.data(), block + " b_Q");
  ExpectGradient(f, params.bK.data(), params.bK.size(), grad.bK.data(), block + " b_K");
  ExpectGradient(f, params.bV.data(), params.bV.size(), grad.bV.data(), block + " b_V");
}

TEST(SoftmaxAttention, BackwardMatchesFiniteDifferences) {
  Rng rng(1);
  const int dim = 4;
  AttentionBlock<double> block = RandomSoftmaxBlock<double>(dim, rng);
  Matrix<double> queries = NormalMatrix<double>(dim, 5, rng),
                 keys = NormalMatrix<double>(dim, 6, rng);
  const Matrix<double> probe = NormalMatrix<double>(dim, 5, rng);  // loss = <probe, out>
  const auto loss = [&] {
    AttentionCache<double> cache;
    Matrix<double> out;
    SoftmaxAttentionForward(block, queries, keys, &cache, &out);
    return probe.cwiseProduct(out).sum();
  };
  AttentionCache<double> cache;
  Matrix<double> out;
  SoftmaxAttentionForward(block, queries, keys, &cache, &out);
  AttentionBlock<double> grad =
      ZeroLike(LayerWeights<double>{block, block, block, block})[BlockId::kPointsToCenters];
  Matrix<double> d_keys = Matrix<double>::Zero(dim, 6);
  AttentionScratch<double> scratch;
  SoftmaxAttentionBackward(block, cache, probe, &grad, &d_keys, &scratch);
  ExpectBlockGradients(loss, block, grad, "attention");
  ExpectGradient(loss, keys.data(), keys.size(), d_keys.data(), "keys");
}

TEST(SoftmaxAttention, BackwardAccumulates) {
  Rng rng(2);
  AttentionBlock<double> block = RandomSoftmaxBlock<double>(3, rng);
  const Matrix<double> z = NormalMatrix<double>(3, 4, rng), probe = NormalMatrix<double>(3, 4, rng);
  AttentionCache<double> cache;
  Matrix<double> out;
  SoftmaxAttentionForward(block, z, z, &cache, &out);
  LayerWeights<double> once = ZeroLike(LayerWeights<double>{block, block, block, block});
  LayerWeights<double> twice = once;
  AttentionScratch<double> scratch;
  SoftmaxAttentionBackward<double>(block, cache, probe, &once[BlockId::kPointsToPoints], nullptr,
                                   &scratch);
  SoftmaxAttentionBackward<double>(block, cache, probe, &twice[BlockId::kPointsToPoints], nullptr,
                                   &scratch);
  SoftmaxAttentionBackward<double>(block, cache, probe, &twice[BlockId::kPointsToPoints], nullptr,
                                   &scratch);
  EXPECT_LE((twice[BlockId::kPointsToPoints].Q - 2 * once[BlockId::kPointsToPoints].Q).norm(),
            1e-12);
}

TEST(SoftmaxAttention, ForwardEqualsTheServingEvaluator) {
  Rng rng(3);
  const AttentionBlock<double> block = RandomSoftmaxBlock<double>(5, rng);
  const Matrix<double> queries = NormalMatrix<double>(5, 9, rng),
                       keys = NormalMatrix<double>(5, 13, rng);
  AttentionCache<double> cache;
  Matrix<double> out;
  SoftmaxAttentionForward(block, queries, keys, &cache, &out);
  EXPECT_LE((out - Attend(block, queries, keys)).norm(), 1e-12);
}

TEST(SmoothedObjective, GradientMatchesFiniteDifferences) {
  Rng rng(4);
  const Matrix<double> points = NormalMatrix<double>(3, 11, rng);
  for (LossForm form : {LossForm::kSoftmax, LossForm::kSparsemax}) {
    Matrix<double> centers = NormalMatrix<double>(3, 4, rng);
    const auto loss = [&] {
      return SmoothedObjective<double>(points, centers, 0.5, form, 1.0, nullptr);
    };
    Matrix<double> grad = Matrix<double>::Zero(3, 4);
    SmoothedObjective<double>(points, centers, 0.5, form, 1.0, &grad);
    ExpectGradient(loss, centers.data(), centers.size(), grad.data(),
                   std::string(LossFormName(form)));
  }
}

TEST(LearnedLayer, BackwardMatchesFiniteDifferences) {
  for (Embedding embedding : {Embedding::kOneHot, Embedding::kBinary, Embedding::kNone}) {
    SCOPED_TRACE(EmbeddingName(embedding));
    Rng rng(6);
    const int d = 3, k = 3, n = 7;
    const int dim = d + RegisterDim(embedding, k);
    LayerWeights<double> w = RandomSoftmaxLayer<double>(dim, rng);
    const Matrix<double> points = NormalMatrix<double>(d, n, rng), centers = points.leftCols(k);
    const auto loss = [&] {
      LayerCache<double> cache;
      return SmoothedObjective<double>(points, LayerForward(w, embedding, points, centers, &cache),
                                       0.3, LossForm::kSoftmax, 1.0, nullptr);
    };
    LayerCache<double> cache;
    const Matrix<double> out = LayerForward(w, embedding, points, centers, &cache);
    Matrix<double> d_out = Matrix<double>::Zero(d, k);
    SmoothedObjective<double>(points, out, 0.3, LossForm::kSoftmax, 1.0, &d_out);
    LayerWeights<double> grad = ZeroLike(w);
    LayerBackward(w, d_out, &cache, &grad);
    for (BlockId id : kBlockIds) {
      ExpectBlockGradients(loss, w[id], grad[id], std::string(BlockName(id)));
    }
  }
}

TEST(LearnedLayer, ForwardEqualsOneLayerOfTheServingEvaluator) {
  Rng rng(7);
  const int d = 4, k = 3;
  Model<double> model;
  model.d = d;
  model.k = k;
  model.embedding = Embedding::kBinary;
  model.reembed = true;
  model.keep_empty_centers = false;
  model.layers.push_back(RandomSoftmaxLayer<double>(d + 2, rng));
  const Matrix<double> points = NormalMatrix<double>(d, 40, rng), centers = points.leftCols(k);
  LayerCache<double> cache;
  const Matrix<double> trained =
      LayerForward(model.layers[0], model.embedding, points, centers, &cache);
  const RunResult<double> served = *RunTransformer(model, points, centers, {.layers = 1});
  EXPECT_LE((trained - served.centers).norm(), 1e-12 * trained.norm());
  // Re-embedding: layer 2 starts from [X; 0] and the new centers.
  const RunResult<double> two = *RunTransformer(model, points, centers, {.layers = 2});
  const Matrix<double> second =
      LayerForward(model.layers[0], model.embedding, points, trained, &cache);
  EXPECT_LE((second - two.centers).norm(), 1e-12 * second.norm());
}

// The trainer reuses one cache per thread across tasks: a cache that last
// held the same or other shapes gives exactly what a fresh one gives,
// forward and back.
TEST(LearnedLayer, ReusedCacheGivesWhatAFreshOneGives) {
  Rng rng(8);
  const int d = 3, k = 3;
  const LayerWeights<double> w = RandomSoftmaxLayer<double>(d + k, rng);
  LayerCache<double> reused;
  for (int n : {12, 7, 7, 20}) {
    SCOPED_TRACE(n);
    const Matrix<double> points = NormalMatrix<double>(d, n, rng), centers = points.leftCols(k);
    const Matrix<double> d_out = NormalMatrix<double>(d, k, rng);
    LayerCache<double> fresh;
    const Matrix<double> expected = LayerForward(w, Embedding::kOneHot, points, centers, &fresh);
    const Matrix<double> got = LayerForward(w, Embedding::kOneHot, points, centers, &reused);
    EXPECT_TRUE(got == expected) << got << "\nexpected\n" << expected;
    LayerWeights<double> expected_grad = ZeroLike(w), grad = ZeroLike(w);
    LayerBackward(w, d_out, &fresh, &expected_grad);
    LayerBackward(w, d_out, &reused, &grad);
    for (BlockId id : kBlockIds) {
      SCOPED_TRACE(BlockName(id));
      EXPECT_TRUE(grad[id].Q == expected_grad[id].Q);
      EXPECT_TRUE(grad[id].K == expected_grad[id].K);
      EXPECT_TRUE(grad[id].V == expected_grad[id].V);
      EXPECT_TRUE(grad[id].bQ == expected_grad[id].bQ);
      EXPECT_TRUE(grad[id].bK == expected_grad[id].bK);
      EXPECT_TRUE(grad[id].bV == expected_grad[id].bV);
    }
  }
}

}  // namespace
}  // namespace kmt
