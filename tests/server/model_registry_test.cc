// The registry: the exact constructions always, and the model directory's
// files, each one served or refused with a reason.
#include "server/model_registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "proto/model_file.h"
#include "proto/raw_payload.h"
#include "server/batch_runner.h"

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
  const std::shared_ptr<const RegistryEntry> onehot = registry.Find("lloyd-onehot");
  ASSERT_NE(onehot, nullptr);
  EXPECT_EQ(onehot->info.kind(), "exact");
  EXPECT_EQ(onehot->info.embedding(), "onehot");
  EXPECT_EQ(onehot->info.d(), 0);
  EXPECT_EQ(onehot->info.input_scaling(), "none");
  EXPECT_TRUE(onehot->served<float>().exact());
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
  for (const auto& e : registry.models()) names.push_back(e->info.name());
  EXPECT_EQ(names, (std::vector<std::string>{"lloyd-onehot", "lloyd-binary", "lloyd-onehot-dot",
                                             "lloyd-onehot-linear", "soft-kmeans", "trimmed-kmeans",
                                             "robust-kmeans", "kmedoids", "spherical-kmeans",
                                             "learned-a", "learned-b"}));
  const std::shared_ptr<const RegistryEntry> b = registry.Find("learned-b");
  EXPECT_EQ(b->info.kind(), "learned");
  EXPECT_EQ(b->info.d(), 2);
  EXPECT_EQ(b->info.k(), 3);
  EXPECT_EQ(b->info.input_scaling(), "min-max");
  EXPECT_EQ(b->info.description(), "a test model");
  EXPECT_EQ(b->info.provenance().seed(), 17u);
  EXPECT_EQ(b->served<float>().input_scaling(), InputScaling::kMinMax);
  ASSERT_NE(b->served<float>().weights(), nullptr);

  const std::string d = dir_.string();
  EXPECT_EQ(refused, (std::vector<std::string>{
                         d + "/broken.kmt: " + d +
                             "/broken.kmt is not a kmt.v1.ModelFile (protobuf parse failed)",
                         d + "/c.kmt: a model named 'learned-a' is already served from a.kmt",
                         d + "/lloyd.kmt: 'lloyd-onehot' is an exact model, built in"}));
}

