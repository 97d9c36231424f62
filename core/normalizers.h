// Maps from a vector of scores to weights on the simplex, beyond softmax: the
// sparse and sampled normalizers of attention and of the training loss. Each
// is the argmax over the simplex of <p, s> minus a regulariser (sparsemax:
// ||p||^2 / 2, normmax: tau ||p||_inf) or plus noise (Gumbel-max).
#ifndef KMT_CORE_NORMALIZERS_H_
#define KMT_CORE_NORMALIZERS_H_

#include "core/types.h"

namespace kmt {

// The Euclidean projection of z (not empty) onto the simplex:
// max(z_l - t, 0) with t such that the weights sum to 1 (Martins & Astudillo
// 2016). Scores far below the best get weight exactly 0.
template <typename Scalar>
Vector<Scalar> Sparsemax(const Eigen::Ref<const Vector<Scalar>>& z);

// argmax over the simplex of <p, s> - tau ||p||_inf, tau >= 0, s not empty:
// weight 1/r on the r highest scores, r maximising (mean of the top r) - tau/r.
// Equal scores are taken in increasing index; of several best r, the
// smallest. tau = 0 is an argmax, tau -> infinity the uniform average.
template <typename Scalar>
Vector<Scalar> Normmax(const Eigen::Ref<const Vector<Scalar>>& s, Scalar tau);

// One-hot on argmax_l (s_l + noise_l), ties to the lowest index. With
// standard Gumbel noise the chosen index is a draw from softmax(s).
template <typename Scalar>
Vector<Scalar> GumbelMax(const Eigen::Ref<const Vector<Scalar>>& s,
                         const Eigen::Ref<const Vector<Scalar>>& noise);

}  // namespace kmt

#endif  // KMT_CORE_NORMALIZERS_H_
