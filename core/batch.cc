#include "core/batch.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/validation.h"

namespace kmt {

template <typename Scalar>
absl::StatusOr<Batch<Scalar>> Batch<Scalar>::Validate(BatchSpec<Scalar> spec) {
  // Each check once, in this order: the shape, the points' values, k
  // against n, the given centers' shape and values.
  const Matrix<Scalar>& points = spec.points;
  if (points.rows() < 1 || points.cols() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape n = ", points.cols(), ", d = ", points.rows(), ", both must be at least 1"));
  }
  if (absl::Status s = ValidateValues(points, "point"); !s.ok()) return s;
  if (absl::Status s = ValidateClusterCount(points.cols(), spec.k); !s.ok()) return s;
  if (spec.given_centers.size() > 0) {
    if (spec.given_centers.cols() != spec.k) {
      return absl::InvalidArgumentError(
          absl::StrCat("initial centers have k = ", spec.given_centers.cols(),
                       ", the batch asks for k = ", spec.k));
    }
    if (spec.given_centers.rows() != points.rows()) {
      return absl::InvalidArgumentError(absl::StrCat("centers have d = ", spec.given_centers.rows(),
                                                     ", points have d = ", points.rows()));
    }
    if (absl::Status s = ValidateValues(spec.given_centers, "center"); !s.ok()) return s;
  }
  if (spec.layers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("iterations = ", spec.layers, ", must not be negative"));
  }
  if (spec.weights.size() > 0) {
    if (absl::Status s = ValidateWeights(spec.weights, spec.points.cols()); !s.ok()) return s;
  }
  if (spec.tol && !(std::isfinite(*spec.tol) && *spec.tol >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tol = ", *spec.tol, ", must be finite and at least 0"));
  }
  if (spec.n_init < 1 || spec.n_init > kMaxRestarts) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_init = ", spec.n_init, ", must be between 1 and ", kMaxRestarts));
  }
  if (spec.n_init > 1 && spec.given_centers.size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n_init = ", spec.n_init, " with given centers: every restart would start from them"));
  }
  // Ranges are the model's (ServedModel::Plan); a NaN is no value at all.
  for (const auto& [name, value] : spec.parameters) {
    if (std::isnan(value)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " = nan: not a number"));
    }
  }
  return Batch(std::move(spec));
}

template class Batch<float>;
template class Batch<double>;

}  // namespace kmt
