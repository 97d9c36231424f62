#include "core/exact_sums.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace kmt {
namespace {

// A finite value as m * 2^e exactly, m a signed integer of the format's
// mantissa bits (0 for zero).
struct Term {
  int64_t m;
  int e;
};

Term Decompose(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int exponent = static_cast<int>((bits >> 23) & 0xff);
  int64_t m = bits & 0x7fffff;
  int e = -149;  // subnormal
  if (exponent != 0) {
    m |= int64_t{1} << 23;
    e = exponent - 150;
  }
  return {(bits >> 31) != 0 ? -m : m, e};
}

Term Decompose(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int exponent = static_cast<int>((bits >> 52) & 0x7ff);
  int64_t m = static_cast<int64_t>(bits & ((uint64_t{1} << 52) - 1));
  int e = -1074;  // subnormal
  if (exponent != 0) {
    m |= int64_t{1} << 52;
    e = exponent - 1075;
  }
  return {(bits >> 63) != 0 ? -m : m, e};
}

// A weight times a coordinate, exactly: for float, the product of two
// 24-bit mantissas, exact in an int64 (Make refuses weighted double points).
Term Product(Term w, Term x) { return {w.m * x.m, w.e + x.e}; }

// Point i's term in row l: coordinate l times the weight, or (l = d) the
// weight.
template <typename Scalar>
Term TermOf(const Matrix<Scalar>& points, const Vector<Scalar>* weights, Eigen::Index i,
            Eigen::Index l) {
  if (weights == nullptr) return Decompose(points(l, i));
  const Term w = Decompose((*weights)[i]);
  if (l == points.rows()) return w;
  return Product(w, Decompose(points(l, i)));
}

int BitLength(int64_t m) {
  const uint64_t magnitude = m < 0 ? uint64_t{0} - static_cast<uint64_t>(m) : m;
  return magnitude == 0 ? 0 : 64 - __builtin_clzll(magnitude);
}

// The points of a part: 2^13 points or moves, each adding at most two terms
// to a cluster's sum (a move takes one out and puts one in, the same sum
// only if it goes nowhere). Their pieces, each below 2^kPieceBits in
// magnitude, then add up to at most 2^53: every double sum of them is an
// exact integer.
constexpr Eigen::Index kPart = 1 << 13;
constexpr int kPieceBits = 39;
constexpr int kMostPieces = 4;  // 126 bits
// Piece p's unit, 2^(p kPieceBits), and its inverse.
constexpr double kPieceUnit[kMostPieces] = {1, 0x1p39, 0x1p78, 0x1p117};
constexpr double kPieceInverse[kMostPieces] = {1, 0x1p-39, 0x1p-78, 0x1p-117};
// 1.5 * 2^52: (y + kRound) - kRound is y rounded to the nearest integer
// where |y| < 2^51 (the sum falls where doubles are the integers).
constexpr double kRound = 0x1.8p52;

// Adds the pieces of q (an integer, |q| < 2^(kPieces kPieceBits)) to
// out[p * stride], p = 0 to kPieces - 1: from the top, each piece q in
// units of its own rounded to an integer, and q less it, both exact. The
// top piece is at most 2^kPieceBits in magnitude, the others 2^(kPieceBits
// - 1).
template <int kPieces>
inline void AddCut(double q, double* out, Eigen::Index stride) {
  for (int p = kPieces - 1; p > 0; --p) {
    const double top = (q * kPieceInverse[p] + kRound) - kRound;
    q -= top * kPieceUnit[p];
    out[p * stride] += top;
  }
  out[0] += q;
}

// Per row l of the unweighted points, the lowest bit of a nonzero term and
// the top bit of the largest (Make's low and high): both grow with the
// term's magnitude, so the row's smallest nonzero magnitude gives the one
// and its largest the other.
template <typename Scalar>
void UnweightedSpan(const Matrix<Scalar>& points, std::vector<int>* low, std::vector<int>* high) {
  const Eigen::Index d = points.rows(), n = points.cols();
  constexpr Scalar kInfinity = std::numeric_limits<Scalar>::infinity();
  Vector<Scalar> least = Vector<Scalar>::Constant(d, kInfinity), most = Vector<Scalar>::Zero(d);
#pragma omp parallel if (n * d > (1 << 16))
  {
    Vector<Scalar> own_least = Vector<Scalar>::Constant(d, kInfinity);
    Vector<Scalar> own_most = Vector<Scalar>::Zero(d);
    Scalar* lo = own_least.data();
    Scalar* hi = own_most.data();
#pragma omp for schedule(static)
    for (Eigen::Index i = 0; i < n; ++i) {
      const Scalar* x = points.col(i).data();
      for (Eigen::Index l = 0; l < d; ++l) {
        const Scalar a = std::abs(x[l]);
        const Scalar nonzero = a == 0 ? kInfinity : a;
        lo[l] = nonzero < lo[l] ? nonzero : lo[l];
        hi[l] = a > hi[l] ? a : hi[l];
      }
    }
#pragma omp critical
    {
      least = least.cwiseMin(own_least);
      most = most.cwiseMax(own_most);
    }
  }
  for (Eigen::Index l = 0; l < d; ++l) {
    if (most[l] == 0) continue;  // every term 0
    const Term smallest = Decompose(least[l]), largest = Decompose(most[l]);
    (*low)[l] = smallest.e;
    (*high)[l] = largest.e + BitLength(largest.m);
  }
}

}  // namespace

