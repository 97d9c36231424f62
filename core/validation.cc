#include "core/validation.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/point_passes.h"

namespace kmt {

template <typename Scalar>
Scalar MaxCoordinate(int d) {
  // A squared distance is at most d (2 bound)^2 = max / 4; the product form's
  // terms ||a||^2 + ||b||^2 + 2 |<a, b>| are at most as large.
  return std::sqrt(std::numeric_limits<Scalar>::max() / Scalar(16) / static_cast<Scalar>(d));
}

template <typename Scalar>
absl::Status ValidateValues(const Matrix<Scalar>& m, const char* what) {
  // Every value finite and within the bound, in one pass (point_passes.h).
  const Scalar bound = MaxCoordinate<Scalar>(static_cast<int>(m.rows()));
  ScalarBits<Scalar> bound_bits;
  std::memcpy(&bound_bits, &bound, sizeof(bound_bits));
  if (LargestMagnitudeBits(m.data(), m.size()) <= bound_bits) return absl::OkStatus();
  // The first bad value, named as point/center i, dimension l.
  for (Eigen::Index i = 0; i < m.cols(); ++i) {
    for (Eigen::Index l = 0; l < m.rows(); ++l) {
      const Scalar v = m(l, i);
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " ", i, " has ", std::isnan(v) ? "NaN" : "Inf", " in dimension ", l));
      }
      if (std::abs(v) > bound) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " ", i, " has ", v, " in dimension ", l, ", beyond +-", bound,
                         ": squared distances in d = ", m.rows(), " would overflow ",
                         sizeof(Scalar) == 4 ? "float" : "double"));
      }
    }
  }
  return absl::OkStatus();
}

template <typename Scalar>
absl::Status ValidateSparseValues(const CsrMatrix<Scalar>& points) {
  const Scalar bound = MaxCoordinate<Scalar>(static_cast<int>(points.cols()));
  for (int64_t i = 0; i < points.rows(); ++i) {
    for (int64_t p = points.indptr()[i]; p < points.indptr()[i + 1]; ++p) {
      const Scalar v = points.values()[p];
      if (std::abs(v) > bound) {
        return absl::InvalidArgumentError(
            absl::StrCat("point ", i, " has ", v, " in dimension ", points.indices()[p],
                         ", beyond +-", bound, ": squared distances in d = ", points.cols(),
                         " would overflow ", sizeof(Scalar) == 4 ? "float" : "double"));
      }
    }
  }
  return absl::OkStatus();
}

template <typename Scalar>
absl::Status ValidatePoints(const Matrix<Scalar>& points) {
  if (points.rows() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("d = ", points.rows(), ", must be at least 1"));
  }
  if (points.cols() < 1) {
    return absl::InvalidArgumentError("no points: n = 0");
  }
  return ValidateValues(points, "point");
}

absl::Status ValidateClusterCount(int64_t n, int64_t k) {
  if (k < 1) {
    return absl::InvalidArgumentError(absl::StrCat("k = ", k, ", must be at least 1"));
  }
  if (n < k) {
    return absl::InvalidArgumentError(
        absl::StrCat("n = ", n, " points is fewer than k = ", k, " clusters"));
  }
  return absl::OkStatus();
}

template <typename Scalar>
absl::Status ValidateCenters(const Matrix<Scalar>& points, const Matrix<Scalar>& centers) {
  if (centers.rows() != points.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("centers have d = ", centers.rows(), ", points have d = ", points.rows()));
  }
  if (absl::Status s = ValidateClusterCount(points.cols(), centers.cols()); !s.ok()) {
    return s;
  }
  return ValidateValues(centers, "center");
}

template <typename Scalar>
absl::Status ValidateCenterValues(const Matrix<Scalar>& centers, int64_t d) {
  if (centers.rows() != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("centers have d = ", centers.rows(), ", points have d = ", d));
  }
  if (centers.cols() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("k = ", centers.cols(), ", must be at least 1"));
  }
  return ValidateValues(centers, "center");
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> MatrixFromRowMajor(absl::Span<const float> values, int64_t rows,
                                                  int64_t d, const char* field, const char* count) {
  // Compared by division, so a huge shape cannot overflow the product.
  const bool fits =
      rows >= 0 && d >= 0 &&
      (d == 0 ? values.empty()
              : static_cast<uint64_t>(rows) <= values.size() / static_cast<uint64_t>(d) &&
                    static_cast<uint64_t>(rows * d) == values.size());
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " has ", values.size(), " values, expected ", count, "*d = ", rows, "*", d));
  }
  return Eigen::Map<const Matrix<float>>(values.data(), d, rows).template cast<Scalar>();
}

