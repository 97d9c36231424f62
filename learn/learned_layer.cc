#include "learn/learned_layer.h"

#include "core/distances.h"

namespace kmt {

template <typename Scalar>
Matrix<Scalar> SoftmaxAttentionForward(const AttentionBlock<Scalar>& block,
                                       const Matrix<Scalar>& queries, const Matrix<Scalar>& keys,
                                       AttentionCache<Scalar>* cache) {
  AttentionCache<Scalar>& c = *cache;
  c.queries = queries;
  c.keys = keys;
  // 1. Projections.
  c.p = (block.Q * queries).colwise() + block.bQ;
  c.k = (block.K * keys).colwise() + block.bK;
  c.v = (block.V * keys).colwise() + block.bV;
  // 2. Scores s_lq = -beta ||p_q - k_l||^2, keys x queries.
  Matrix<Scalar> s;
  SquaredDistances<Scalar>(c.k, SquaredNorms<Scalar>(c.k), c.p, SquaredNorms<Scalar>(c.p), &s);
  s *= -block.beta;
  // 3. Softmax over the keys of each query.
  c.weights = (s.rowwise() - s.colwise().maxCoeff()).array().exp().matrix();
  c.weights.array().rowwise() /= c.weights.colwise().sum().array();
  // 4. Weighted values.
  return c.v * c.weights;
}

template <typename Scalar>
void SoftmaxAttentionBackward(const AttentionBlock<Scalar>& block, const AttentionCache<Scalar>& c,
                              const Matrix<Scalar>& d_out, AttentionBlock<Scalar>* grad,
                              Matrix<Scalar>* d_keys) {
  // 4. Weighted values: out = v W.
  const Matrix<Scalar> d_v = d_out * c.weights.transpose();  // dim x nk
  const Matrix<Scalar> d_w = c.v.transpose() * d_out;        // nk x nq
  // 3. Softmax: ds_l = w_l (dw_l - sum_l' w_l' dw_l').
  // (Reductions are stored before use: inside a product Eigen would
  // re-evaluate them for every coefficient.)
  const Matrix<Scalar> wd = c.weights.cwiseProduct(d_w);
  const Vector<Scalar> wd_sum = wd.colwise().sum().transpose();
  Matrix<Scalar> d_s = wd - c.weights * wd_sum.asDiagonal();  // nk x nq
  // 2. Scores: s_lq = -beta (||p_q||^2 + ||k_l||^2 - 2 k_l.p_q).
  d_s *= -block.beta;
  const Vector<Scalar> ds_cols = d_s.colwise().sum().transpose();
  const Vector<Scalar> ds_rows = d_s.rowwise().sum();
  Matrix<Scalar> d_p = c.p * ds_cols.asDiagonal();  // dim x nq
  d_p.noalias() -= c.k * d_s;
  d_p *= Scalar(2);
  Matrix<Scalar> d_k = c.k * ds_rows.asDiagonal();  // dim x nk
  d_k.noalias() -= c.p * d_s.transpose();
  d_k *= Scalar(2);
  // 1. Projections.
  grad->Q.noalias() += d_p * c.queries.transpose();
  grad->bQ += d_p.rowwise().sum();
  grad->K.noalias() += d_k * c.keys.transpose();
  grad->bK += d_k.rowwise().sum();
  grad->V.noalias() += d_v * c.keys.transpose();
  grad->bV += d_v.rowwise().sum();
  if (d_keys != nullptr) {
    d_keys->noalias() += block.K.transpose() * d_k;
    d_keys->noalias() += block.V.transpose() * d_v;
  }
}

template <typename Scalar>
Matrix<Scalar> LayerForward(const LayerWeights<Scalar>& w, Embedding embedding,
                            const Matrix<Scalar>& points, const Matrix<Scalar>& centers,
                            LayerCache<Scalar>* cache) {
  const int m = RegisterDim(embedding, static_cast<int>(centers.cols()));
  const Matrix<Scalar> x0 = EmbedPoints(points, m);
  const Matrix<Scalar> c0 = EmbedCenters(centers, embedding);
  Matrix<Scalar> x1 = x0;
  x1 += SoftmaxAttentionForward(w[BlockId::kPointsToPoints], x0, x0,
                                cache->Of(BlockId::kPointsToPoints));
  x1 += SoftmaxAttentionForward(w[BlockId::kPointsToCenters], x0, c0,
                                cache->Of(BlockId::kPointsToCenters));
  Matrix<Scalar> c1 = c0;
  c1 += SoftmaxAttentionForward(w[BlockId::kCentersToCenters], c0, c0,
                                cache->Of(BlockId::kCentersToCenters));
  c1 += SoftmaxAttentionForward(w[BlockId::kCentersToPoints], c0, x1,
                                cache->Of(BlockId::kCentersToPoints));
  return c1.topRows(points.rows());
}

template <typename Scalar>
void LayerBackward(const LayerWeights<Scalar>& w, const LayerCache<Scalar>& cache,
                   const Matrix<Scalar>& d_centers, LayerWeights<Scalar>* grad) {
  const BlockId theta1 = BlockId::kPointsToCenters, theta2 = BlockId::kPointsToPoints,
                theta3 = BlockId::kCentersToPoints, theta4 = BlockId::kCentersToCenters;
  const Eigen::Index dim = cache.Of(theta1).p.rows(), d = d_centers.rows();
  // C1 = C0 + A3 + A4 with C0 constant: both blocks see dC1.
  Matrix<Scalar> d_c1 = Matrix<Scalar>::Zero(dim, d_centers.cols());
  d_c1.topRows(d) = d_centers;
  Matrix<Scalar> d_x1 = Matrix<Scalar>::Zero(dim, cache.Of(theta3).keys.cols());
  SoftmaxAttentionBackward<Scalar>(w[theta3], cache.Of(theta3), d_c1, &(*grad)[theta3], &d_x1);
  SoftmaxAttentionBackward<Scalar>(w[theta4], cache.Of(theta4), d_c1, &(*grad)[theta4], nullptr);
  // X1 = X0 + A1 + A2 with X0 constant.
  SoftmaxAttentionBackward<Scalar>(w[theta1], cache.Of(theta1), d_x1, &(*grad)[theta1], nullptr);
  SoftmaxAttentionBackward<Scalar>(w[theta2], cache.Of(theta2), d_x1, &(*grad)[theta2], nullptr);
}

template <typename Scalar>
LayerWeights<Scalar> ZeroLike(const LayerWeights<Scalar>& like) {
  LayerWeights<Scalar> zero = like;
  for (AttentionBlock<Scalar>& b : zero.blocks) {
    b.Q.setZero();
    b.K.setZero();
    b.V.setZero();
    b.bQ.setZero();
    b.bK.setZero();
    b.bV.setZero();
  }
  return zero;
}

#define KMT_INSTANTIATE(S)                                                                       \
  template Matrix<S> SoftmaxAttentionForward<S>(const AttentionBlock<S>&, const Matrix<S>&,      \
                                                const Matrix<S>&, AttentionCache<S>*);           \
  template void SoftmaxAttentionBackward<S>(const AttentionBlock<S>&, const AttentionCache<S>&,  \
                                            const Matrix<S>&, AttentionBlock<S>*, Matrix<S>*);   \
  template Matrix<S> LayerForward<S>(const LayerWeights<S>&, Embedding, const Matrix<S>&,        \
                                     const Matrix<S>&, LayerCache<S>*);                          \
  template void LayerBackward<S>(const LayerWeights<S>&, const LayerCache<S>&, const Matrix<S>&, \
                                 LayerWeights<S>*);                                              \
  template LayerWeights<S> ZeroLike<S>(const LayerWeights<S>&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
