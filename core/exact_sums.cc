#include "core/exact_sums.h"

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
  // A term in units is below 2^widest: its pieces of kExactSumsPieceBits bits.
  const int pieces = std::max(1, (widest + kExactSumsPieceBits - 1) / kExactSumsPieceBits);
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
