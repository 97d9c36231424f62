// Cluster sums held exactly, so that they can follow the points that change
// cluster. Floating-point addition is not associative: the sums of a
// cluster's points added in one order and the same sums updated by removing
// and adding the points that moved round differently. Here every term (a
// coordinate times the point's weight) is an integer multiple of a power of
// two, 2^e times an integer mantissa m, exactly: a float coordinate's 24-bit
// mantissa, a float weight times a float coordinate's 48-bit product, a
// double coordinate's 53 bits. Per coordinate the terms are held in one
// fixed point whose unit is the smallest such power over the points, in a
// 128-bit integer: additions are exact and associative, so removing a point
// from one cluster and adding it to another gives the same integers as
// summing every cluster again, in any order and on any number of threads.
// The sums are read out rounded to double, once, from those integers.
//
// It holds where each coordinate's terms span at most 126 bits with the
// points' count: the largest term's top bit to the smallest term's lowest,
// plus log2(n). Real data spans far less (Gaussian float data near the
// origin, values from 10^-7 to 10 and a million points: about 70 bits,
// the count included). Where it does not (values 10^-30 and 10^30 in one
// coordinate, weighted double points, whose products are not doubles),
// Make returns null and the caller keeps double sums recomputed in a fixed
// order.
//
// The additions themselves are double additions of integers: a term in
// units, an integer below 2^span, is cut into pieces of 39 bits (pieces():
// one where the coordinates' terms span at most that many bits, as data far
// from the origin's do, two for Gaussian data near it), each added to a
// double that stays an exact integer over a part of 2^13 points, then
// carried into the 128-bit sums. The additions vectorize, and take a
// part's points a cluster at a time.
#ifndef KMT_CORE_EXACT_SUMS_H_
#define KMT_CORE_EXACT_SUMS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/cluster_sums.h"
#include "core/types.h"

namespace kmt {

// The bits of a piece of a term (above).
inline constexpr int kExactSumsPieceBits = 39;

template <typename Scalar>
class ExactClusterSums {
 public:
  // The fixed point of these points' terms, or null where they do not fit
  // (see above). points: d x n, weights: n or null (1 each); both must
  // outlive the sums, which start with every point in no cluster.
  static std::unique_ptr<ExactClusterSums> Make(const Matrix<Scalar>& points,
                                                const Vector<Scalar>* weights, int k);

  // A point that changed cluster.
  struct Move {
    Eigen::Index point;
    int from, to;
  };

  // The sums of every point under `labels`, from scratch.
  void Recompute(const Labels& labels);
  // Each point out of its `from` cluster and into its `to` one.
  void Apply(const std::vector<Move>& moves);
  // (Both kernels of the sums group, core/simd_kernels.h.)
  // Adds the counts, weights and sums, each rounded to double, to `into`
  // (d x k, as AssignNearest adds its own).
  void AddTo(ClusterSums* into) const;

  // How many pieces each term is cut into (1 to 4); the sums are the same
  // whatever the count.
  int pieces() const { return pieces_; }

 private:
  using Fixed = unsigned __int128;  // two's complement, wrapping: exact while the sum fits

  ExactClusterSums(const Matrix<Scalar>& points, const Vector<Scalar>* weights, int k,
                   std::vector<int> unit, int pieces);
  // Adds the pieces of point i's terms (sign +1) or takes them out (-1),
  // in `pieces` (kPieces rows of rows_ doubles, piece p's unit 2^(39 p)
  // units).
  template <int kPieces>
  void AddPieces(Eigen::Index i, double sign, double* pieces) const;
  // Calls visit(m, add) for m in [0, items), in parallel parts, where
  // add(i, j, sign) adds point i to cluster j or takes it out; AddAllIn
  // with pieces_ pieces a term.
  template <typename Visit>
  void AddAll(Eigen::Index items, const Visit& visit);
  template <int kPieces, typename Visit>
  void AddAllIn(Eigen::Index items, const Visit& visit);

  const Matrix<Scalar>& points_;
  const Vector<Scalar>* weights_;
  Eigen::Index rows_;      // d + 1 values a cluster: the coordinates, then the weight
  std::vector<int> unit_;  // per row, the fixed point's unit: 2^unit_
  // Per row, 2^-unit_ as two factors, each a normal double (a term times
  // both is its value in units, exactly).
  std::vector<double> scale_, scale_rest_;
  int pieces_ = 1;
  std::vector<Fixed> sums_;
  std::vector<int64_t> counts_;
};

}  // namespace kmt

#endif  // KMT_CORE_EXACT_SUMS_H_
