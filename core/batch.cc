#include "core/batch.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/validation.h"

namespace kmt {

template <typename Scalar>
absl::StatusOr<Batch<Scalar>> Batch<Scalar>::Validate(BatchSpec<Scalar> spec) {
  if (absl::Status s = ValidatePoints(spec.points); !s.ok()) return s;
  if (absl::Status s = ValidateClusterCount(spec.points.cols(), spec.k); !s.ok()) return s;
  if (spec.given_centers.size() > 0) {
    if (spec.given_centers.cols() != spec.k) {
      return absl::InvalidArgumentError(
          absl::StrCat("initial centers have k = ", spec.given_centers.cols(),
                       ", the batch asks for k = ", spec.k));
    }
    if (absl::Status s = ValidateCenters(spec.points, spec.given_centers); !s.ok()) return s;
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
