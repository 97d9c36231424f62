// The models shipped in models/: each file loads, says how it was made, and
// does on fresh held-out tasks what docs/learning.md says it does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/engine.h"
#include "core/init.h"
#include "core/random.h"
#include "core/transformer.h"
#include "learn/task_generator.h"
#include "proto/model_file.h"

namespace kmt {
namespace {

const std::string kModels = KMT_SOURCE_DIR "/models";

// Mean over held-out tasks of log objective after 20 steps: the model's and
// Lloyd's from the same initial centers (the first k points, or k-means++).
std::pair<double, double> MeanLogObjective(const Model<float>& model, int tasks,
                                           InitMethod method = InitMethod::kRandomSubset) {
  double learned = 0, lloyd = 0;
  for (int t = 0; t < tasks; ++t) {
    const Matrix<float> points =
        GenerateTask<float>({.n = 512, .d = model.d, .k = model.k}, 777000 + t).points;
    const Matrix<float> init = method == InitMethod::kRandomSubset
                                   ? Matrix<float>(points.leftCols(model.k))
                                   : *InitialCenters(points, model.k, method, 777000 + t);
    learned += std::log(RunTransformer(model, points, init, {.layers = 20})->objective);
    lloyd += std::log(RunLloyd<float>({}, points, init, {.layers = 20})->objective);
  }
  return {learned / tasks, lloyd / tasks};
}

Model<float> Load(const std::string& name) {
  absl::StatusOr<Model<float>> model = ReadModel<float>(kModels + "/" + name + ".kmt");
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

TEST(ShippedModels, EveryFileLoadsWithItsProvenance) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kModels)) {
    if (entry.path().extension() != ".kmt") continue;
    SCOPED_TRACE(entry.path().string());
    ++files;
    const absl::StatusOr<v1::ModelFile> file = ReadModelFile(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.status();
    const absl::StatusOr<Model<float>> model = ModelFromProto<float>(*file);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(file->name() + ".kmt", entry.path().filename().string());
    EXPECT_EQ(file->input_scaling(), v1::SCALING_GLOBAL_MIN_MAX);
    EXPECT_NE(file->provenance().training_config().find("steps="), std::string::npos);
    EXPECT_TRUE(file->provenance().final_metrics().count("validation_ratio"));
    // The initialisations it was trained from, as its training ran them.
    ASSERT_FALSE(model->trained_inits.empty());
    std::string inits;
    for (InitMethod method : model->trained_inits) {
      inits += (inits.empty() ? "" : ",") + std::string(InitMethodName(method));
    }
    EXPECT_NE(file->provenance().training_config().find("\ninit=" + inits + "\n"),
              std::string::npos)
        << file->provenance().training_config();
  }
  EXPECT_EQ(files, 6);
}

TEST(ShippedModels, RegistersBeatLloydAndTheAblationDoesNot) {
  for (const std::string name : {"learned-onehot-d32-k10", "learned-binary-d32-k10"}) {
    SCOPED_TRACE(name);
    const auto [learned, lloyd] = MeanLogObjective(Load(name), 48);
    std::printf("%s: mean log objective at T = 20: %.3f, Lloyd's %.3f\n", name.c_str(), learned,
                lloyd);
    EXPECT_LT(learned, lloyd - 0.05);
  }
  const auto [none, lloyd] = MeanLogObjective(Load("learned-none-d32-k10"), 48);
  std::printf("learned-none-d32-k10: %.3f, Lloyd's %.3f\n", none, lloyd);
  EXPECT_GT(none, lloyd);
}

TEST(ShippedModels, TheMixedInitModelHoldsItsOwnFromGreedyKMeansPlusPlus) {
  // Trained from greedy k-means++ and random centers in turn: ahead of
  // Lloyd's from random centers, and not behind it from greedy k-means++,
  // where the model trained from random centers alone is (by 0.06 on 960
  // tasks, docs/learning.md).
  const Model<float> model = Load("learned-onehot-d32-k10-kpp");
  EXPECT_EQ(model.trained_inits,
            (std::vector<InitMethod>{InitMethod::kKMeansPlusPlus, InitMethod::kRandomSubset}));
  const auto [random, lloyd_random] = MeanLogObjective(model, 48);
  const auto [greedy, lloyd_greedy] = MeanLogObjective(model, 48, InitMethod::kKMeansPlusPlus);
  const auto [random_model, lloyd_same] =
      MeanLogObjective(Load("learned-onehot-d32-k10"), 48, InitMethod::kKMeansPlusPlus);
  std::printf(
      "kpp from random: %.3f, Lloyd's %.3f; from greedy k-means++: %.3f, Lloyd's %.3f; "
      "the random-init model from greedy k-means++: %.3f\n",
      random, lloyd_random, greedy, lloyd_greedy, random_model);
  EXPECT_LT(random, lloyd_random - 0.05);
  EXPECT_LE(greedy, lloyd_greedy + 0.01);
  EXPECT_EQ(lloyd_same, lloyd_greedy);  // the same tasks and centers
  EXPECT_LT(greedy, random_model);
}

TEST(ShippedModels, TheLloydFinishedModelBeatsLloydsFromEveryStart) {
  // The -kpp model's layer for the first 10 steps, exact Lloyd's steps after.
  const Model<float> model = Load("learned-onehot-d32-k10-kpp-lloyd");
  const Model<float> kpp = Load("learned-onehot-d32-k10-kpp");
  EXPECT_EQ(model.lloyd_after, 10);
  EXPECT_EQ(kpp.lloyd_after, 0);
  ASSERT_EQ(model.layers.size(), 1u);
  for (BlockId id : kBlockIds) {
    EXPECT_EQ(model.layers[0][id].Q, kpp.layers[0][id].Q);
    EXPECT_EQ(model.layers[0][id].K, kpp.layers[0][id].K);
    EXPECT_EQ(model.layers[0][id].V, kpp.layers[0][id].V);
  }
  for (InitMethod method :
       {InitMethod::kRandomSubset, InitMethod::kKMeansPlusPlus, InitMethod::kPlainKMeansPlusPlus}) {
    const auto [finished, lloyd] = MeanLogObjective(model, 48, method);
    std::printf("from %s: -kpp-lloyd %.4f, Lloyd's %.4f\n",
                std::string(InitMethodName(method)).c_str(), finished, lloyd);
    EXPECT_LT(finished, lloyd) << InitMethodName(method);
    if (method == InitMethod::kKMeansPlusPlus) {
      // Where -kpp's own lead is thinnest, the hand-over adds to it.
      const double learned = MeanLogObjective(kpp, 48, method).first;
      std::printf("from kmeans++: -kpp %.4f\n", learned);
      EXPECT_LT(finished, learned);
    }
  }
}

// Where every layer's learned step beats the Lloyd's step from the same
// centers, the guarded model is the model itself, to the last bit; where
// one does not, the guarded run is ahead of the model at that layer.
TEST(ShippedModels, TheGuardedModelIsTheModelWhereverItsStepsWin) {
  const Model<float> model = Load("learned-onehot-d32-k10");
  Model<float> guarded = model;
  guarded.guard = true;

  const int kLayers = 2;
  int all_learned = 0, some_lloyd = 0;
  for (int t = 0; t < 48; ++t) {
    SCOPED_TRACE(t);
    const Matrix<float> points = GenerateTask<float>({}, 888000 + t).points;
    const Matrix<float> init = points.leftCols(model.k);
    const RunResult<float> plain = *RunTransformer(model, points, init, {.layers = kLayers});
    const RunResult<float> run = *RunTransformer(guarded, points, init, {.layers = kLayers});
    EXPECT_EQ(run.guard_learned_layers + run.guard_lloyd_layers, kLayers);
    if (run.guard_lloyd_layers == 0) {
      ++all_learned;
      EXPECT_EQ(run.layer_objectives, plain.layer_objectives);
      EXPECT_EQ(run.centers, plain.centers);
      EXPECT_EQ(run.labels, plain.labels);
    } else {
      ++some_lloyd;
      // Up to the first layer that kept Lloyd's step the two are the same;
      // that layer is below the model's.
      size_t first = 0;
      while (first < run.layer_objectives.size() &&
             run.layer_objectives[first] == plain.layer_objectives[first]) {
        ++first;
      }
      ASSERT_LT(first, run.layer_objectives.size());
      EXPECT_LT(run.layer_objectives[first], plain.layer_objectives[first]);
    }
  }
  EXPECT_GT(all_learned, 0);
  std::printf("%d of 48 tasks kept every learned step, %d a Lloyd's step\n", all_learned,
              some_lloyd);
}

// A task one component of which holds 60% of the points: k component means
// uniform in [0, 1]^d, normal noise of sd `scale`, scaled to [0, 1].
Matrix<float> DominantTask(int n, int d, int k, double scale, uint64_t seed) {
  Rng rng(seed);
  Matrix<float> means(d, k), points(d, n);
  for (Eigen::Index i = 0; i < means.size(); ++i) means(i) = static_cast<float>(rng.Uniform());
  for (int i = 0; i < n; ++i) {
    const int c = rng.Uniform() < 0.6 ? 0 : 1 + static_cast<int>(rng.Below(k - 1));
    for (int l = 0; l < d; ++l) {
      points(l, i) = means(l, c) + static_cast<float>(scale * rng.Normal());
    }
  }
  return points;
}

// The guarded answer is never behind exact Lloyd's from the same initial
// centers for the same layers, per task: over dominant-cluster tasks and the
// task generator's families off the training distribution, from random and
// greedy k-means++ centers. Guarding each layer alone falls behind on some
// of these tasks (counted, and required, so that the test tells the two
// apart); the answer's guard answers them with Lloyd's result.
TEST(ShippedModels, AGuardedAnswerIsNeverBehindLloydsFromTheSameStart) {
  int tasks = 0, behind_per_layer = 0, lloyd_answered = 0;
  for (const char* name : {"learned-binary-d32-k10", "learned-onehot-d32-k10"}) {
    const Model<float> weights = Load(name);
    const ServedModel<float> served = *ServedModel<float>::FromWeights(weights, "");
    Model<float> per_layer = weights;
    per_layer.guard = true;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      const int n = seed % 3 == 0 ? 128 : seed % 3 == 1 ? 512 : 1024;
      TaskOptions options{.n = n, .d = 32, .k = 10};
      if (seed % 4 == 1) options.isotropic = false;
      if (seed % 4 == 2) options.equal_weights = false;
      if (seed % 4 == 3) options.family = Family::kLaplace;
      const Matrix<float> points = seed % 2 == 0 ? DominantTask(n, 32, 10, 0.1, seed)
                                                 : GenerateTask<float>(options, seed).points;
      for (InitMethod init : {InitMethod::kRandomSubset, InitMethod::kKMeansPlusPlus}) {
        SCOPED_TRACE(absl::StrCat(name, " seed ", seed, " ", InitMethodName(init)));
        const Matrix<float> start = *InitialCenters(points, 10, init, seed);
        const int layers = 20;
        const double lloyd = RunLloyd<float>({}, points, start, {.layers = layers})->objective;
        const double layered =
            RunTransformer(per_layer, points, start, {.layers = layers})->objective;
        absl::StatusOr<Batch<float>> batch = Batch<float>::Validate(
            {.points = points, .k = 10, .layers = layers, .given_centers = start, .guard = true});
        ASSERT_TRUE(batch.ok()) << batch.status();
        const absl::StatusOr<RunResult<float>> answer = Cluster(served, *batch);
        ASSERT_TRUE(answer.ok()) << answer.status();
        EXPECT_LE(answer->objective, lloyd);
        ++tasks;
        behind_per_layer += layered > lloyd;
        lloyd_answered += answer->guard_lloyd_answered;
      }
    }
  }
  std::printf("%d tasks: the per-layer guard alone behind Lloyd's on %d; Lloyd's answered %d\n",
              tasks, behind_per_layer, lloyd_answered);
  EXPECT_GT(behind_per_layer, 0);
}

}  // namespace
}  // namespace kmt
