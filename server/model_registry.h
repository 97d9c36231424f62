// The models a server runs: every exact Lloyd construction for any (d, k),
// and the learned models found in the model directory at start.
#ifndef KMT_SERVER_MODEL_REGISTRY_H_
#define KMT_SERVER_MODEL_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/engine.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

struct RegistryEntry {
  ServedModel<float> model;  ///< what the engine runs
  v1::ModelInfo info;        ///< what ListModels says of it
};

// OK when `dir` is empty (the exact models only) or a directory that can be
// listed; else why not, in a message that names the directory (absolute,
// as a relative one depends on where the server was started).
absl::Status CheckModelDirectory(const std::string& dir);

class ModelRegistry {
 public:
  // The exact constructions plus every *.kmt file directly in `dir` (none
  // if `dir` is empty). A file that cannot be served is skipped; why is
  // appended to `refused`, one line per file.
  static ModelRegistry Load(const std::string& dir, std::vector<std::string>* refused);

  const RegistryEntry* Find(absl::string_view name) const;
  const std::vector<RegistryEntry>& models() const { return models_; }

 private:
  std::vector<RegistryEntry> models_;
};

}  // namespace kmt

#endif  // KMT_SERVER_MODEL_REGISTRY_H_
