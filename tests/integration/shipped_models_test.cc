// The models shipped in models/: each file loads, says how it was made, and
// does on fresh held-out tasks what docs/learning.md says it does.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/transformer.h"
#include "learn/task_generator.h"
#include "proto/model_file.h"

namespace kmt {
namespace {

const std::string kModels = KMT_SOURCE_DIR "/models";

// Mean over held-out tasks of log objective after 20 steps: the model's and
// Lloyd's from the same first-k-points initial centers.
std::pair<double, double> MeanLogObjective(const Model<float>& model, int tasks) {
  double learned = 0, lloyd = 0;
  for (int t = 0; t < tasks; ++t) {
    const Matrix<float> points =
        GenerateTask<float>({.n = 512, .d = model.d, .k = model.k}, 777000 + t).points;
    const Matrix<float> init = points.leftCols(model.k);
    learned += std::log(RunTransformer(model, points, init, {.layers = 20})->objective);
    lloyd += std::log(RunLloyd<float>({}, points, init, {.layers = 20})->objective);
  }
  return {learned / tasks, lloyd / tasks};
}

Model<float> Load(const std::string& name) {
  absl::StatusOr<v1::ModelFile> file = ReadModelFile(kModels + "/" + name + ".kmt");
  EXPECT_TRUE(file.ok()) << file.status();
  absl::StatusOr<Model<float>> model = ModelFromProto<float>(*file);
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
    EXPECT_TRUE(ModelFromProto<float>(*file).ok());
    EXPECT_EQ(file->name() + ".kmt", entry.path().filename().string());
    EXPECT_EQ(file->input_scaling(), v1::SCALING_GLOBAL_MIN_MAX);
    EXPECT_NE(file->provenance().training_config().find("steps="), std::string::npos);
    EXPECT_TRUE(file->provenance().final_metrics().count("validation_ratio"));
    // The initialisations it was trained from, as its training ran them.
    const absl::StatusOr<Model<float>> model = ModelFromProto<float>(*file);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_FALSE(model->trained_inits.empty());
    std::string inits;
    for (InitMethod method : model->trained_inits) {
      inits += (inits.empty() ? "" : ",") + std::string(InitMethodName(method));
    }
    EXPECT_NE(file->provenance().training_config().find("\ninit=" + inits + "\n"),
              std::string::npos)
        << file->provenance().training_config();
  }
  EXPECT_EQ(files, 4);
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

}  // namespace
}  // namespace kmt
