// Input checks shared by every entry point: each names the offending value.
#ifndef KMT_CORE_VALIDATION_H_
#define KMT_CORE_VALIDATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/sparse.h"
#include "core/types.h"

namespace kmt {

// The largest coordinate magnitude points and centers may have in d
// dimensions: within it no squared distance, product-form term or objective
// term can overflow Scalar (a quarter of its largest value at most).
template <typename Scalar>
Scalar MaxCoordinate(int d);

// points is d x n with d >= 1, n >= 1 and every value finite and within
// MaxCoordinate(d).
template <typename Scalar>
absl::Status ValidatePoints(const Matrix<Scalar>& points);

// Every value of m (d x count) finite and within MaxCoordinate(d): the one
// read of a matrix's values, naming the first bad one as `what` ("point",
// "center") i, dimension l.
template <typename Scalar>
absl::Status ValidateValues(const Matrix<Scalar>& m, const char* what);

// Every nonzero of sparse `points` (n x d; CsrMatrix holds them finite)
// within MaxCoordinate(d), as ValidatePoints bounds the same points made
// dense, naming the first beyond it as point i, dimension l.
template <typename Scalar>
absl::Status ValidateSparseValues(const CsrMatrix<Scalar>& points);

// 1 <= k <= n.
absl::Status ValidateClusterCount(int64_t n, int64_t k);

// centers is d x k for the points' d, with k clusters valid for n, finite
// and within MaxCoordinate(d).
template <typename Scalar>
absl::Status ValidateCenters(const Matrix<Scalar>& points, const Matrix<Scalar>& centers);

// centers is d x k for this d, k >= 1, finite; k is not checked against a
// number of points (a shard of a dataset may hold fewer than k).
template <typename Scalar>
absl::Status ValidateCenterValues(const Matrix<Scalar>& centers, int64_t d);

// Per-point weights: n values, each finite and at least 0, and unless
// `zero_sum_allowed` not all 0 (a shard of a weighted dataset may weigh 0
// while the others weigh more).
template <typename Scalar>
absl::Status ValidateWeights(const Vector<Scalar>& weights, int64_t n,
                             bool zero_sum_allowed = false);

// No non-finite number leaves the engine. Coordinates within MaxCoordinate
// keep each squared distance finite, but sample weights (`weights`, empty
// when the points weigh alike) can overflow the weighted sums and
// objective, the sum of many distances can pass the range too, and a
// learned model's own weights can move centers anywhere. A non-finite
// `objective` or center is INVALID_ARGUMENT naming the sample weights when
// they are given and the largest is beyond 1 (SampleWeightsOverflow), else
// INVALID_ARGUMENT naming the sums where `model` is an exact construction
// (SumsOverflow), else INTERNAL naming `model`.
template <typename Scalar>
absl::Status ValidateAnswer(double objective, const Matrix<Scalar>& centers,
                            const Vector<Scalar>& weights, absl::string_view model, bool exact);

// ValidateAnswer's error for sample weights, the largest `largest`, that
// overflow `type` ("float", "double") in the weighted sums or objective.
absl::Status SampleWeightsOverflow(double largest, const char* type);

// Its error for unweighted sums of squared distances past `type`'s range.
absl::Status SumsOverflow(const char* type);

// n x d row-major values (as they travel on the wire) to a d x n matrix,
// checking the shape (n, d >= 1) and the count; the values are left to
// ValidatePoints (or Batch::Validate), so each batch is read for them once.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> PointsFromRowMajor(absl::Span<const float> values, int64_t n,
                                                  int64_t d);

// rows x d row-major values to a d x rows matrix, checking only their count
// (`field` names the rows, "points", and `count` their number, "n", in the
// error): for a reader whose shape is checked with the values, as
// Batch::Validate does. A negative rows or d matches no count; 0 matches
// no values.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> MatrixFromRowMajor(absl::Span<const float> values, int64_t rows,
                                                  int64_t d, const char* field, const char* count);

// The same for k x d centers.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> CentersFromRowMajor(absl::Span<const float> values, int64_t k,
                                                   int64_t d);

}  // namespace kmt

#endif  // KMT_CORE_VALIDATION_H_
