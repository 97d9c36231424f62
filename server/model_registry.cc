#include "server/model_registry.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "proto/init_method.h"
#include "proto/model_file.h"

namespace kmt {
namespace {

v1::ModelInfo Info(const ServedModel<float>& model) {
  v1::ModelInfo info;
  info.set_name(model.name());
  info.set_kind(model.exact() ? "exact" : "learned");
  info.set_description(model.description());
  info.set_embedding(std::string(EmbeddingName(model.embedding())));
  info.set_input_scaling(std::string(InputScalingName(model.input_scaling())));
  for (const ParameterSpec& p : model.parameters()) {
    v1::ModelParameter* out = info.add_parameters();
    out->set_name(p.name);
    out->set_description(p.description);
    out->set_default_value(p.default_value);
    out->set_min(p.min);
    out->set_max(p.max);
    out->set_min_exclusive(p.min_exclusive);
    out->set_max_exclusive(p.max_exclusive);
  }
  if (const Model<float>* weights = model.weights()) {
    info.set_d(weights->d);
    info.set_k(weights->k);
    for (InitMethod method : weights->trained_inits) info.add_trained_inits(InitToProto(method));
    info.set_lloyd_after(weights->lloyd_after);
    for (const ModelSize& size : model.accepted_sizes()) {
      v1::ModelSize* out = info.add_accepted_sizes();
      out->set_d(size.d);
      out->set_k(size.k);
    }
  }
  info.set_default_init(InitToProto(model.default_init()));
  info.set_accepts_weights(model.exact() && model.algorithm().weighted());
  info.set_unit_norm(model.exact() && model.algorithm().unit_norm());
  info.set_translation_invariant(model.exact() && model.algorithm().translation_invariant());
  info.set_lloyd_at_defaults(model.exact() && model.algorithm().lloyd_at_defaults());
  return info;
}

absl::StatusOr<RegistryEntry> Learned(const std::string& path) {
  absl::StatusOr<v1::ModelFile> file = ReadModelFile(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<Model<float>> weights = ModelFromProto<float>(*file);
  if (!weights.ok()) return weights.status();
  absl::StatusOr<ServedModel<float>> model =
      ServedModel<float>::FromWeights(*std::move(weights), file->description());
  if (!model.ok()) return model.status();
  RegistryEntry entry{.model = *std::move(model), .info = {}};
  entry.info = Info(entry.model);
  *entry.info.mutable_provenance() = file->provenance();
  return entry;
}

}  // namespace

absl::Status CheckModelDirectory(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  std::error_code error;
  std::filesystem::directory_iterator listing(dir, error);
  if (!error) return absl::OkStatus();
  std::error_code ignored;
  const std::string path = std::filesystem::absolute(dir, ignored).lexically_normal().string();
  if (error == std::errc::no_such_file_or_directory) {
    return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  }
  if (error == std::errc::not_a_directory) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a directory"));
  }
  return absl::FailedPreconditionError(absl::StrCat("cannot list ", path, ": ", error.message()));
}

ModelRegistry ModelRegistry::Load(const std::string& dir, std::vector<std::string>* refused) {
  ModelRegistry registry;
  for (ServedModel<float>& model : ExactModels<float>()) {
    v1::ModelInfo info = Info(model);
    registry.models_.push_back({.model = std::move(model), .info = std::move(info)});
  }
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
    absl::StatusOr<RegistryEntry> model = Learned(path.string());
    if (!model.ok()) {
      refused->push_back(absl::StrCat(path.string(), ": ", model.status().message()));
      continue;
    }
    if (registry.Find(model->info.name()) != nullptr) {
      refused->push_back(absl::StrCat(path.string(), ": a model named '", model->info.name(),
                                      "' is already served"));
      continue;
    }
    registry.models_.push_back(*std::move(model));
  }
  return registry;
}

const RegistryEntry* ModelRegistry::Find(absl::string_view name) const {
  for (const RegistryEntry& m : models_) {
    if (m.info.name() == name) return &m;
  }
  return nullptr;
}

}  // namespace kmt
