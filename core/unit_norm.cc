#include "core/unit_norm.h"

namespace kmt {

template <typename Scalar>
Eigen::Index ScaleToUnitNorm(Eigen::Ref<Matrix<Scalar>, 0, Eigen::OuterStride<>> columns) {
  Eigen::Index first_zero = -1;
  for (Eigen::Index i = 0; i < columns.cols(); ++i) {
    const Scalar norm = columns.col(i).norm();
    if (norm > 0) {
      columns.col(i) /= norm;
    } else if (first_zero < 0) {
      first_zero = i;
    }
  }
  return first_zero;
}

template Eigen::Index ScaleToUnitNorm<float>(Eigen::Ref<Matrix<float>, 0, Eigen::OuterStride<>>);
template Eigen::Index ScaleToUnitNorm<double>(Eigen::Ref<Matrix<double>, 0, Eigen::OuterStride<>>);

}  // namespace kmt
