#include "core/normalizers.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

namespace kmt {

template <typename Scalar>
Vector<Scalar> Sparsemax(const Eigen::Ref<const Vector<Scalar>>& z) {
  assert(z.size() > 0);
  // The threshold is found on z - max z: the projection ignores a common
  // shift, and there a lone maximiser gets exactly 1 and the support is never
  // empty, however large the scores are.
  const Scalar top = z.maxCoeff();
  const Vector<Scalar> shifted = (z.array() - top).matrix();
  std::vector<Scalar> sorted(shifted.data(), shifted.data() + shifted.size());
  std::sort(sorted.begin(), sorted.end(), std::greater<Scalar>());
  Scalar cumulative = 0, threshold = 0;
  for (size_t r = 0; r < sorted.size(); ++r) {
    cumulative += sorted[r];
    const Scalar t = (cumulative - 1) / static_cast<Scalar>(r + 1);
    if (sorted[r] > t) threshold = t;
  }
  return (shifted.array() - threshold).max(Scalar(0)).matrix();
}

template <typename Scalar>
Vector<Scalar> Normmax(const Eigen::Ref<const Vector<Scalar>>& s, Scalar tau) {
  assert(s.size() > 0 && tau >= 0);
  std::vector<Eigen::Index> order(s.size());
  std::iota(order.begin(), order.end(), Eigen::Index{0});
  std::stable_sort(order.begin(), order.end(),
                   [&s](Eigen::Index a, Eigen::Index b) { return s[a] > s[b]; });
  // V(r) = (mean of the top r) - tau / r, written (sum - tau) / r so that it
  // rounds once; of several best r, the smallest.
  Eigen::Index r = 1;
  Scalar prefix = 0, best = -std::numeric_limits<Scalar>::infinity();
  for (Eigen::Index t = 1; t <= s.size(); ++t) {
    prefix += s[order[t - 1]];
    const Scalar value = (prefix - tau) / static_cast<Scalar>(t);
    if (value > best) {
      best = value;
      r = t;
    }
  }
  Vector<Scalar> w = Vector<Scalar>::Zero(s.size());
  for (Eigen::Index j = 0; j < r; ++j) w[order[j]] = Scalar(1) / static_cast<Scalar>(r);
  return w;
}

template <typename Scalar>
Vector<Scalar> GumbelMax(const Eigen::Ref<const Vector<Scalar>>& s,
                         const Eigen::Ref<const Vector<Scalar>>& noise) {
  assert(s.size() > 0 && noise.size() == s.size());
  Eigen::Index best = 0;
  Scalar best_value = s[0] + noise[0];
  for (Eigen::Index l = 1; l < s.size(); ++l) {
    const Scalar value = s[l] + noise[l];
    if (value > best_value) {
      best = l;
      best_value = value;
    }
  }
  Vector<Scalar> w = Vector<Scalar>::Zero(s.size());
  w[best] = 1;
  return w;
}

#define KMT_INSTANTIATE(S)                                              \
  template Vector<S> Sparsemax<S>(const Eigen::Ref<const Vector<S>>&);  \
  template Vector<S> Normmax<S>(const Eigen::Ref<const Vector<S>>&, S); \
  template Vector<S> GumbelMax<S>(const Eigen::Ref<const Vector<S>>&,   \
                                  const Eigen::Ref<const Vector<S>>&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