template <typename Scalar>
std::unique_ptr<ExactClusterSums<Scalar>> ExactClusterSums<Scalar>::Make(
    const Matrix<Scalar>& points, const Vector<Scalar>* weights, int k) {
  // A double weight times a double coordinate needs 106 bits.
  if (std::is_same_v<Scalar, double> && weights != nullptr) return nullptr;
  const Eigen::Index d = points.rows(), n = points.cols();
  const Eigen::Index rows = d + (weights != nullptr ? 1 : 0);
  // Per row, the smallest exponent and the largest top bit of a term.
  std::vector<int> low(rows, INT_MAX), high(rows, INT_MIN);
  if (weights == nullptr) {
    UnweightedSpan(points, &low, &high);
  } else {
#pragma omp parallel if (n * d > (1 << 16))
    {
      std::vector<int> own_low(rows, INT_MAX), own_high(rows, INT_MIN);
#pragma omp for schedule(static)
      for (Eigen::Index i = 0; i < n; ++i) {
        for (Eigen::Index l = 0; l < rows; ++l) {
          const Term t = TermOf(points, weights, i, l);
          if (t.m == 0) continue;
          own_low[l] = std::min(own_low[l], t.e);
          own_high[l] = std::max(own_high[l], t.e + BitLength(t.m));
        }
      }
#pragma omp critical
      for (Eigen::Index l = 0; l < rows; ++l) {
        low[l] = std::min(low[l], own_low[l]);
        high[l] = std::max(high[l], own_high[l]);
      }
    }
  }
  // n terms below 2^bits each sum to below 2^(bits + log2 n); the 128th
  // bit is the sign.
  const int count_bits = static_cast<int>(std::ceil(std::log2(static_cast<double>(n) + 1)));
  int widest = 0;
  for (Eigen::Index l = 0; l < rows; ++l) {
    if (low[l] == INT_MAX) {
      low[l] = 0;  // every term 0
    } else if (high[l] - low[l] + count_bits > 126) {
      return nullptr;
    } else {
      widest = std::max(widest, high[l] - low[l]);
    }
  }
  // A term in units is below 2^widest: its pieces of kPieceBits bits.
  const int pieces = std::max(1, (widest + kPieceBits - 1) / kPieceBits);
  return std::unique_ptr<ExactClusterSums>(
      new ExactClusterSums(points, weights, k, std::move(low), pieces));
}

template <typename Scalar>
ExactClusterSums<Scalar>::ExactClusterSums(const Matrix<Scalar>& points,
                                           const Vector<Scalar>* weights, int k,
                                           std::vector<int> unit, int pieces)
    : points_(points),
      weights_(weights),
      rows_(points.rows() + (weights != nullptr ? 1 : 0)),
      unit_(std::move(unit)),
      pieces_(pieces),
      sums_(static_cast<size_t>(rows_) * k, 0),
      counts_(k, 0) {
  // 2^-unit in two factors of at most 2^±540 each: every unit a term can
  // have (down to a double's 2^-1074) is then two normal doubles away, and
  // a term times the first is still a normal double, so both products are
  // exact.
  for (const int unit : unit_) {
    const int first = -unit / 2;
    scale_.push_back(std::ldexp(1.0, first));
    scale_rest_.push_back(std::ldexp(1.0, -unit - first));
  }
}

