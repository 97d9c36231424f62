// The norm layer's scaling: columns (dense) and rows (sparse) to unit norm,
// a zero one left as it is and reported.
#include "core/unit_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/support/sparse_documents.h"

namespace kmt {
namespace {

TEST(UnitNorm, ColumnsOfPositiveNormBecomeUnitAndTheFirstZeroIsReported) {
  Matrix<double> columns(3, 4);
  columns << 3, 0, 1, 0,  //
      4, 0, 1, 0,         //
      0, 0, 1, 2;
  EXPECT_EQ(ScaleToUnitNorm<double>(columns), 1);
  EXPECT_DOUBLE_EQ(columns(0, 0), 0.6);
  EXPECT_DOUBLE_EQ(columns(1, 0), 0.8);
  EXPECT_EQ(columns.col(1).norm(), 0);
  EXPECT_NEAR(columns.col(2).norm(), 1, 1e-15);
  EXPECT_EQ(columns(2, 3), 1);
}

template <typename Scalar>
void ExpectRowsAsDenseColumns(uint64_t seed) {
  CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = 300, .d = 500, .terms = 20}, seed);
  // Rows of norms 1 to 300 (the documents come unit), and row 10 empty.
  Matrix<Scalar> dense = docs.ToDense();
  for (Eigen::Index i = 0; i < dense.cols(); ++i) dense.col(i) *= static_cast<Scalar>(i + 1);
  dense.col(10).setZero();
  const CsrMatrix<Scalar> sparse = CsrMatrix<Scalar>::FromDense(dense);
  int64_t zero = -2;
  const CsrMatrix<Scalar> scaled = ScaleRowsToUnitNorm(sparse, &zero);
  EXPECT_EQ(zero, 10);
  EXPECT_EQ(ScaleToUnitNorm<Scalar>(dense), 10);
  const Matrix<Scalar> got = scaled.ToDense();
  // The norms' additions come in another order: within a few ulps.
  const Scalar eps = std::numeric_limits<Scalar>::epsilon();
  EXPECT_LE((got - dense).cwiseAbs().maxCoeff(), 4 * eps);
  EXPECT_EQ(scaled.indptr(), sparse.indptr());
  EXPECT_EQ(scaled.indices(), sparse.indices());
  for (Eigen::Index i = 0; i < got.cols(); ++i) {
    if (i != 10) {
      EXPECT_NEAR(got.col(i).norm(), 1, 4 * eps) << i;
    }
  }
}

TEST(UnitNorm, SparseRowsScaleAsTheirDenseColumns) {
  ExpectRowsAsDenseColumns<float>(3);
  ExpectRowsAsDenseColumns<double>(4);
}

}  // namespace
}  // namespace kmt
