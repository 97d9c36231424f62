#include "core/unit_norm.h"

#include <cmath>
#include <utility>
#include <vector>

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

template <typename Scalar>
CsrMatrix<Scalar> ScaleRowsToUnitNorm(const CsrMatrix<Scalar>& points, int64_t* zero) {
  *zero = -1;
  std::vector<Scalar> values = points.values();
  for (int64_t i = 0; i < points.rows(); ++i) {
    const int64_t begin = points.indptr()[i], end = points.indptr()[i + 1];
    Scalar sq = 0;
    for (int64_t p = begin; p < end; ++p) sq += values[p] * values[p];
    const Scalar norm = std::sqrt(sq);
    if (norm > 0) {
      for (int64_t p = begin; p < end; ++p) values[p] /= norm;
    } else if (*zero < 0) {
      *zero = i;
    }
  }
  // Every value divided by its row's positive norm stays finite: Create
  // holds.
  return *CsrMatrix<Scalar>::Create(points.rows(), points.cols(), points.indptr(), points.indices(),
                                    std::move(values));
}

template CsrMatrix<float> ScaleRowsToUnitNorm<float>(const CsrMatrix<float>&, int64_t*);
template CsrMatrix<double> ScaleRowsToUnitNorm<double>(const CsrMatrix<double>&, int64_t*);
template Eigen::Index ScaleToUnitNorm<float>(Eigen::Ref<Matrix<float>, 0, Eigen::OuterStride<>>);
template Eigen::Index ScaleToUnitNorm<double>(Eigen::Ref<Matrix<double>, 0, Eigen::OuterStride<>>);

}  // namespace kmt
