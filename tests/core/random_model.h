// A model with random softmax weights for the core's tests: served as a
// learned model is, and not a construction the fast path can run.
#ifndef KMT_TESTS_CORE_RANDOM_MODEL_H_
#define KMT_TESTS_CORE_RANDOM_MODEL_H_

#include "core/model.h"

namespace kmt {

inline Model<double> RandomModel(int d, int k, InputScaling scaling) {
  Model<double> m;
  m.name = "random";
  m.d = d;
  m.k = k;
  m.embedding = Embedding::kOneHot;
  m.reembed = true;
  m.input_scaling = scaling;
  const int dim = m.dim();
  LayerWeights<double> w;
  for (AttentionBlock<double>& b : w.blocks) {
    b = AttentionBlock<double>::Zero(dim);
    b.Q = 0.3 * Matrix<double>::Random(dim, dim);
    b.K = 0.3 * Matrix<double>::Random(dim, dim);
    b.V = 0.3 * Matrix<double>::Random(dim, dim);
    b.bQ = 0.1 * Vector<double>::Random(dim);
    b.normalizer = Normalizer::kSoftmax;
    b.beta = 1;
  }
  m.layers.push_back(w);
  return m;
}

}  // namespace kmt

#endif  // KMT_TESTS_CORE_RANDOM_MODEL_H_
