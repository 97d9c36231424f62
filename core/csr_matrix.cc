// CsrMatrix (core/sparse.h): compiled once, into kmt_core, beside the
// sparse assignment and sums (sparse.cc), which are kernels compiled per SIMD
// level (core/simd_kernels.h).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/sparse.h"

namespace kmt {

template <typename Scalar>
absl::StatusOr<CsrMatrix<Scalar>> CsrMatrix<Scalar>::Create(int64_t rows, int64_t cols,
                                                            std::vector<int64_t> indptr,
                                                            std::vector<int32_t> indices,
                                                            std::vector<Scalar> values) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape (", rows, ", ", cols, ") has a negative dimension"));
  }
  if (cols > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cols = ", cols, " exceeds 2^31 - 1, the most int32 indices address"));
  }
  if (static_cast<int64_t>(indptr.size()) != rows + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("indptr has ", indptr.size(), " values, expected rows + 1 = ", rows + 1));
  }
  if (indices.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("indices has ", indices.size(),
                                                   " values and values has ", values.size(),
                                                   ": one column per value"));
  }
  if (indptr[0] != 0) {
    return absl::InvalidArgumentError(absl::StrCat("indptr[0] = ", indptr[0], ", expected 0"));
  }
  for (int64_t i = 0; i < rows; ++i) {
    if (indptr[i + 1] < indptr[i]) {
      return absl::InvalidArgumentError(absl::StrCat("indptr decreases at row ", i, ": indptr[",
                                                     i + 1, "] = ", indptr[i + 1], " < indptr[", i,
                                                     "] = ", indptr[i]));
    }
  }
  const int64_t nnz = static_cast<int64_t>(values.size());
  if (indptr[rows] != nnz) {
    return absl::InvalidArgumentError(absl::StrCat("indptr[", rows, "] = ", indptr[rows],
                                                   ", expected the number of values, ", nnz));
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t p = indptr[i]; p < indptr[i + 1]; ++p) {
      const int64_t col = indices[p];
      if (col < 0 || col >= cols) {
        return absl::InvalidArgumentError(absl::StrCat("indices[", p, "] = ", col, " (row ", i,
                                                       ") is outside [0, cols = ", cols, ")"));
      }
      if (p > indptr[i] && col == indices[p - 1]) {
        return absl::InvalidArgumentError(
            absl::StrCat("indices[", p, "] = ", col, " (row ", i,
                         ") repeats the column before it: duplicates must be summed first "
                         "(scipy: sum_duplicates())"));
      }
      if (p > indptr[i] && col < indices[p - 1]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "indices[", p, "] = ", col, " (row ", i, ") is below indices[", p - 1, "] = ",
            indices[p - 1], ": columns must increase within a row (scipy: sort_indices())"));
      }
      if (!std::isfinite(values[p])) {
        return absl::InvalidArgumentError(absl::StrCat("values[", p, "] = ", values[p], " (row ", i,
                                                       ", column ", col, ") is not finite"));
      }
    }
  }
  CsrMatrix matrix;
  matrix.rows_ = rows;
  matrix.cols_ = cols;
  matrix.indptr_ = std::move(indptr);
  matrix.indices_ = std::move(indices);
  matrix.values_ = std::move(values);
  return matrix;
}

template <typename Scalar>
CsrMatrix<Scalar> CsrMatrix<Scalar>::FromDense(const Matrix<Scalar>& points) {
  CsrMatrix matrix;
  matrix.rows_ = points.cols();
  matrix.cols_ = points.rows();
  matrix.indptr_.reserve(points.cols() + 1);
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    for (Eigen::Index l = 0; l < points.rows(); ++l) {
      if (points(l, i) == 0) continue;
      matrix.indices_.push_back(static_cast<int32_t>(l));
      matrix.values_.push_back(points(l, i));
    }
    matrix.indptr_.push_back(static_cast<int64_t>(matrix.values_.size()));
  }
  return matrix;
}

template <typename Scalar>
Matrix<Scalar> CsrMatrix<Scalar>::ToDense() const {
  Matrix<Scalar> dense = Matrix<Scalar>::Zero(cols_, rows_);
  for (int64_t i = 0; i < rows_; ++i) {
    for (int64_t p = indptr_[i]; p < indptr_[i + 1]; ++p) dense(indices_[p], i) = values_[p];
  }
  return dense;
}

template <typename Scalar>
void CsrMatrix<Scalar>::Row(int64_t i, Scalar* dense_out) const {
  assert(i >= 0 && i < rows_);
  std::fill(dense_out, dense_out + cols_, Scalar(0));
  for (int64_t p = indptr_[i]; p < indptr_[i + 1]; ++p) dense_out[indices_[p]] = values_[p];
}

