#include "core/feed_forward.h"

#include "absl/strings/str_cat.h"

namespace kmt {
namespace {

template <typename Derived>
absl::Status CheckShape(const Eigen::MatrixBase<Derived>& m, Eigen::Index rows, Eigen::Index cols,
                        absl::string_view what) {
  if (m.rows() != rows || m.cols() != cols) {
    return absl::InvalidArgumentError(absl::StrCat("feed-forward ", what, " is ", m.rows(), "x",
                                                   m.cols(), ", expected ", rows, "x", cols));
  }
  if (!m.allFinite()) {
    return absl::InvalidArgumentError(
        absl::StrCat("feed-forward ", what, " has a non-finite value"));
  }
  return absl::OkStatus();
}

}  // namespace

template <typename Scalar>
absl::Status ValidateFeedForward(const FeedForward<Scalar>& block, int dim) {
  const int hidden = block.hidden();
  if (hidden < 1) return absl::InvalidArgumentError("feed-forward block has no hidden unit");
  if (absl::Status s = CheckShape(block.W1, hidden, dim, "W1"); !s.ok()) return s;
  if (absl::Status s = CheckShape(block.b1, hidden, 1, "b1"); !s.ok()) return s;
  if (absl::Status s = CheckShape(block.W2, dim, hidden, "W2"); !s.ok()) return s;
  return CheckShape(block.b2, dim, 1, "b2");
}

template <typename Scalar>
Matrix<Scalar> FeedForwardOutput(const FeedForward<Scalar>& block, const Matrix<Scalar>& tokens) {
  const Matrix<Scalar> hidden =
      ((block.W1 * tokens).colwise() + block.b1).cwiseMax(Scalar(0)).array().square().matrix();
  return (block.W2 * hidden).colwise() + block.b2;
}

#define KMT_INSTANTIATE(S)                                                  \
  template absl::Status ValidateFeedForward<S>(const FeedForward<S>&, int); \
  template Matrix<S> FeedForwardOutput<S>(const FeedForward<S>&, const Matrix<S>&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