namespace {

// `field` names the rows ("points", "centers"), `count` their number ("n",
// "k").
// The values are checked where the matrix is validated (Batch::Validate).
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> FromRowMajor(absl::Span<const float> values, int64_t rows, int64_t d,
                                            const char* field, const char* count) {
  if (rows < 1 || d < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", count, " = ", rows, ", d = ", d, ", both must be at least 1"));
  }
  return MatrixFromRowMajor<Scalar>(values, rows, d, field, count);
}

}  // namespace

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> PointsFromRowMajor(absl::Span<const float> values, int64_t n,
                                                  int64_t d) {
  return FromRowMajor<Scalar>(values, n, d, "points", "n");
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> CentersFromRowMajor(absl::Span<const float> values, int64_t k,
                                                   int64_t d) {
  return FromRowMajor<Scalar>(values, k, d, "centers", "k");
}

template <typename Scalar>
absl::Status ValidateWeights(const Vector<Scalar>& weights, int64_t n, bool zero_sum_allowed) {
  if (weights.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights has ", weights.size(), " values, expected n = ", n));
  }
  for (Eigen::Index i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("weight ", i, " = ", weights[i], ", must be finite and at least 0"));
    }
  }
  if (!zero_sum_allowed && !(weights.template cast<double>().sum() > 0)) {
    return absl::InvalidArgumentError("weights are all 0: no point would count");
  }
  return absl::OkStatus();
}

absl::Status SampleWeightsOverflow(double largest, const char* type) {
  // Only the weights' ratios move the centers: scaled down, the same fit.
  return absl::InvalidArgumentError(
      absl::StrCat("the sample weights (the largest ", largest, ") overflow ", type,
                   " in the weighted sums or objective of these points; scale them down: only "
                   "their ratios move the centers"));
}

absl::Status SumsOverflow(const char* type) {
  return absl::InvalidArgumentError(
      absl::StrCat("the sums of these points overflow ", type,
                   ": their squared distances to the centers, each within range, add up beyond "
                   "it"));
}

template <typename Scalar>
absl::Status ValidateAnswer(double objective, const Matrix<Scalar>& centers,
                            const Vector<Scalar>& weights, absl::string_view model, bool exact) {
  if (std::isfinite(objective) && centers.allFinite()) return absl::OkStatus();
  const char* type = sizeof(Scalar) == 4 ? "float" : "double";
  const Scalar largest = weights.size() > 0 ? weights.maxCoeff() : Scalar(0);
  if (largest > 1) return SampleWeightsOverflow(static_cast<double>(largest), type);
  if (exact) return SumsOverflow(type);
  return absl::InternalError(absl::StrCat("model ", model,
                                          " produced non-finite centers or objective on this "
                                          "batch; its weights are unfit for these points"));
}

#define KMT_INSTANTIATE(S)                                                                     \
  template S MaxCoordinate<S>(int);                                                            \
  template absl::Status ValidatePoints<S>(const Matrix<S>&);                                   \
  template absl::Status ValidateSparseValues<S>(const CsrMatrix<S>&);                          \
  template absl::Status ValidateValues<S>(const Matrix<S>&, const char*);                      \
  template absl::Status ValidateCenters<S>(const Matrix<S>&, const Matrix<S>&);                \
  template absl::Status ValidateCenterValues<S>(const Matrix<S>&, int64_t);                    \
  template absl::Status ValidateWeights<S>(const Vector<S>&, int64_t, bool);                   \
  template absl::Status ValidateAnswer<S>(double, const Matrix<S>&, const Vector<S>&,          \
                                          absl::string_view, bool);                            \
  template absl::StatusOr<Matrix<S>> MatrixFromRowMajor<S>(absl::Span<const float>, int64_t,   \
                                                           int64_t, const char*, const char*); \
  template absl::StatusOr<Matrix<S>> PointsFromRowMajor<S>(absl::Span<const float>, int64_t,   \
                                                           int64_t);                           \
  template absl::StatusOr<Matrix<S>> CentersFromRowMajor<S>(absl::Span<const float>, int64_t,  \
                                                            int64_t);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
