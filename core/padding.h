// Serving a learned model of d, k for batches of d' <= d and k' <= k, as
// paper B's appendix A proposes ("Leaner Transformers Can Easily Learn to
// Cluster", arXiv 2610.09760): the points are padded with zero coordinates
// up to d, and the k' centers run as the model's first k' clusters, the
// other k - k' center tokens masked (absent from every attention block, so
// they can take no point and move no real center). The centers are held at
// zero in the padded coordinates after every layer, so each layer's labels
// and objective are the caller's problem in d' dimensions.
#ifndef KMT_CORE_PADDING_H_
#define KMT_CORE_PADDING_H_

#include "absl/status/statusor.h"
#include "core/model.h"
#include "core/transformer.h"

namespace kmt {

// x (r x c) with rows - r zero rows appended (rows >= r).
template <typename Scalar>
Matrix<Scalar> PadRows(const Matrix<Scalar>& x, int rows);

// Whether a model with weights can run d' x k' padded: 1 <= d' <= d and
// 1 <= k' <= k, and the model re-embeds (only the centers carry over).
template <typename Scalar>
absl::Status CheckPaddable(const Model<Scalar>& model, int d, int k);

// A padded run's result in the batch's own space: centers (and the
// trajectory's) cut to their first `d` rows, the final labels, objective and
// cluster sums (when kept) recomputed on the caller's points (d x n).
template <typename Scalar>
void Unpad(const Matrix<Scalar>& points, int d, RunResult<Scalar>* result);

// RunTransformer for points (d' x n) from initial centers (d' x k') in the
// caller's units, d' and k' within the model's: the dense evaluator on the
// padded batch, the result in d'. Where d' = d and k' = k, RunTransformer's
// result to the last bit.
template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> RunPadded(const Model<Scalar>& model,
                                            const Matrix<Scalar>& points,
                                            const Matrix<Scalar>& initial_centers,
                                            const RunOptions& options);

}  // namespace kmt

#endif  // KMT_CORE_PADDING_H_
