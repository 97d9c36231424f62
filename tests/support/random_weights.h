// Random matrices and weights for the tests and the benchmarks, drawn from
// the seeded Rng of core/random.h, so a seed names the same weights on every
// platform: the one home of a random attention block, layer, softmax model
// and feed-forward block.
#ifndef KMT_TESTS_SUPPORT_RANDOM_WEIGHTS_H_
#define KMT_TESTS_SUPPORT_RANDOM_WEIGHTS_H_

#include <cstdint>

#include "core/feed_forward.h"
#include "core/model.h"
#include "core/random.h"
#include "core/types.h"

namespace kmt {

// rows x cols, every entry scale * N(0, 1), drawn in storage order.
template <typename Scalar>
Matrix<Scalar> NormalMatrix(Eigen::Index rows, Eigen::Index cols, Rng& rng, double scale = 1);

// rows x cols, every entry U(lo, hi), drawn in storage order.
template <typename Scalar>
Matrix<Scalar> UniformMatrix(Eigen::Index rows, Eigen::Index cols, Rng& rng, double lo = -1,
                             double hi = 1);

// A block on tokens of size dim whose projections and biases are U(lo, hi),
// drawn in the order Q, K, V, bQ, bK, bV; score, normalizer and beta keep
// AttentionBlock's defaults for the caller to set.
template <typename Scalar>
AttentionBlock<Scalar> RandomBlock(int dim, Rng& rng, double lo = -1, double hi = 1);

// A softmax block as the trainer starts one: every weight and bias
// U(-1/sqrt(dim), 1/sqrt(dim)), beta = 1/sqrt(dim).
template <typename Scalar>
AttentionBlock<Scalar> RandomSoftmaxBlock(int dim, Rng& rng);

// Four such blocks, theta1 ... theta4 drawn in that order.
template <typename Scalar>
LayerWeights<Scalar> RandomSoftmaxLayer(int dim, Rng& rng);

// A learned model's shape with one random softmax layer: one-hot registers,
// re-embedding before every layer, the points mapped by `scaling`. It is
// served as a learned model is, not a construction the fast path runs.
template <typename Scalar>
Model<Scalar> RandomSoftmaxModel(int d, int k, InputScaling scaling, uint64_t seed);

// A feed-forward block on tokens of size dim with `hidden` units, every
// weight and bias N(0, 1), drawn in the order W1, b1, W2, b2.
template <typename Scalar>
FeedForward<Scalar> RandomFeedForward(int dim, int hidden, Rng& rng);

}  // namespace kmt

#endif  // KMT_TESTS_SUPPORT_RANDOM_WEIGHTS_H_
