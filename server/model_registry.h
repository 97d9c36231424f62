// The models a server runs: every exact Lloyd construction for any (d, k),
// and the learned models found in the model directory at start.
#ifndef KMT_SERVER_MODEL_REGISTRY_H_
#define KMT_SERVER_MODEL_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/constructions.h"
#include "core/model.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

struct ServedModel {
  v1::ModelInfo info;                         ///< what ListModels says of it
  LloydOptions lloyd;                         ///< exact: the construction (beta per request)
  std::shared_ptr<const Model<float>> model;  ///< learned: the weights; null for exact
  bool fast = false;                          ///< learned weights that are exactly Lloyd's
  bool min_max_scaling = false;               ///< learned: scale inputs to [0, 1]

  bool learned() const { return model != nullptr; }
};

class ModelRegistry {
 public:
  // The exact constructions plus every *.kmt file directly in `dir` (none
  // if `dir` is empty). A file that cannot be served is skipped; why is
  // appended to `refused`, one line per file.
  static ModelRegistry Load(const std::string& dir, std::vector<std::string>* refused);

  const ServedModel* Find(absl::string_view name) const;
  const std::vector<ServedModel>& models() const { return models_; }

 private:
  std::vector<ServedModel> models_;
};

}  // namespace kmt

#endif  // KMT_SERVER_MODEL_REGISTRY_H_