TEST_F(ModelRegistryTest, AFileServesFloat64BatchesWithItsWeightsInDouble) {
  Write("a.kmt", "learned-a", InputScaling::kNone);
  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load(dir_.string(), &refused);
  EXPECT_TRUE(refused.empty());
  const std::shared_ptr<const RegistryEntry> a = registry.Find("learned-a");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(a->served<double>().weights(), nullptr);
  const absl::StatusOr<Model<double>> file = ReadModel<double>((dir_ / "a.kmt").string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(a->served<double>().weights()->layers[0][BlockId::kPointsToCenters].Q,
            file->layers[0][BlockId::kPointsToCenters].Q);
  EXPECT_EQ(a->served<double>().name(), "learned-a");
  // The file is Lloyd's construction: in double too it is recognised and
  // runs the fast path, so a float64 batch gets exact Lloyd's in double,
  // the answer of lloyd-onehot to the bit.
  v1::ClusterRequest r;
  r.set_model("learned-a");
  r.set_n(6);
  r.set_d(2);
  r.set_k(3);
  r.set_iterations(3);
  r.set_init(v1::INIT_GIVEN);
  r.set_raw_response(true);
  const std::vector<double> points = {0.1, 0.2, 0.3, 0.1, 5.7, 5.1, 5.3, 5.9, 9.1, 0.3, 9.9, 0.7};
  EncodeFloat64(points, r.mutable_points_f64());
  EncodeFloat64(absl::MakeConstSpan(points).subspan(0, 6), r.mutable_centers_f64());
  const Limits limits;
  const v1::ClusterResponse learned = RunBatch(registry, limits, r, {});
  r.set_model("lloyd-onehot");
  const v1::ClusterResponse exact = RunBatch(registry, limits, r, {});
  ASSERT_FALSE(learned.has_error()) << learned.error().message();
  ASSERT_FALSE(exact.has_error()) << exact.error().message();
  EXPECT_EQ(learned.centers_f64().size(), 3u * 2 * 8);
  EXPECT_EQ(learned.centers_f64(), exact.centers_f64());
  EXPECT_EQ(learned.labels_i32(), exact.labels_i32());
  EXPECT_EQ(learned.objective(), exact.objective());
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
  const std::shared_ptr<const RegistryEntry> padded = registry.Find("padded");
  ASSERT_NE(padded, nullptr);
  const v1::ModelInfo& info = padded->info;
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

// The state of `version` of `name` as ListModels gives it.
v1::ModelVersion VersionOf(const ModelRegistry& registry, const std::string& name,
                           int64_t version) {
  const absl::StatusOr<v1::ModelInfo> info = registry.Describe(name);
  EXPECT_TRUE(info.ok()) << info.status();
  if (info.ok()) {
    for (const v1::ModelVersion& v : info->versions()) {
      if (v.version() == version) return v;
    }
  }
  return {};
}

TEST_F(ModelRegistryTest, VersionDirectoriesServeTheHighestByDefault) {
  std::filesystem::create_directories(dir_ / "m" / "1");
  std::filesystem::create_directories(dir_ / "m" / "3");
  std::filesystem::create_directories(dir_ / "m" / "2");  // empty: not yet a version
  std::filesystem::create_directories(dir_ / "m" / "x");  // not a number: ignored
  Write("m/1/model.kmt", "trained-as-anything", InputScaling::kNone);
  Write("m/3/model.kmt", "m", InputScaling::kMinMax);
  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load(dir_.string(), &refused);
  EXPECT_TRUE(refused.empty());
  ASSERT_NE(registry.Find("m"), nullptr);
  EXPECT_EQ(registry.Find("m")->version, 3);
  EXPECT_EQ(registry.Find("m")->info.name(), "m");
  EXPECT_EQ(registry.Find("m")->info.input_scaling(), "min-max");
  EXPECT_EQ(registry.Find("m", 1)->version, 1);
  EXPECT_EQ(registry.Find("m", 1)->info.name(), "m");  // the directory names the model
  EXPECT_EQ(registry.Find("m", 2), nullptr);
  EXPECT_EQ(registry.Find("trained-as-anything"), nullptr);
  const absl::StatusOr<std::shared_ptr<const RegistryEntry>> missing = registry.Resolve("m", 2);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "model 'm' has no version 2 available; available: 1, 3");
  const v1::ListModelsResponse listed = registry.List();
  ASSERT_EQ(listed.models_size(), 10);
  const v1::ModelInfo& m = listed.models(9);
  EXPECT_EQ(m.name(), "m");
  EXPECT_EQ(m.default_version(), 3);
  ASSERT_EQ(m.versions_size(), 2);
  EXPECT_EQ(m.versions(0).version(), 1);
  EXPECT_EQ(m.versions(0).state(), v1::MODEL_VERSION_AVAILABLE);
  EXPECT_EQ(m.versions(0).path(), "m/1/model.kmt");
  EXPECT_EQ(m.versions(1).version(), 3);
  EXPECT_EQ(listed.models(0).default_version(), 1);
  EXPECT_EQ(listed.models(0).versions_size(), 1);
}

TEST_F(ModelRegistryTest, KeepVersionsServesTheLatestAvailableAndReadsNoOlderFile) {
  Matrix<double> centers(2, 3);
  centers << 0, 1, 2, 3, 4, 5;
  for (const char* version : {"1", "2", "3", "4"}) {
    std::filesystem::create_directories(dir_ / "fit" / version);
  }
  std::ofstream(dir_ / "fit" / "1" / "model.kmt") << "garbage";  // never read
  for (const char* version : {"2", "3"}) {
    ASSERT_TRUE(WriteModelFile(FittedToProto<double>("fit", centers, {}),
                               (dir_ / "fit" / version / "model.kmt").string())
                    .ok());
  }
  std::ofstream(dir_ / "fit" / "4" / "model.kmt") << "garbage";  // refused: does not count
  std::vector<std::string> refused;
  const ModelRegistry registry = ModelRegistry::Load(dir_.string(), &refused, 2);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("fit/4/model.kmt"), std::string::npos) << refused[0];
  const absl::StatusOr<v1::ModelInfo> info = registry.Describe("fit");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->kind(), "fitted");
  EXPECT_EQ(info->default_version(), 3);
  ASSERT_EQ(info->versions_size(), 4);
  EXPECT_EQ(info->versions(0).state(), v1::MODEL_VERSION_RETIRED);
  EXPECT_EQ(info->versions(0).reason(), "older than the latest 2 available (--keep_versions)");
  EXPECT_EQ(info->versions(1).state(), v1::MODEL_VERSION_AVAILABLE);
  EXPECT_EQ(info->versions(2).state(), v1::MODEL_VERSION_AVAILABLE);
  EXPECT_EQ(info->versions(3).state(), v1::MODEL_VERSION_FAILED);
  const std::shared_ptr<const RegistryEntry> served = registry.Find("fit");
  ASSERT_NE(served, nullptr);
  ASSERT_NE(served->fitted, nullptr);
  EXPECT_TRUE(served->fitted->float64());
  EXPECT_EQ(served->fitted->Centers<double>(), centers);
  EXPECT_EQ(served->served<float>().name(), "lloyd-onehot");
}

