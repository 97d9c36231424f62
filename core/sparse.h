// Points as a CSR matrix (scipy.sparse's layout: row i's nonzeros at
// positions indptr[i] .. indptr[i + 1], columns strictly increasing) and
// Lloyd's steps on them without densifying: each row's nonzeros against the
// dense centers, O(nnz k) a pass, with the dense path's labels (AssignNearest
// on the same points made dense) to the bit, near ties included, and its
// cluster sums and objective.
#ifndef KMT_CORE_SPARSE_H_
#define KMT_CORE_SPARSE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cluster_sums.h"
#include "core/types.h"

namespace kmt {

// n rows (points) of d features in compressed sparse rows. Always valid:
// made by Create, which checks every rule, or FromDense.
template <typename Scalar>
class CsrMatrix {
 public:
  // Takes the arrays as scipy.sparse.csr_matrix holds them after
  // sort_indices() and sum_duplicates() (its canonical format), and refuses
  // with INVALID_ARGUMENT, naming the row and position, arrays whose lengths
  // disagree (indptr: rows + 1 values; indices and values: indptr[rows]),
  // an indptr that does not start at 0 or decreases, a column outside
  // [0, cols), columns not strictly increasing within a row (unsorted or
  // duplicate: both are refused, not repaired, so that a row's values are
  // the caller's in the caller's order) and values that are not finite.
  static absl::StatusOr<CsrMatrix> Create(int64_t rows, int64_t cols, std::vector<int64_t> indptr,
                                          std::vector<int32_t> indices, std::vector<Scalar> values);
  // The rows of the columns of `points` (d x n), their exact zeros left out.
  static CsrMatrix FromDense(const Matrix<Scalar>& points);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t nnz() const { return static_cast<int64_t>(values_.size()); }
  const std::vector<int64_t>& indptr() const { return indptr_; }
  const std::vector<int32_t>& indices() const { return indices_; }
  const std::vector<Scalar>& values() const { return values_; }

  // The points as the dense path takes them: d x n, a column a row.
  Matrix<Scalar> ToDense() const;

  // Row i as cols() values, its zeros written too: the dense path's column
  // i (a point returned to a caller, or measured exactly).
  void Row(int64_t i, Scalar* dense_out) const;
  // The m rows listed in `rows` (each in [0, rows()); any order, repeats
  // allowed), in that order: a mini-batch drawn across a shard.
  CsrMatrix Rows(const int64_t* rows, int64_t m) const;
  // Each row's squared norm, summed in double over its nonzeros and rounded
  // once.
  Vector<Scalar> RowSquaredNorms() const;

  // Appends the rows of `more` (a matrix in its own right, its indptr from
  // 0): a shard received in chunks, each checked by Create, becomes one
  // matrix. INVALID_ARGUMENT, leaving this matrix as it was, if the column
  // counts differ.
  absl::Status Append(const CsrMatrix& more);
  // Room for `rows` rows and `nnz` nonzeros in all, so that appending up to
  // them does not copy the arrays again.
  void Reserve(int64_t rows, int64_t nnz);

 private:
  CsrMatrix() = default;

  int64_t rows_ = 0, cols_ = 0;
  std::vector<int64_t> indptr_{0};
  std::vector<int32_t> indices_;
  std::vector<Scalar> values_;
};

// The rows of CSR arrays (n rows, indptr[n] nonzeros) in scipy's canonical
// format: each row's columns sorted, stably (a column's entries keep their
// order), and a column's entries summed in that order, into out_indptr
// (n + 1 values) and out_indices, out_values (room for indptr[n] each).
// Returns the nonzeros written. The threads take rows; the result does not
// depend on their number.
template <typename Scalar>
int64_t CanonicalRows(int64_t n, const int64_t* indptr, const int32_t* indices,
                      const Scalar* values, int64_t* out_indptr, int32_t* out_indices,
                      Scalar* out_values);

// What AssignNearestSparse reports as a point's squared distance to its
// center (and sums into the objective).
enum class SparseDistances {
  // AssignedSquaredDistance on the row made dense in a scratch vector: the
  // dense path's bits, so its objective too; O(d) a point.
  kDense,
  // ||x||^2 - 2 (<x, c> - ||c||^2 / 2) from the score of the chosen center
  // (a near tie's too), clamped at 0: O(1) a point, within the scores'
  // round-off of the dense path's distance but not its bits.
  kProduct,
};

// AssignNearest for sparse points (n x d) and dense centers (d x k): fills
// labels (n), if given the squared distances (n, by `distances`), and if
// given adds the counts, weights and weighted coordinate sums under the
// labels to `sums` in AssignNearest's parts and order (so to its bits).
// `weights` (n, or null for 1 each) weigh the points. Returns the objective
// sum_i w_i ||x_i - c_label||^2, accumulated in double as AssignNearest
// accumulates it. The labels equal AssignNearest's on points.ToDense(),
// ties to the lowest index (docs/core.md, "Sparse points").
template <typename Scalar>
double AssignNearestSparse(const CsrMatrix<Scalar>& points, const Matrix<Scalar>& centers,
                           Labels* labels, NonDeduced<Vector<Scalar>>* sq_dist = nullptr,
                           ClusterSums* sums = nullptr,
                           const NonDeduced<Vector<Scalar>>* weights = nullptr,
                           SparseDistances distances = SparseDistances::kDense);

// Every point's squared distance to every center (k x n), from its scores
// as kProduct computes a point's own: ||x||^2 - 2 (<x, c_j> - ||c_j||^2 / 2)
// clamped at 0, O(nnz k) in all (scikit-learn's euclidean_distances on
// sparse rows computes the same expansion).
template <typename Scalar>
Matrix<Scalar> SparseSquaredDistances(const CsrMatrix<Scalar>& points,
                                      const Matrix<Scalar>& centers);

// AccumulateClusterSums for sparse points: the same chunks and order, so
// the same bits, from the nonzeros alone (a zero added to a sum leaves it).
template <typename Scalar>
void AccumulateSparseClusterSums(const CsrMatrix<Scalar>& points, const Labels& labels,
                                 ClusterSums* into,
                                 const NonDeduced<Vector<Scalar>>* weights = nullptr);

// Lloyd's on sparse points from `centers` for `iterations` iterations:
// AssignNearestSparse, AccumulateSparseClusterSums, ApplyMeans (an empty
// cluster keeps its center). After each, `step` (if set) sees the
// iteration, its labels, its objective (before the update) and the
// updated centers. Returns the last iteration's objective.
// Inline: the steps are kernels of the SIMD level in use (core/simd.h),
// this loop is not.
template <typename Scalar>
double SparseLloyd(
    const CsrMatrix<Scalar>& points, Matrix<Scalar>* centers, int iterations, Labels* labels,
    const NonDeduced<Vector<Scalar>>* weights = nullptr,
    const std::function<void(int, const Labels&, double, const Matrix<Scalar>&)>& step = nullptr) {
  double objective = 0;
  for (int t = 0; t < iterations; ++t) {
    objective = AssignNearestSparse(points, *centers, labels, nullptr, nullptr, weights);
    ClusterSums sums(static_cast<int>(points.cols()), static_cast<int>(centers->cols()));
    AccumulateSparseClusterSums(points, *labels, &sums, weights);
    ApplyMeans(sums, centers);
    if (step) step(t, *labels, objective, *centers);
  }
  return objective;
}

}  // namespace kmt

#endif  // KMT_CORE_SPARSE_H_
