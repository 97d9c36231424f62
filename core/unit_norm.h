// The norm layer of spherical k-means: the data coordinates of points and
// centers scaled to unit norm, on tokens (the dense circuit) and on whole
// matrices (the fast path's preparation) alike.
#ifndef KMT_CORE_UNIT_NORM_H_
#define KMT_CORE_UNIT_NORM_H_

#include "core/sparse.h"
#include "core/types.h"

namespace kmt {

// Every column of nonzero norm scaled to unit norm, a column of norm 0 left
// as it is. Returns the index of the first such column, or -1. Takes data
// rows of tokens as well as whole matrices.
template <typename Scalar>
Eigen::Index ScaleToUnitNorm(Eigen::Ref<Matrix<Scalar>, 0, Eigen::OuterStride<>> columns);

// The rows of sparse `points` scaled as ScaleToUnitNorm scales columns
// (the norm in Scalar from the nonzeros, each value divided by it), a row of
// norm 0 left as it is; `zero` gets the index of the first such row, or -1.
template <typename Scalar>
CsrMatrix<Scalar> ScaleRowsToUnitNorm(const CsrMatrix<Scalar>& points, int64_t* zero);

}  // namespace kmt

#endif  // KMT_CORE_UNIT_NORM_H_