TEST_F(ModelRegistryTest, AScanLoadsReplacesAndRetiresWhileABatchKeepsItsVersion) {
  ModelRegistry registry(dir_.string());
  EXPECT_TRUE(registry.Scan().refused.empty());
  EXPECT_EQ(registry.Find("a"), nullptr);

  Write("a.kmt", "a", InputScaling::kNone);
  ScanReport report = registry.Scan();
  EXPECT_EQ(report.loaded, (std::vector<std::string>{"a version 1 (a.kmt)"}));
  const std::shared_ptr<const RegistryEntry> first = registry.Find("a");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->info.input_scaling(), "none");

  // Unchanged: nothing is read again, the same weights serve.
  report = registry.Scan();
  EXPECT_TRUE(report.loaded.empty());
  EXPECT_EQ(registry.Find("a"), first);

  Write("a.kmt", "a", InputScaling::kMinMax);
  report = registry.Scan();
  EXPECT_EQ(report.loaded, (std::vector<std::string>{"a version 1 (a.kmt)"}));
  EXPECT_EQ(registry.Find("a")->info.input_scaling(), "min-max");
  EXPECT_EQ(first->info.input_scaling(), "none");  // what a batch holds is whole

  std::filesystem::remove(dir_ / "a.kmt");
  report = registry.Scan();
  EXPECT_EQ(report.retired, (std::vector<std::string>{"a version 1"}));
  EXPECT_EQ(registry.Find("a"), nullptr);
  EXPECT_TRUE(registry.Known("a"));
  const v1::ListModelsResponse listed = registry.List();
  ASSERT_EQ(listed.unavailable_size(), 1);
  EXPECT_EQ(listed.unavailable(0).name(), "a");
  EXPECT_EQ(listed.unavailable(0).versions(0).state(), v1::MODEL_VERSION_RETIRED);
  EXPECT_EQ(registry.Resolve("a", 0).status().message(),
            "model 'a' has no version available; 1 retired: its file was removed");
}