template <typename Scalar>
template <int kPieces>
void ExactClusterSums<Scalar>::AddPieces(Eigen::Index i, int slot, double sign,
                                         double* pieces) const {
  double* row = pieces + static_cast<size_t>(slot) * kPieces * rows_;
  const Scalar* x = points_.col(i).data();
  const double* scale = scale_.data();
  const double* rest = scale_rest_.data();
  const Eigen::Index d = points_.rows();
  // The signed weight times a coordinate is exact in double (a float
  // weight's and a float coordinate's 24 bits each, or a double coordinate
  // alone), and so is its scaling by powers of two: the term in units.
  const double w = weights_ != nullptr ? sign * static_cast<double>((*weights_)[i]) : sign;
  for (Eigen::Index l = 0; l < d; ++l) {
    AddCut<kPieces>(w * static_cast<double>(x[l]) * scale[l] * rest[l], row + l, rows_);
  }
  if (weights_ != nullptr) AddCut<kPieces>(w * scale[d] * rest[d], row + d, rows_);
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
  // A part's pieces go into `sums` and its counts into `counts`: each
  // cluster it touches takes a slot of pieces (at most two a point), whose
  // exact integers are carried into the 128-bit sums at the part's end.
  const auto run = [&](Eigen::Index first, Eigen::Index last, Fixed* sums, int64_t* counts) {
    const Eigen::Index slots = std::min<Eigen::Index>(k, 2 * kPart);
    std::vector<double> pieces(static_cast<size_t>(slots) * kPieces * rows_, 0.0);
    std::vector<int> slot(k, -1), used;
    for (Eigen::Index start = first; start < last; start += kPart) {
      const Eigen::Index end = std::min(last, start + kPart);
      for (Eigen::Index m = start; m < end; ++m) {
        visit(m, [&](Eigen::Index i, int j, int sign) {
          if (slot[j] < 0) {
            slot[j] = static_cast<int>(used.size());
            used.push_back(j);
          }
          AddPieces<kPieces>(i, slot[j], sign, pieces.data());
          counts[j] += sign;
        });
      }
      for (size_t u = 0; u < used.size(); ++u) {
        double* from = pieces.data() + u * kPieces * rows_;
        Fixed* into = sums + static_cast<size_t>(used[u]) * rows_;
        for (int p = 0; p < kPieces; ++p) {
          for (Eigen::Index l = 0; l < rows_; ++l) {
            // An integer of at most 2^53 in magnitude: exact as an int64,
            // and in two's complement as a Fixed.
            const auto value = static_cast<__int128>(static_cast<int64_t>(from[p * rows_ + l]));
            into[l] += static_cast<Fixed>(value) << (p * kPieceBits);
            from[p * rows_ + l] = 0;
          }
        }
        slot[used[u]] = -1;
      }
      used.clear();
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

template <typename Scalar>
void ExactClusterSums<Scalar>::AddTo(ClusterSums* into) const {
  // The integer as a signed value, rounded to double once (the conversion
  // of a 128-bit integer rounds to nearest), then scaled by the unit, a
  // power of two.
  const auto value = [&](size_t at, Eigen::Index l) {
    const Fixed q = sums_[at];
    const bool negative = (q >> 127) != 0;
    const double magnitude = static_cast<double>(negative ? Fixed{0} - q : q);
    return std::ldexp(negative ? -magnitude : magnitude, unit_[l]);
  };
  const Eigen::Index d = points_.rows();
  for (Eigen::Index j = 0; j < static_cast<Eigen::Index>(counts_.size()); ++j) {
    const size_t row = static_cast<size_t>(j) * rows_;
    for (Eigen::Index l = 0; l < d; ++l) into->sums(l, j) += value(row + l, l);
    into->counts[j] += counts_[j];
    into->weights[j] += weights_ != nullptr ? value(row + d, d) : static_cast<double>(counts_[j]);
  }
}

template class ExactClusterSums<float>;
template class ExactClusterSums<double>;

}  // namespace kmt
