// The one squared-distance kernel of the engine. Squared Euclidean distances
// between the columns of two matrices come from ||a||^2 + ||b||^2 - 2<a, b>
// through one matrix product (as FAISS computes them), negative round-off
// clamped to zero. The product form can misorder two distances that differ
// by less than its round-off, so callers that must decide exact ties bound it
// (hardmax attention with SquaredDistanceRoundOff, the assignment's scores
// with ScoreRoundOff) and score the candidates within twice that bound again
// with DirectSquaredDistance.
#ifndef KMT_CORE_DISTANCES_H_
#define KMT_CORE_DISTANCES_H_

#include <algorithm>
#include <limits>

#include "core/types.h"

namespace kmt {

// Squared norm of every column, as a column vector.
template <typename Scalar>
Vector<Scalar> SquaredNorms(const Eigen::Ref<const Matrix<Scalar>>& m) {
  return m.colwise().squaredNorm().transpose();
}

// The product form's last step for one column: `cross` holds the products
// <a_i, b_j> of every column a_i with one b_j (squared norm b_sq) and becomes
// ||a_i - b_j||^2, clamped at zero. Callers that keep a large block of cross
// products run it column by column while each column is in cache.
template <typename Scalar, typename Column>
void CrossToSquaredDistances(Column&& cross, const Eigen::Ref<const Vector<Scalar>>& a_sq,
                             Scalar b_sq) {
  cross = ((Scalar(-2) * cross.array() + a_sq.array()) + b_sq).max(Scalar(0)).matrix();
}

// The same step for an attention score: minus the squared distance.
template <typename Scalar, typename Column>
void CrossToNegativeSquaredDistances(Column&& cross, const Eigen::Ref<const Vector<Scalar>>& a_sq,
                                     Scalar b_sq) {
  cross = -((Scalar(-2) * cross.array() + a_sq.array()) + b_sq).max(Scalar(0)).matrix();
}

// out (a.cols() x b.cols()): out(i, j) = ||a_i - b_j||^2 in product form,
// given the columns' squared norms a_sq and b_sq. `out` is resized.
template <typename Scalar>
void SquaredDistances(const Eigen::Ref<const Matrix<Scalar>>& a,
                      const Eigen::Ref<const Vector<Scalar>>& a_sq,
                      const Eigen::Ref<const Matrix<Scalar>>& b,
                      const Eigen::Ref<const Vector<Scalar>>& b_sq, Matrix<Scalar>* out) {
  out->noalias() = a.transpose() * b;
  for (Eigen::Index j = 0; j < out->cols(); ++j) {
    CrossToSquaredDistances<Scalar>(out->col(j), a_sq, b_sq[j]);
  }
}

// A bound on |product form - exact| for one distance in d dimensions between
// vectors of squared norms a_sq and b_sq: the dot product, the two norms and
// the two sums each round within (d + 4) eps of ||a||^2 + ||b||^2, twice for
// the factor 2 of the cross term. Two distances closer than twice this bound
// may be in the wrong order.
template <typename Scalar>
Scalar SquaredDistanceRoundOff(Eigen::Index d, Scalar a_sq, Scalar b_sq) {
  return 2 * static_cast<Scalar>(d + 4) * std::numeric_limits<Scalar>::epsilon() * (a_sq + b_sq);
}

// An upper bound on ||a||^2 from a computed squared distance from a to some
// b and b's computed squared norm: ||a||^2 <= 2 ||a - b||^2 + 2 ||b||^2, with
// room for the round-off of both terms. It stands in for ||a||^2 in
// SquaredDistanceRoundOff where a's own norm is not at hand.
template <typename Scalar>
Scalar SquaredNormBound(Eigen::Index d, Scalar sq_dist, Scalar b_sq) {
  return 2 * (sq_dist + b_sq) *
         (1 + 4 * static_cast<Scalar>(d + 2) * std::numeric_limits<Scalar>::epsilon());
}

// The assignment's score of b for a: <a, b> - ||b||^2 / 2, which is
// (||a||^2 - ||a - b||^2) / 2 and so largest for the nearest b. One matrix
// product computes it for every pair when its output starts at -||b||^2 / 2
// (no subtraction after it). A bound on |computed - exact| for one score:
// the d + 1 terms of the product's sum round within (d + 1) eps of
// ||a||^2 / 2 + ||b||^2, and ||b||^2 itself within d eps.
template <typename Scalar>
Scalar ScoreRoundOff(Eigen::Index d, Scalar a_sq, Scalar b_sq) {
  return 2 * static_cast<Scalar>(d + 2) * std::numeric_limits<Scalar>::epsilon() * (a_sq + b_sq);
}

// sum_l (a_l - b_l)^2 in a plain loop: the exact arbitration of near ties.
template <typename Scalar>
Scalar DirectSquaredDistance(const Scalar* a, const Scalar* b, Eigen::Index d) {
  Scalar acc = 0;
  for (Eigen::Index l = 0; l < d; ++l) {
    const Scalar diff = a[l] - b[l];
    acc += diff * diff;
  }
  return acc;
}

// DirectSquaredDistancePairs for exactly kChains pairs.
template <int kChains, typename Scalar>
void DirectSquaredDistancePairsOf(const Scalar* const* a, const Scalar* const* b, Eigen::Index d,
                                  Scalar* out) {
  Scalar acc[kChains] = {};
  for (Eigen::Index l = 0; l < d; ++l) {
    for (int t = 0; t < kChains; ++t) {
      const Scalar diff = a[t][l] - b[t][l];
      acc[t] += diff * diff;
    }
  }
  for (int t = 0; t < kChains; ++t) out[t] = acc[t];
}

// DirectSquaredDistance of a[t] to b[t] for t < count, count at most
// kDirectChains, into out: each distance's additions are
// DirectSquaredDistance's chain in its order, so are its bits, and the
// chains, independent, overlap (near ties among many candidates, or of many
// points, in many dimensions then cost about one chain's latency per
// kDirectChains).
inline constexpr int kDirectChains = 8;
template <typename Scalar>
void DirectSquaredDistancePairs(const Scalar* const* a, const Scalar* const* b, int count,
                                Eigen::Index d, Scalar* out) {
  using Kernel = void (*)(const Scalar* const*, const Scalar* const*, Eigen::Index, Scalar*);
  static constexpr Kernel kKernels[kDirectChains] = {
      &DirectSquaredDistancePairsOf<1, Scalar>, &DirectSquaredDistancePairsOf<2, Scalar>,
      &DirectSquaredDistancePairsOf<3, Scalar>, &DirectSquaredDistancePairsOf<4, Scalar>,
      &DirectSquaredDistancePairsOf<5, Scalar>, &DirectSquaredDistancePairsOf<6, Scalar>,
      &DirectSquaredDistancePairsOf<7, Scalar>, &DirectSquaredDistancePairsOf<8, Scalar>};
  kKernels[count - 1](a, b, d, out);
}

// The same for one point a against b[0 .. count).
template <typename Scalar>
void DirectSquaredDistances(const Scalar* a, const Scalar* const* b, int count, Eigen::Index d,
                            Scalar* out) {
  const Scalar* as[kDirectChains];
  std::fill(as, as + count, a);
  DirectSquaredDistancePairs(as, b, count, d, out);
}

}  // namespace kmt

#endif  // KMT_CORE_DISTANCES_H_