TEST_F(ModelRegistryTest, ABadFileNeverTakesTheServedVersionDown) {
  ModelRegistry registry(dir_.string());
  Write("a.kmt", "a", InputScaling::kNone);
  registry.Scan();
  const std::shared_ptr<const RegistryEntry> good = registry.Find("a");
  ASSERT_NE(good, nullptr);

  std::string bytes;
  ASSERT_TRUE(ReadModelFile((dir_ / "a.kmt").string())->SerializeToString(&bytes));
  std::ofstream(dir_ / "a.kmt", std::ios::binary | std::ios::trunc) << bytes.substr(0, 100);
  std::filesystem::last_write_time(
      dir_ / "a.kmt", std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
  ScanReport report = registry.Scan();
  ASSERT_EQ(report.refused.size(), 1u);
  EXPECT_EQ(report.refused[0].second, "corrupt");
  EXPECT_EQ(registry.Find("a"), good);
  const v1::ModelVersion v = VersionOf(registry, "a", 1);
  EXPECT_EQ(v.state(), v1::MODEL_VERSION_AVAILABLE);
  EXPECT_NE(v.reason().find("the file is refused, the version loaded before serves"),
            std::string::npos)
      << v.reason();
  // Refused once, not at every scan.
  EXPECT_TRUE(registry.Scan().refused.empty());

  // NaN weights: a ModelFile the engine must not serve.
  Model<float> m = *LloydConstruction<float>(2, 3, {.embedding = Embedding::kOneHot});
  m.name = "a";
  v1::ModelFile nan = ModelToProto(m);
  nan.mutable_layers(0)->mutable_points_to_centers()->mutable_q()->set_values(0, std::nan(""));
  ASSERT_TRUE(WriteModelFile(nan, (dir_ / "a.kmt").string()).ok());
  std::filesystem::last_write_time(
      dir_ / "a.kmt", std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
  report = registry.Scan();
  ASSERT_EQ(report.refused.size(), 1u);
  EXPECT_EQ(report.refused[0].second, "invalid");
  EXPECT_EQ(registry.Find("a"), good);

  Write("a.kmt", "a", InputScaling::kMinMax);
  report = registry.Scan();
  EXPECT_EQ(report.loaded.size(), 1u);
  EXPECT_EQ(registry.Find("a")->info.input_scaling(), "min-max");
  EXPECT_EQ(VersionOf(registry, "a", 1).reason(), "");
}

TEST_F(ModelRegistryTest, AFileBeingWrittenIsRetriedNotFailed) {
  ModelRegistry registry(dir_.string());
  registry.Scan();
  Write("full.kmt", "w", InputScaling::kNone);
  std::string bytes;
  ASSERT_TRUE(ReadModelFile((dir_ / "full.kmt").string())->SerializeToString(&bytes));
  std::filesystem::remove(dir_ / "full.kmt");
  // Half the file, modified "now" (an hour ahead, so however slow this
  // machine is, the file is still moments old at the scan).
  std::ofstream(dir_ / "w.kmt", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::filesystem::last_write_time(
      dir_ / "w.kmt", std::filesystem::file_time_type::clock::now() + std::chrono::hours(1));
  ScanReport report = registry.Scan();
  EXPECT_TRUE(report.refused.empty());
  EXPECT_EQ(VersionOf(registry, "w", 1).state(), v1::MODEL_VERSION_LOADING);
  EXPECT_EQ(registry.VersionCounts()[v1::MODEL_VERSION_LOADING], 1);

  std::ofstream(dir_ / "w.kmt", std::ios::binary | std::ios::app) << bytes.substr(bytes.size() / 2);
  report = registry.Scan();
  EXPECT_TRUE(report.refused.empty());
  EXPECT_EQ(report.loaded, (std::vector<std::string>{"w version 1 (w.kmt)"}));
  ASSERT_NE(registry.Find("w"), nullptr);
}

TEST_F(ModelRegistryTest, ASymlinkSwapToTheSameBytesReloadsNothing) {
  // A Kubernetes ConfigMap volume: name.kmt -> ..data/name.kmt, ..data ->
  // a timestamped directory, swapped by renaming a new ..data into place.
  namespace fs = std::filesystem;
  fs::create_directories(dir_ / "..2024_1");
  Write("..2024_1/s.kmt", "s", InputScaling::kNone);
  fs::create_directory_symlink("..2024_1", dir_ / "..data");
  fs::create_symlink("..data/s.kmt", dir_ / "s.kmt");
  ModelRegistry registry(dir_.string());
  EXPECT_TRUE(registry.Scan().refused.empty());
  const std::shared_ptr<const RegistryEntry> first = registry.Find("s");
  ASSERT_NE(first, nullptr);

  auto swap_to = [&](const std::string& target) {
    fs::create_directory_symlink(target, dir_ / "..data_tmp");
    fs::rename(dir_ / "..data_tmp", dir_ / "..data");
  };
  fs::copy(dir_ / "..2024_1", dir_ / "..2024_2");
  swap_to("..2024_2");
  fs::remove_all(dir_ / "..2024_1");
  EXPECT_TRUE(registry.Scan().loaded.empty());
  EXPECT_EQ(registry.Find("s"), first);

  fs::create_directories(dir_ / "..2024_3");
  Write("..2024_3/s.kmt", "s", InputScaling::kMinMax);
  swap_to("..2024_3");
  EXPECT_EQ(registry.Scan().loaded, (std::vector<std::string>{"s version 1 (s.kmt)"}));
  EXPECT_EQ(registry.Find("s")->info.input_scaling(), "min-max");
}

TEST_F(ModelRegistryTest, UnloadRetiresUntilLoad) {
  std::filesystem::create_directories(dir_ / "u" / "1");
  std::filesystem::create_directories(dir_ / "u" / "2");
  Write("u/1/model.kmt", "u", InputScaling::kNone);
  Write("u/2/model.kmt", "u", InputScaling::kNone);
  ModelRegistry registry(dir_.string());
  registry.Scan();
  ScanReport report;
  ASSERT_TRUE(registry.UnloadModel("u", 2, &report).ok());
  EXPECT_EQ(report.retired, (std::vector<std::string>{"u version 2"}));
  EXPECT_EQ(registry.Find("u")->version, 1);    // the default falls back
  EXPECT_TRUE(registry.Scan().loaded.empty());  // a scan keeps it unloaded
  EXPECT_EQ(VersionOf(registry, "u", 2).state(), v1::MODEL_VERSION_RETIRED);

  ASSERT_TRUE(registry.UnloadModel("u", 0, &report).ok());
  EXPECT_EQ(registry.Find("u"), nullptr);
  ASSERT_TRUE(registry.LoadModel("u", 0, &report).ok());
  EXPECT_EQ(report.loaded.size(), 2u);
  EXPECT_EQ(registry.Find("u")->version, 2);

  EXPECT_EQ(registry.UnloadModel("lloyd-onehot", 0, &report).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry.UnloadModel("nothing", 0, &report).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.LoadModel("nothing", 0, &report).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.UnloadModel("u", 7, &report).code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelRegistryTest, AFlatFileCannotTakeAVersionDirectorysName) {
  std::filesystem::create_directories(dir_ / "v" / "1");
  Write("v/1/model.kmt", "v", InputScaling::kNone);
  Write("flat.kmt", "v", InputScaling::kMinMax);
  std::vector<std::string> refused;
  ModelRegistry registry = ModelRegistry::Load(dir_.string(), &refused);
  EXPECT_EQ(refused,
            (std::vector<std::string>{(dir_ / "flat.kmt").string() +
                                      ": a model named 'v' is already served from v/1/model.kmt"}));
  EXPECT_EQ(registry.Find("v")->info.input_scaling(), "none");
  // Once the name is free the file serves.
  std::filesystem::remove_all(dir_ / "v");
  registry.Scan();
  ASSERT_NE(registry.Find("v"), nullptr);
  EXPECT_EQ(registry.Find("v")->info.input_scaling(), "min-max");
}

// Names are bytes on Linux, but ListModels' strings must be UTF-8: a client
// refuses a response holding other bytes, so one such file would fail
// ListModels for everyone.
TEST_F(ModelRegistryTest, APathThatIsNotUtf8IsRefusedOnceAndNeverListed) {
  const std::string latin1 = "caf\xe9";  // "cafe" with an accent, in Latin-1
  std::filesystem::create_directories(dir_ / latin1 / "1");
  Write(latin1 + "/1/model.kmt", "a", InputScaling::kNone);
  Write(latin1 + ".kmt", "b", InputScaling::kNone);
  Write("caf\xc3\xa9.kmt", "utf8", InputScaling::kNone);  // the same name in UTF-8 serves
  std::vector<std::string> refused;
  ModelRegistry registry = ModelRegistry::Load(dir_.string(), &refused);
  const std::string escaped = dir_.string() + "/caf\\xe9";
  const std::string why = ": its path is not UTF-8, which ListModels cannot carry: rename it";
  EXPECT_EQ(refused,
            (std::vector<std::string>{escaped + "/1/model.kmt" + why, escaped + ".kmt" + why}));
  const v1::ListModelsResponse listed = registry.List();
  std::string bytes;
  ASSERT_TRUE(listed.SerializeToString(&bytes));
  v1::ListModelsResponse parsed;
  EXPECT_TRUE(parsed.ParseFromString(bytes));  // as a client parses it
  EXPECT_EQ(parsed.models_size(), 10);
  EXPECT_EQ(parsed.models(9).name(), "utf8");
  EXPECT_EQ(parsed.unavailable_size(), 0);
  EXPECT_TRUE(registry.Scan().refused.empty());  // refused once, not at every scan
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
