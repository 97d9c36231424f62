#include "learn/learned_layer.h"

#include "core/distances.h"

namespace kmt {

template <typename Scalar>
void SoftmaxAttentionForward(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                             const Matrix<Scalar>& keys, AttentionCache<Scalar>* cache,
                             Matrix<Scalar>* out) {
  AttentionCache<Scalar>& c = *cache;
  c.queries = queries;
  c.keys = keys;
  // 1. Projections.
  c.p = (block.Q * queries).colwise() + block.bQ;
  c.k = (block.K * keys).colwise() + block.bK;
  c.v = (block.V * keys).colwise() + block.bV;
  // 2. Scores s_lq = -beta ||p_q - k_l||^2 (keys x queries) from the cross
  // products, and 3. the softmax over the keys of each query, one column at
  // a time while it is in cache. The largest score is the nearest key's, so
  // exp(s_lq - max_l s_lq) = exp(-beta (||p_q - k_l||^2 - nearest)).
  c.weights.noalias() = c.k.transpose() * c.p;
  const Vector<Scalar> k_sq = SquaredNorms<Scalar>(c.k), p_sq = SquaredNorms<Scalar>(c.p);
  for (Eigen::Index q = 0; q < c.weights.cols(); ++q) {
    auto s = c.weights.col(q);
    CrossToSquaredDistances<Scalar>(s, k_sq, p_sq[q]);
    const Scalar nearest = s.minCoeff();
    s = ((s.array() - nearest) * -block.beta).exp().matrix();
    s /= s.sum();
  }
  // 4. Weighted values.
  out->noalias() = c.v * c.weights;
}

template <typename Scalar>
void SoftmaxAttentionBackward(const AttentionBlock<Scalar>& block, const AttentionCache<Scalar>& c,
                              const Matrix<Scalar>& d_out, AttentionBlock<Scalar>* grad,
                              Matrix<Scalar>* d_keys, AttentionScratch<Scalar>* scratch) {
  AttentionScratch<Scalar>& b = *scratch;
  // The gradients of v and k are kept transposed (nk x dim): their products
  // then read the nk x nq matrices W and dS down their columns, as stored,
  // instead of packing them row by row.
  // 4. Weighted values: out = v W.
  b.d_v.noalias() = c.weights * d_out.transpose();  // (d v)^T, nk x dim
  b.d_s.noalias() = c.v.transpose() * d_out;        // d W, nk x nq
  // 3. Softmax: ds_l = w_l (dw_l - sum_l' w_l' dw_l'), column by column.
  // 2. Scores: s_lq = -beta (||p_q||^2 + ||k_l||^2 - 2 k_l.p_q).
  b.ds_cols.resize(b.d_s.cols());
  for (Eigen::Index q = 0; q < b.d_s.cols(); ++q) {
    auto ds = b.d_s.col(q);
    const auto w = c.weights.col(q);
    ds = w.cwiseProduct(ds);
    const Scalar wd_sum = ds.sum();
    ds = (ds - w * wd_sum) * -block.beta;
    b.ds_cols[q] = ds.sum();
  }
  b.ds_rows = b.d_s.rowwise().sum();
  b.d_p.noalias() = c.p * b.ds_cols.asDiagonal();  // dim x nq
  b.d_p.noalias() -= c.k * b.d_s;
  b.d_p *= Scalar(2);
  b.d_k.noalias() = b.ds_rows.asDiagonal() * c.k.transpose();  // (d k)^T, nk x dim
  b.d_k.noalias() -= b.d_s * c.p.transpose();
  b.d_k *= Scalar(2);
  // 1. Projections.
  grad->Q.noalias() += b.d_p * c.queries.transpose();
  grad->bQ += b.d_p.rowwise().sum();
  grad->K.noalias() += b.d_k.transpose() * c.keys.transpose();
  grad->bK += b.d_k.colwise().sum().transpose();
  grad->V.noalias() += b.d_v.transpose() * c.keys.transpose();
  grad->bV += b.d_v.colwise().sum().transpose();
  if (d_keys != nullptr) {
    d_keys->noalias() += block.K.transpose() * b.d_k.transpose();
    d_keys->noalias() += block.V.transpose() * b.d_v.transpose();
  }
}

template <typename Scalar>
Matrix<Scalar> LayerForward(const LayerWeights<Scalar>& w, Embedding embedding,
                            const Matrix<Scalar>& points, const Matrix<Scalar>& centers,
                            LayerCache<Scalar>* cache, int clusters) {
  LayerCache<Scalar>& c = *cache;
  const Eigen::Index d = points.rows();
  if (clusters == 0) clusters = static_cast<int>(centers.cols());
  const int m = RegisterDim(embedding, clusters);
  // [X; 0] written in place: EmbedPoints would allocate it anew each time.
  c.x0.resize(d + m, points.cols());
  c.x0.topRows(d) = points;
  c.x0.bottomRows(m).setZero();
  c.c0 = EmbedCentersOf(centers, embedding, clusters);
  c.x1 = c.x0;
  SoftmaxAttentionForward(w[BlockId::kPointsToPoints], c.x0, c.x0, c.Of(BlockId::kPointsToPoints),
                          &c.out);
  c.x1 += c.out;
  SoftmaxAttentionForward(w[BlockId::kPointsToCenters], c.x0, c.c0, c.Of(BlockId::kPointsToCenters),
                          &c.out);
  c.x1 += c.out;
  c.c1 = c.c0;
  SoftmaxAttentionForward(w[BlockId::kCentersToCenters], c.c0, c.c0,
                          c.Of(BlockId::kCentersToCenters), &c.out);
  c.c1 += c.out;
  SoftmaxAttentionForward(w[BlockId::kCentersToPoints], c.c0, c.x1, c.Of(BlockId::kCentersToPoints),
                          &c.out);
  c.c1 += c.out;
  return c.c1.topRows(d);
}

template <typename Scalar>
void LayerBackward(const LayerWeights<Scalar>& w, const Matrix<Scalar>& d_centers,
                   LayerCache<Scalar>* cache, LayerWeights<Scalar>* grad) {
  const BlockId theta1 = BlockId::kPointsToCenters, theta2 = BlockId::kPointsToPoints,
                theta3 = BlockId::kCentersToPoints, theta4 = BlockId::kCentersToCenters;
  LayerCache<Scalar>& c = *cache;
  const LayerCache<Scalar>& forward = *cache;
  const Eigen::Index dim = forward.Of(theta1).p.rows(), d = d_centers.rows();
  // C1 = C0 + A3 + A4 with C0 constant: both blocks see dC1.
  c.d_c1.setZero(dim, d_centers.cols());
  c.d_c1.topRows(d) = d_centers;
  c.d_x1.setZero(dim, forward.Of(theta3).keys.cols());
  SoftmaxAttentionBackward<Scalar>(w[theta3], forward.Of(theta3), c.d_c1, &(*grad)[theta3], &c.d_x1,
                                   &c.scratch);
  SoftmaxAttentionBackward<Scalar>(w[theta4], forward.Of(theta4), c.d_c1, &(*grad)[theta4], nullptr,
                                   &c.scratch);
  // X1 = X0 + A1 + A2 with X0 constant.
  SoftmaxAttentionBackward<Scalar>(w[theta1], forward.Of(theta1), c.d_x1, &(*grad)[theta1], nullptr,
                                   &c.scratch);
  SoftmaxAttentionBackward<Scalar>(w[theta2], forward.Of(theta2), c.d_x1, &(*grad)[theta2], nullptr,
                                   &c.scratch);
}

template <typename Scalar>
void SetZero(LayerWeights<Scalar>* w) {
  for (AttentionBlock<Scalar>& b : w->blocks) {
    b.Q.setZero();
    b.K.setZero();
    b.V.setZero();
    b.bQ.setZero();
    b.bK.setZero();
    b.bV.setZero();
  }
}

template <typename Scalar>
LayerWeights<Scalar> ZeroLike(const LayerWeights<Scalar>& like) {
  LayerWeights<Scalar> zero = like;
  SetZero(&zero);
  return zero;
}

#define KMT_INSTANTIATE(S)                                                                      \
  template void SoftmaxAttentionForward<S>(const AttentionBlock<S>&, const Matrix<S>&,          \
                                           const Matrix<S>&, AttentionCache<S>*, Matrix<S>*);   \
  template void SoftmaxAttentionBackward<S>(const AttentionBlock<S>&, const AttentionCache<S>&, \
                                            const Matrix<S>&, AttentionBlock<S>*, Matrix<S>*,   \
                                            AttentionScratch<S>*);                              \
  template Matrix<S> LayerForward<S>(const LayerWeights<S>&, Embedding, const Matrix<S>&,       \
                                     const Matrix<S>&, LayerCache<S>*, int);                    \
  template void LayerBackward<S>(const LayerWeights<S>&, const Matrix<S>&, LayerCache<S>*,      \
                                 LayerWeights<S>*);                                             \
  template void SetZero<S>(LayerWeights<S>*);                                                   \
  template LayerWeights<S> ZeroLike<S>(const LayerWeights<S>&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