template <typename Scalar>
CsrMatrix<Scalar> CsrMatrix<Scalar>::Rows(const int64_t* rows, int64_t m) const {
  CsrMatrix out;
  out.rows_ = m;
  out.cols_ = cols_;
  out.indptr_.reserve(m + 1);
  int64_t nnz = 0;
  for (int64_t r = 0; r < m; ++r) {
    assert(rows[r] >= 0 && rows[r] < rows_);
    nnz += indptr_[rows[r] + 1] - indptr_[rows[r]];
  }
  out.indices_.reserve(nnz);
  out.values_.reserve(nnz);
  for (int64_t r = 0; r < m; ++r) {
    const int64_t begin = indptr_[rows[r]], end = indptr_[rows[r] + 1];
    out.indices_.insert(out.indices_.end(), indices_.begin() + begin, indices_.begin() + end);
    out.values_.insert(out.values_.end(), values_.begin() + begin, values_.begin() + end);
    out.indptr_.push_back(static_cast<int64_t>(out.values_.size()));
  }
  return out;
}

template <typename Scalar>
Vector<Scalar> CsrMatrix<Scalar>::RowSquaredNorms() const {
  Vector<Scalar> sq(rows_);
  for (int64_t i = 0; i < rows_; ++i) {
    double sum = 0;
    for (int64_t p = indptr_[i]; p < indptr_[i + 1]; ++p) {
      sum += static_cast<double>(values_[p]) * static_cast<double>(values_[p]);
    }
    sq[i] = static_cast<Scalar>(sum);
  }
  return sq;
}

template <typename Scalar>
absl::Status CsrMatrix<Scalar>::Append(const CsrMatrix& more) {
  if (more.cols_ != cols_) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows of ", more.cols_, " columns appended to a matrix of ", cols_));
  }
  const int64_t offset = nnz();
  indptr_.reserve(indptr_.size() + more.rows_);
  for (int64_t i = 1; i <= more.rows_; ++i) indptr_.push_back(offset + more.indptr_[i]);
  indices_.insert(indices_.end(), more.indices_.begin(), more.indices_.end());
  values_.insert(values_.end(), more.values_.begin(), more.values_.end());
  rows_ += more.rows_;
  return absl::OkStatus();
}

template <typename Scalar>
void CsrMatrix<Scalar>::Reserve(int64_t rows, int64_t nnz) {
  indptr_.reserve(rows + 1);
  indices_.reserve(nnz);
  values_.reserve(nnz);
}

template <typename Scalar>
int64_t CanonicalRows(int64_t n, const int64_t* indptr, const int32_t* indices,
                      const Scalar* values, int64_t* out_indptr, int32_t* out_indices,
                      Scalar* out_values) {
  // Each row sorted and summed at its own offset, its length after in
  // out_indptr[i + 1]; then the rows moved together where entries merged.
  out_indptr[0] = 0;
#pragma omp parallel if (indptr[n] > (1 << 16))
  {
    std::vector<int64_t> order;
#pragma omp for schedule(dynamic, 1024)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t begin = indptr[i], end = indptr[i + 1];
      order.resize(static_cast<size_t>(end - begin));
      for (int64_t p = begin; p < end; ++p) order[p - begin] = p;
      std::stable_sort(order.begin(), order.end(),
                       [indices](int64_t a, int64_t b) { return indices[a] < indices[b]; });
      int64_t at = begin;
      for (size_t q = 0; q < order.size(); ++q) {
        const int64_t p = order[q];
        if (q > 0 && indices[p] == out_indices[at - 1]) {
          out_values[at - 1] += values[p];
        } else {
          out_indices[at] = indices[p];
          out_values[at] = values[p];
          ++at;
        }
      }
      out_indptr[i + 1] = at - begin;
    }
  }
  int64_t nnz = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t length = out_indptr[i + 1];
    if (nnz != indptr[i]) {
      std::memmove(out_indices + nnz, out_indices + indptr[i], sizeof(int32_t) * length);
      std::memmove(out_values + nnz, out_values + indptr[i], sizeof(Scalar) * length);
    }
    nnz += length;
    out_indptr[i + 1] = nnz;
  }
  return nnz;
}

template class CsrMatrix<float>;
template class CsrMatrix<double>;
template int64_t CanonicalRows<float>(int64_t, const int64_t*, const int32_t*, const float*,
                                      int64_t*, int32_t*, float*);
template int64_t CanonicalRows<double>(int64_t, const int64_t*, const int32_t*, const double*,
                                       int64_t*, int32_t*, double*);

}  // namespace kmt
