#include "core/input_scaling.h"

#include "absl/strings/str_cat.h"

namespace kmt {

absl::string_view InputScalingName(InputScaling scaling) {
  switch (scaling) {
    case InputScaling::kNone:
      return "none";
    case InputScaling::kMinMax:
      return "min-max";
    case InputScaling::kGlobalMinMax:
      return "global-min-max";
  }
  return "unknown";
}

absl::StatusOr<InputScaling> ParseInputScaling(absl::string_view name) {
  for (InputScaling s : {InputScaling::kNone, InputScaling::kMinMax, InputScaling::kGlobalMinMax}) {
    if (name == InputScalingName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown input scaling '", name, "', expected none, min-max or global-min-max"));
}

template <typename Scalar>
InputMap<Scalar>::InputMap(InputScaling scaling, const Matrix<Scalar>& points) {
  if (scaling == InputScaling::kNone) return;
  identity_ = false;
  offset_ = points.rowwise().minCoeff();
  scale_ = points.rowwise().maxCoeff() - offset_;
  if (scaling == InputScaling::kGlobalMinMax) scale_.setConstant(scale_.maxCoeff());
  inverse_scale_ = scale_.unaryExpr([](Scalar r) { return r > 0 ? 1 / r : Scalar(0); });
}

template <typename Scalar>
Matrix<Scalar> InputMap<Scalar>::ToModel(const Matrix<Scalar>& m) const {
  if (identity_) return m;
  return ((m.colwise() - offset_).array().colwise() * inverse_scale_.array()).matrix();
}

template <typename Scalar>
Matrix<Scalar> InputMap<Scalar>::ToCaller(const Matrix<Scalar>& m) const {
  if (identity_) return m;
  return (m.array().colwise() * scale_.array()).matrix().colwise() + offset_;
}

template class InputMap<float>;
template class InputMap<double>;

}  // namespace kmt
