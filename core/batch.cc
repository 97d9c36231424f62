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
  if (std::isnan(spec.beta) || spec.beta < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("beta = ", spec.beta, ", must be 0 (hardmax) or positive"));
  }
  if (spec.tau && (!std::isfinite(*spec.tau) || *spec.tau < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tau = ", *spec.tau, ", must be finite and at least 0"));
  }
  if (std::isnan(spec.gamma) || spec.gamma < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gamma = ", spec.gamma, ", must be 0 (infinity) or positive"));
  }
  return Batch(std::move(spec));
}

template class Batch<float>;
template class Batch<double>;

}  // namespace kmt
