#include "tests/support/random_weights.h"

#include <cmath>

namespace kmt {

template <typename Scalar>
Matrix<Scalar> NormalMatrix(Eigen::Index rows, Eigen::Index cols, Rng& rng, double scale) {
  Matrix<Scalar> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<Scalar>(scale * rng.Normal());
  return m;
}

template <typename Scalar>
Matrix<Scalar> UniformMatrix(Eigen::Index rows, Eigen::Index cols, Rng& rng, double lo, double hi) {
  Matrix<Scalar> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    m.data()[i] = static_cast<Scalar>(lo + (hi - lo) * rng.Uniform());
  }
  return m;
}

template <typename Scalar>
AttentionBlock<Scalar> RandomBlock(int dim, Rng& rng, double lo, double hi) {
  AttentionBlock<Scalar> b;
  b.Q = UniformMatrix<Scalar>(dim, dim, rng, lo, hi);
  b.K = UniformMatrix<Scalar>(dim, dim, rng, lo, hi);
  b.V = UniformMatrix<Scalar>(dim, dim, rng, lo, hi);
  b.bQ = UniformMatrix<Scalar>(dim, 1, rng, lo, hi);
  b.bK = UniformMatrix<Scalar>(dim, 1, rng, lo, hi);
  b.bV = UniformMatrix<Scalar>(dim, 1, rng, lo, hi);
  return b;
}

template <typename Scalar>
AttentionBlock<Scalar> RandomSoftmaxBlock(int dim, Rng& rng) {
  const double bound = 1 / std::sqrt(static_cast<double>(dim));
  AttentionBlock<Scalar> b = RandomBlock<Scalar>(dim, rng, -bound, bound);
  b.normalizer = Normalizer::kSoftmax;
  b.beta = static_cast<Scalar>(bound);
  return b;
}

template <typename Scalar>
LayerWeights<Scalar> RandomSoftmaxLayer(int dim, Rng& rng) {
  LayerWeights<Scalar> w;
  for (AttentionBlock<Scalar>& b : w.blocks) b = RandomSoftmaxBlock<Scalar>(dim, rng);
  return w;
}

template <typename Scalar>
Model<Scalar> RandomSoftmaxModel(int d, int k, InputScaling scaling, uint64_t seed) {
  Model<Scalar> m;
  m.name = "random";
  m.d = d;
  m.k = k;
  m.embedding = Embedding::kOneHot;
  m.reembed = true;
  m.input_scaling = scaling;
  Rng rng(seed);
  m.layers.push_back(RandomSoftmaxLayer<Scalar>(m.dim(), rng));
  return m;
}

template <typename Scalar>
FeedForward<Scalar> RandomFeedForward(int dim, int hidden, Rng& rng) {
  FeedForward<Scalar> f;
  f.W1 = NormalMatrix<Scalar>(hidden, dim, rng);
  f.b1 = NormalMatrix<Scalar>(hidden, 1, rng);
  f.W2 = NormalMatrix<Scalar>(dim, hidden, rng);
  f.b2 = NormalMatrix<Scalar>(dim, 1, rng);
  return f;
}

#define KMT_INSTANTIATE(S)                                                               \
  template Matrix<S> NormalMatrix<S>(Eigen::Index, Eigen::Index, Rng&, double);          \
  template Matrix<S> UniformMatrix<S>(Eigen::Index, Eigen::Index, Rng&, double, double); \
  template AttentionBlock<S> RandomBlock<S>(int, Rng&, double, double);                  \
  template AttentionBlock<S> RandomSoftmaxBlock<S>(int, Rng&);                           \
  template LayerWeights<S> RandomSoftmaxLayer<S>(int, Rng&);                             \
  template Model<S> RandomSoftmaxModel<S>(int, int, InputScaling, uint64_t);             \
  template FeedForward<S> RandomFeedForward<S>(int, int, Rng&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
