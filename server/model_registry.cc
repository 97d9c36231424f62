#include "server/model_registry.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "proto/model_file.h"

namespace kmt {
namespace {

ServedModel Exact(const LloydOptions& options, absl::string_view description) {
  ServedModel m;
  m.lloyd = options;
  m.info.set_name(LloydModelName(options));
  m.info.set_kind("exact");
  m.info.set_description(std::string(description));
  m.info.set_embedding(std::string(EmbeddingName(options.embedding)));
  m.info.set_input_scaling("none");
  return m;
}

absl::StatusOr<ServedModel> Learned(const std::string& path) {
  absl::StatusOr<v1::ModelFile> file = ReadModelFile(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<Model<float>> model = ModelFromProto<float>(*file);
  if (!model.ok()) return model.status();
  ServedModel m;
  m.fast = MatchLloyd(*model).has_value();
  m.model = std::make_shared<const Model<float>>(*std::move(model));
  m.min_max_scaling = file->input_scaling() == v1::SCALING_MIN_MAX;
  m.info.set_name(file->name());
  m.info.set_kind("learned");
  m.info.set_description(file->description());
  m.info.set_embedding(file->embedding());
  m.info.set_d(file->d());
  m.info.set_k(file->k());
  m.info.set_input_scaling(m.min_max_scaling ? "min-max" : "none");
  *m.info.mutable_provenance() = file->provenance();
  return m;
}

}  // namespace

ModelRegistry ModelRegistry::Load(const std::string& dir,
                                  std::vector<std::string>* refused) {
  ModelRegistry registry;
  registry.models_ = {
      Exact({.embedding = Embedding::kOneHot},
            "Lloyd's algorithm, one-hot registers (d + k per token), hardmax "
            "center update; any d and k; beta > 0 makes the assignment a softmax"),
      Exact({.embedding = Embedding::kBinary},
            "Lloyd's algorithm, binary registers (d + ceil(log2 k) per token); "
            "any d and k; beta > 0 makes the assignment a softmax"),
      Exact({.embedding = Embedding::kOneHot, .theta3 = Theta3Form::kLinear},
            "Lloyd's algorithm, one-hot registers, linear-attention center "
            "update (paper A's form); with beta > 0 it is soft k-means"),
  };
  if (dir.empty()) return registry;
  std::error_code error;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".kmt") files.push_back(entry.path());
  }
  if (error) {
    refused->push_back(absl::StrCat("model directory ", dir, ": ", error.message()));
    return registry;
  }
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& path : files) {
    absl::StatusOr<ServedModel> model = Learned(path.string());
    if (!model.ok()) {
      refused->push_back(absl::StrCat(path.string(), ": ", model.status().message()));
      continue;
    }
    if (registry.Find(model->info.name()) != nullptr) {
      refused->push_back(absl::StrCat(path.string(), ": a model named '",
                                      model->info.name(), "' is already served"));
      continue;
    }
    registry.models_.push_back(*std::move(model));
  }
  return registry;
}

const ServedModel* ModelRegistry::Find(absl::string_view name) const {
  for (const ServedModel& m : models_) {
    if (m.info.name() == name) return &m;
  }
  return nullptr;
}

}  // namespace kmt
