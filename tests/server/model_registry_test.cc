// The registry: the exact constructions always, and the model directory's
// files, each one served or refused with a reason.
#include "server/model_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "proto/model_file.h"

namespace kmt {
namespace {

class ModelRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kmt-registry-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A file named `file` holding a model named `name`.
  void Write(const std::string& file, const std::string& name, InputScaling scaling) {
    Model<float> m = *LloydConstruction<float>(2, 3, {.embedding = Embedding::kOneHot});
    m.name = name;
    m.input_scaling = scaling;
    v1::ModelFile proto = ModelToProto(m);
    proto.set_description("a test model");
    proto.mutable_provenance()->set_seed(17);
    ASSERT_TRUE(WriteModelFile(proto, (dir_ / file).string()).ok());
  }

  std::filesystem::path dir_;
};

TEST_F(ModelRegistryTest, ExactModelsWithoutADirectory) {
  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load("", &refused);
  EXPECT_TRUE(refused.empty());
  ASSERT_EQ(registry.models().size(), 9u);
  const RegistryEntry* onehot = registry.Find("lloyd-onehot");
  ASSERT_NE(onehot, nullptr);
  EXPECT_EQ(onehot->info.kind(), "exact");
  EXPECT_EQ(onehot->info.embedding(), "onehot");
  EXPECT_EQ(onehot->info.d(), 0);
  EXPECT_EQ(onehot->info.input_scaling(), "none");
  EXPECT_TRUE(onehot->model.exact());
  EXPECT_EQ(registry.Find("lloyd-binary")->info.embedding(), "binary");
  EXPECT_EQ(registry.Find("nothing"), nullptr);
}

TEST_F(ModelRegistryTest, FilesAreServedOrRefusedWithAReason) {
  Write("b.kmt", "learned-b", InputScaling::kMinMax);
  Write("a.kmt", "learned-a", InputScaling::kNone);
  Write("c.kmt", "learned-a", InputScaling::kNone);  // a name already served
  Write("lloyd.kmt", "lloyd-onehot", InputScaling::kNone);
  std::ofstream(dir_ / "broken.kmt") << "garbage";
  std::ofstream(dir_ / "notes.txt") << "not a model file: ignored";
  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load(dir_.string(), &refused);

  std::vector<std::string> names;
  for (const RegistryEntry& e : registry.models()) names.push_back(e.info.name());
  EXPECT_EQ(names, (std::vector<std::string>{"lloyd-onehot", "lloyd-binary", "lloyd-onehot-dot",
                                             "lloyd-onehot-linear", "soft-kmeans", "trimmed-kmeans",
                                             "robust-kmeans", "kmedoids", "spherical-kmeans",
                                             "learned-a", "learned-b"}));
  const RegistryEntry* b = registry.Find("learned-b");
  EXPECT_EQ(b->info.kind(), "learned");
  EXPECT_EQ(b->info.d(), 2);
  EXPECT_EQ(b->info.k(), 3);
  EXPECT_EQ(b->info.input_scaling(), "min-max");
  EXPECT_EQ(b->info.description(), "a test model");
  EXPECT_EQ(b->info.provenance().seed(), 17u);
  EXPECT_EQ(b->model.input_scaling(), InputScaling::kMinMax);
  ASSERT_NE(b->model.weights(), nullptr);

  const std::string d = dir_.string();
  EXPECT_EQ(refused, (std::vector<std::string>{
                         d + "/broken.kmt: " + d +
                             "/broken.kmt is not a kmt.v1.ModelFile (protobuf parse failed)",
                         d + "/c.kmt: a model named 'learned-a' is already served",
                         d + "/lloyd.kmt: a model named 'lloyd-onehot' is already served"}));
}

TEST_F(ModelRegistryTest, ALearnedModelListsTheSizesItAccepts) {
  Model<float> m = *LloydConstruction<float>(4, 3, {.embedding = Embedding::kOneHot});
  m.name = "padded";
  m.reembed = true;
  m.padded_sizes = {{.d = 2, .k = 3}, {.d = 4, .k = 2}};
  ASSERT_TRUE(WriteModelFile(ModelToProto(m), (dir_ / "padded.kmt").string()).ok());
  Write("plain.kmt", "plain", InputScaling::kNone);
  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load(dir_.string(), &refused);
  EXPECT_TRUE(refused.empty());
  const v1::ModelInfo& info = registry.Find("padded")->info;
  ASSERT_EQ(info.accepted_sizes_size(), 3);
  const std::vector<std::pair<int, int>> expected = {{4, 3}, {2, 3}, {4, 2}};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(info.accepted_sizes(i).d(), expected[i].first);
    EXPECT_EQ(info.accepted_sizes(i).k(), expected[i].second);
  }
  ASSERT_EQ(registry.Find("plain")->info.accepted_sizes_size(), 1);
  EXPECT_EQ(registry.Find("plain")->info.accepted_sizes(0).d(), 2);
  EXPECT_EQ(registry.Find("lloyd-onehot")->info.accepted_sizes_size(), 0);
}

TEST_F(ModelRegistryTest, AMissingDirectoryIsReported) {
  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load((dir_ / "missing").string(), &refused);
  EXPECT_EQ(registry.models().size(), 9u);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].rfind("model directory " + (dir_ / "missing").string() + ": ", 0), 0u)
      << refused[0];
}

}  // namespace
}  // namespace kmt
