// The trainable k-means transformer layer (docs/learning.md): four Euclidean
// softmax attention blocks with full Q, K, V and biases, applied once to
// freshly embedded tokens. Forward passes cache what the backward passes
// need; backward passes accumulate into gradients, as in llm.c. Inputs (the
// points and the initial centers) are constants, so the backward passes
// return gradients for the weights only. Every intermediate lives in a
// caller-owned cache or scratch: a trainer that keeps one per thread
// allocates no large buffer after its first task.
#ifndef KMT_LEARN_LEARNED_LAYER_H_
#define KMT_LEARN_LEARNED_LAYER_H_

#include "core/attention.h"
#include "core/embedding.h"
#include "core/model.h"

namespace kmt {

// What one attention block's backward pass needs from its forward pass.
template <typename Scalar>
struct AttentionCache {
  Matrix<Scalar> queries;  // Z, dim x nq
  Matrix<Scalar> keys;     // Z', dim x nk
  Matrix<Scalar> p;        // Q Z + b_Q, dim x nq
  Matrix<Scalar> k;        // K Z' + b_K, dim x nk
  Matrix<Scalar> v;        // V Z' + b_V, dim x nk
  Matrix<Scalar> weights;  // softmax over keys, nk x nq
};

// The backward pass's intermediates, kept between calls so that their
// buffers are reused.
template <typename Scalar>
struct AttentionScratch {
  Matrix<Scalar> d_v;      // nk x dim: d v, transposed
  Matrix<Scalar> d_s;      // nk x nq: d weights, then d scores
  Matrix<Scalar> d_p;      // dim x nq
  Matrix<Scalar> d_k;      // nk x dim: d k, transposed
  Vector<Scalar> ds_cols;  // nq: column sums of d scores
  Vector<Scalar> ds_rows;  // nk: row sums of d scores
};

// *out (dim x nq, resized) = sum_l w_l (V z'_l + b_V),
// w = softmax_l(-beta ||Q z + b_Q - (K z'_l + b_K)||^2).
// queries is (dim, nq), keys is (dim, nk).
template <typename Scalar>
void SoftmaxAttentionForward(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                             const Matrix<Scalar>& keys, AttentionCache<Scalar>* cache,
                             Matrix<Scalar>* out);

// d_out is (dim, nq). Adds the block's weight gradients to *grad and, if
// given, the gradient with respect to the keys to *d_keys (dim x nk).
template <typename Scalar>
void SoftmaxAttentionBackward(const AttentionBlock<Scalar>& block,
                              const AttentionCache<Scalar>& cache, const Matrix<Scalar>& d_out,
                              AttentionBlock<Scalar>* grad, Matrix<Scalar>* d_keys,
                              AttentionScratch<Scalar>* scratch);

// One layer's forward cache and the buffers both passes reuse.
template <typename Scalar>
struct LayerCache {
  std::array<AttentionCache<Scalar>, 4> blocks;  ///< indexed by BlockId
  Matrix<Scalar> x0, x1;                         ///< point tokens before and after (dim x n)
  Matrix<Scalar> c0, c1;                         ///< center tokens before and after (dim x k)
  Matrix<Scalar> out;                            ///< one block's output before the residual sum
  Matrix<Scalar> d_c1, d_x1;                     ///< backward: gradients of the new tokens
  AttentionScratch<Scalar> scratch;              ///< backward: shared by the four blocks

  AttentionCache<Scalar>* Of(BlockId id) { return &blocks[static_cast<int>(id)]; }
  const AttentionCache<Scalar>& Of(BlockId id) const { return blocks[static_cast<int>(id)]; }
};

// One layer on points X (d x n) from centers C0 (d x k): tokens [X; 0] and
// [C0; E], then X1 = X0 + A1 + A2, C1 = C0 + A3(C0, X1) + A4(C0, C0).
// Returns the new centers, the first d rows of C1 (d x k). With `clusters`
// above k, the k centers are the first clusters of a layout for that many
// (EmbedCentersOf), the others masked; 0: k.
template <typename Scalar>
Matrix<Scalar> LayerForward(const LayerWeights<Scalar>& w, Embedding embedding,
                            const Matrix<Scalar>& points, const Matrix<Scalar>& centers,
                            LayerCache<Scalar>* cache, int clusters = 0);

// d_centers is (d, k), the loss gradient for LayerForward's result, which
// filled *cache. Adds the weight gradients to *grad.
template <typename Scalar>
void LayerBackward(const LayerWeights<Scalar>& w, const Matrix<Scalar>& d_centers,
                   LayerCache<Scalar>* cache, LayerWeights<Scalar>* grad);

// Weights with every entry zero, shaped like `like` (gradient accumulators).
template <typename Scalar>
LayerWeights<Scalar> ZeroLike(const LayerWeights<Scalar>& like);

// Sets every entry of the four blocks to zero, keeping the buffers.
template <typename Scalar>
void SetZero(LayerWeights<Scalar>* w);

}  // namespace kmt

#endif  // KMT_LEARN_LEARNED_LAYER_H_
