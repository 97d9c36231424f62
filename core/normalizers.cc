#include "core/normalizers.h"

#include <algorithm>
#include <cassert>
#include <functional>
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
  // With s sorted descending and V(r) = (mean of the top r) - tau/r,
  // V(r + 1) > V(r) exactly when gaps(r) = sum_{j <= r} (s_j - s_{r+1}) < tau.
  // gaps grows with r, so the smallest best r is the first with gaps >= tau.
  // Summing non-negative differences keeps equal scores exactly tied.
  Eigen::Index r = 1;
  Scalar gaps = 0;
  for (; r < s.size(); ++r) {
    gaps += static_cast<Scalar>(r) * (s[order[r - 1]] - s[order[r]]);
    if (gaps >= tau) break;
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
