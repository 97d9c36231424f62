#include "core/model.h"

#include "absl/strings/str_cat.h"

namespace kmt {

template <typename Scalar>
absl::Status ValidateModel(const Model<Scalar>& model) {
  if (model.d < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model d = ", model.d, ", must be at least 1"));
  }
  if (model.k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model k = ", model.k, ", must be at least 1"));
  }
  if (model.layers.empty()) {
    return absl::InvalidArgumentError("model has no layer weights");
  }
  const int dim = model.dim();
  for (size_t t = 0; t < model.layers.size(); ++t) {
    const LayerWeights<Scalar>& w = model.layers[t];
    const std::pair<const char*, const AttentionBlock<Scalar>*> blocks[] = {
        {"theta1", &w.points_to_centers},
        {"theta2", &w.points_to_points},
        {"theta3", &w.centers_to_points},
        {"theta4", &w.centers_to_centers}};
    for (const auto& [name, block] : blocks) {
      if (absl::Status s = ValidateBlock(*block, dim); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", t, " ", name, ": ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

template absl::Status ValidateModel<float>(const Model<float>&);
template absl::Status ValidateModel<double>(const Model<double>&);

}  // namespace kmt
