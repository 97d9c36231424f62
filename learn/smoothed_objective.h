// The training loss: a smoothed upper bound of the k-means objective,
//   L = sum_i sum_j w_ij ||x_i - c_j||^2,  w_i = normalizer(-r_i / tau),
// with r_ij = ||x_i - c_j||^2 and the normalizer softmax or sparsemax. As
// tau -> 0 it tends to the objective from above (w puts all weight on the
// nearest center).
#ifndef KMT_LEARN_SMOOTHED_OBJECTIVE_H_
#define KMT_LEARN_SMOOTHED_OBJECTIVE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

enum class LossForm { kSoftmax, kSparsemax };

absl::string_view LossFormName(LossForm form);
absl::StatusOr<LossForm> ParseLossForm(absl::string_view name);

// points is (d, n), centers (d, k). Returns L; if d_centers is given, adds
// scale * dL/dC to it (d x k).
template <typename Scalar>
double SmoothedObjective(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, double tau,
                         LossForm form, Scalar scale, Matrix<Scalar>* d_centers);

}  // namespace kmt

#endif  // KMT_LEARN_SMOOTHED_OBJECTIVE_H_
