// A feed-forward block on tokens, with the residual form of the attention
// blocks: z <- z + W2 relu(W1 z + b1)^2 + b2. Its activation is the
// rectified quadratic ReLU(u)^2 of paper A's Theorem 2.2, under which a
// hidden pair +c_l, -c_l gives back c_l^2 exactly: the dot-product Lloyd
// circuit recomputes the squared norm of every new center with it.
#ifndef KMT_CORE_FEED_FORWARD_H_
#define KMT_CORE_FEED_FORWARD_H_

#include "absl/status/status.h"
#include "core/types.h"

namespace kmt {

template <typename Scalar>
struct FeedForward {
  Matrix<Scalar> W1;  ///< hidden x dim
  Vector<Scalar> b1;  ///< hidden
  Matrix<Scalar> W2;  ///< dim x hidden
  Vector<Scalar> b2;  ///< dim

  int hidden() const { return static_cast<int>(W1.rows()); }
};

// Shape and value check for tokens of size dim: at least one hidden unit,
// every weight finite.
template <typename Scalar>
absl::Status ValidateFeedForward(const FeedForward<Scalar>& block, int dim);

// What the block adds to each token column: W2 relu(W1 z + b1)^2 + b2.
template <typename Scalar>
Matrix<Scalar> FeedForwardOutput(const FeedForward<Scalar>& block, const Matrix<Scalar>& tokens);

}  // namespace kmt

#endif  // KMT_CORE_FEED_FORWARD_H_
