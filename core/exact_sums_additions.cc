// ExactClusterSums's additions (core/exact_sums.h): a kernel of the sums
// group, compiled per SIMD level (core/simd_kernels.h), where its double
// additions take the level's vectors. Every level adds the same integers.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/exact_sums.h"
#include "core/prefetch.h"

namespace kmt {
namespace {

// The points of a part: 2^13 points or moves, each adding at most two terms
// to a cluster's sum (a move takes one out and puts one in, the same sum
// only if it goes nowhere). Their pieces, each at most 2^39 in magnitude,
// then add up to at most 2^53: every double sum of them is an exact
// integer.
constexpr Eigen::Index kPart = 1 << 13;
static_assert(2 * kPart * (int64_t{1} << kExactSumsPieceBits) <= (int64_t{1} << 53));
constexpr int kMostPieces = 4;  // 126 bits
// Piece p's unit, 2^(39 p), and its inverse.
constexpr double kPieceUnit[kMostPieces] = {1, 0x1p39, 0x1p78, 0x1p117};
constexpr double kPieceInverse[kMostPieces] = {1, 0x1p-39, 0x1p-78, 0x1p-117};
static_assert(kPieceUnit[1] == static_cast<double>(int64_t{1} << kExactSumsPieceBits));
// 1.5 * 2^52: (y + kRound) - kRound is y rounded to the nearest integer
// where |y| < 2^51 (the sum falls where doubles are the integers).
constexpr double kRound = 0x1.8p52;

// Adds the pieces of q (an integer, |q| < 2^(39 kPieces)) to out[p *
// stride], p = 0 to kPieces - 1: from the top, each piece q in units of its
// own rounded to an integer, and q less it, both exact. The top piece is at
// most 2^39 in magnitude, the others 2^38.
template <int kPieces>
inline void AddCut(double q, double* out, Eigen::Index stride) {
  for (int p = kPieces - 1; p > 0; --p) {
    const double top = (q * kPieceInverse[p] + kRound) - kRound;
    q -= top * kPieceUnit[p];
    out[p * stride] += top;
  }
  out[0] += q;
}

}  // namespace

template <typename Scalar>
template <int kPieces>
void ExactClusterSums<Scalar>::AddPieces(Eigen::Index i, double sign, double* pieces) const {
  const Scalar* x = points_.col(i).data();
  const double* scale = scale_.data();
  const double* rest = scale_rest_.data();
  const Eigen::Index d = points_.rows();
  // The signed weight times a coordinate is exact in double (a float
  // weight's and a float coordinate's 24 bits each, or a double coordinate
  // alone), and so is its scaling by powers of two: the term in units.
  const double w = weights_ != nullptr ? sign * static_cast<double>((*weights_)[i]) : sign;
  for (Eigen::Index l = 0; l < d; ++l) {
    AddCut<kPieces>(w * static_cast<double>(x[l]) * scale[l] * rest[l], pieces + l, rows_);
  }
  if (weights_ != nullptr) AddCut<kPieces>(w * scale[d] * rest[d], pieces + d, rows_);
}

template <typename Scalar>
template <typename Visit>
void ExactClusterSums<Scalar>::AddAll(Eigen::Index items, const Visit& visit) {
  switch (pieces_) {
    case 1:
      return AddAllIn<1>(items, visit);
    case 2:
      return AddAllIn<2>(items, visit);
    case 3:
      return AddAllIn<3>(items, visit);
    default:
      return AddAllIn<kMostPieces>(items, visit);
  }
}

template <typename Scalar>
template <int kPieces, typename Visit>
void ExactClusterSums<Scalar>::AddAllIn(Eigen::Index items, const Visit& visit) {
  const int k = static_cast<int>(counts_.size());
  struct Term {
    Eigen::Index point;
    int cluster, sign;
  };
  // A part's points and moves into `sums` and `counts`, a cluster at a
  // time: its terms (at most two a point or move) added as pieces to one
  // row of doubles, which stays in the first-level cache, and carried into
  // its 128-bit sums at the end of its run.
  const auto run = [&](Eigen::Index first, Eigen::Index last, Fixed* sums, int64_t* counts) {
    std::vector<double> pieces(static_cast<size_t>(kPieces) * rows_, 0.0);
    std::vector<Term> terms, by_cluster;
    std::vector<int64_t> start(k + 1);
    for (Eigen::Index from = first; from < last; from += kPart) {
      terms.clear();
      for (Eigen::Index m = from; m < std::min(last, from + kPart); ++m) {
        visit(m, [&](Eigen::Index i, int j, int sign) {
          terms.push_back({i, j, sign});
          counts[j] += sign;
        });
      }
      // The terms by cluster (a counting sort, stable).
      std::fill(start.begin(), start.end(), 0);
      for (const Term& t : terms) ++start[t.cluster + 1];
      for (int j = 0; j < k; ++j) start[j + 1] += start[j];
      by_cluster.resize(terms.size());
      for (const Term& t : terms) by_cluster[start[t.cluster]++] = t;
      for (size_t at = 0; at < by_cluster.size();) {
        const int j = by_cluster[at].cluster;
        for (; at < by_cluster.size() && by_cluster[at].cluster == j; ++at) {
          if (at + kReadAhead < by_cluster.size()) {
            PrefetchValues(points_.col(by_cluster[at + kReadAhead].point).data(), points_.rows());
          }
          AddPieces<kPieces>(by_cluster[at].point, by_cluster[at].sign, pieces.data());
        }
        Fixed* into = sums + static_cast<size_t>(j) * rows_;
        for (int p = 0; p < kPieces; ++p) {
          for (Eigen::Index l = 0; l < rows_; ++l) {
            // An integer of at most 2^53 in magnitude: exact as an int64,
            // and in two's complement as a Fixed.
            double& piece = pieces[p * rows_ + l];
            into[l] += static_cast<Fixed>(static_cast<__int128>(static_cast<int64_t>(piece)))
                       << (p * kExactSumsPieceBits);
            piece = 0;
          }
        }
      }
    }
  };
  const Eigen::Index parts = (items + kPart - 1) / kPart;
  if (parts <= 1 || omp_get_max_threads() == 1) {
    run(0, items, sums_.data(), counts_.data());
    return;
  }
#pragma omp parallel
  {
    std::vector<Fixed> sums(sums_.size(), 0);
    std::vector<int64_t> counts(counts_.size(), 0);
#pragma omp for schedule(static)
    for (Eigen::Index p = 0; p < parts; ++p) {
      run(p * kPart, std::min(items, (p + 1) * kPart), sums.data(), counts.data());
    }
    // Integer additions: the order the threads come in changes nothing.
#pragma omp critical
    {
      for (size_t s = 0; s < sums.size(); ++s) sums_[s] += sums[s];
      for (size_t j = 0; j < counts.size(); ++j) counts_[j] += counts[j];
    }
  }
}

template <typename Scalar>
void ExactClusterSums<Scalar>::Recompute(const Labels& labels) {
  std::fill(sums_.begin(), sums_.end(), 0);
  std::fill(counts_.begin(), counts_.end(), 0);
  AddAll(points_.cols(), [&](Eigen::Index i, const auto& add) { add(i, labels[i], 1); });
}

template <typename Scalar>
void ExactClusterSums<Scalar>::Apply(const std::vector<Move>& moves) {
  AddAll(static_cast<Eigen::Index>(moves.size()), [&](Eigen::Index m, const auto& add) {
    add(moves[m].point, moves[m].from, -1);
    add(moves[m].point, moves[m].to, 1);
  });
}

#define KMT_INSTANTIATE(S)                                     \
  template void ExactClusterSums<S>::Recompute(const Labels&); \
  template void ExactClusterSums<S>::Apply(const std::vector<ExactClusterSums<S>::Move>&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
