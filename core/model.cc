#include "core/model.h"

#include "absl/strings/str_cat.h"

namespace kmt {

absl::string_view BlockName(BlockId id) {
  switch (id) {
    case BlockId::kPointsToCenters:
      return "theta1";
    case BlockId::kPointsToPoints:
      return "theta2";
    case BlockId::kCentersToPoints:
      return "theta3";
    case BlockId::kCentersToCenters:
      return "theta4";
  }
  return "unknown";
}

template <typename Scalar>
absl::Status ValidateModel(const Model<Scalar>& model) {
  if (model.d < 1) {
    return absl::InvalidArgumentError(absl::StrCat("model d = ", model.d, ", must be at least 1"));
  }
  if (model.k < 1) {
    return absl::InvalidArgumentError(absl::StrCat("model k = ", model.k, ", must be at least 1"));
  }
  if (model.layers.empty()) {
    return absl::InvalidArgumentError("model has no layer weights");
  }
  for (size_t i = 0; i < model.trained_inits.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (model.trained_inits[j] == model.trained_inits[i]) {
        return absl::InvalidArgumentError(absl::StrCat("model lists the trained initialisation ",
                                                       InitMethodName(model.trained_inits[i]),
                                                       " twice"));
      }
    }
  }
  if (model.lloyd_after < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model lloyd_after = ", model.lloyd_after, ", must not be negative"));
  }
  if (model.lloyd_after > 0 && (model.unit_norm || model.norm_coordinate)) {
    return absl::InvalidArgumentError(
        "model lloyd_after is for models whose centers are k-means centers of their points; "
        "this one has a norm layer or a norm coordinate");
  }
  if (model.guard && (!model.reembed || model.unit_norm || model.norm_coordinate)) {
    return absl::InvalidArgumentError(
        "model guard is for re-embedded models whose centers are k-means centers of their "
        "points; this one carries its registers over, or has a norm layer or a norm coordinate");
  }
  for (size_t i = 0; i < model.padded_sizes.size(); ++i) {
    const ModelSize& size = model.padded_sizes[i];
    if (size.d < 1 || size.d > model.d || size.k < 1 || size.k > model.k ||
        size == ModelSize{model.d, model.k}) {
      return absl::InvalidArgumentError(
          absl::StrCat("model padded size d = ", size.d, ", k = ", size.k,
                       " is not below its own d = ", model.d, ", k = ", model.k));
    }
    if (!model.reembed) {
      return absl::InvalidArgumentError(
          "model padded sizes are for re-embedded models; this one carries its registers over");
    }
    for (size_t j = 0; j < i; ++j) {
      if (model.padded_sizes[j] == size) {
        return absl::InvalidArgumentError(
            absl::StrCat("model lists the padded size d = ", size.d, ", k = ", size.k, " twice"));
      }
    }
  }
  const int dim = model.dim();
  for (size_t t = 0; t < model.layers.size(); ++t) {
    for (BlockId id : kBlockIds) {
      if (absl::Status s = ValidateBlock(model.layers[t][id], dim); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", t, " ", BlockName(id), ": ", s.message()));
      }
    }
    const std::vector<CenterStep<Scalar>>& steps = model.layers[t].center_steps;
    for (size_t step = 0; step < steps.size(); ++step) {
      for (const auto& [name, block] : {std::pair{"to_points", &steps[step].to_points},
                                        std::pair{"to_centers", &steps[step].to_centers}}) {
        if (absl::Status s = ValidateBlock(*block, dim); !s.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("layer ", t, " center step ", step, " ", name, ": ", s.message()));
        }
      }
    }
    if (const auto& ffn = model.layers[t].center_feed_forward; ffn) {
      if (absl::Status s = ValidateFeedForward(*ffn, dim); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", t, " center feed-forward: ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

template absl::Status ValidateModel<float>(const Model<float>&);
template absl::Status ValidateModel<double>(const Model<double>&);

}  // namespace kmt
