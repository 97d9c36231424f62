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
  std::unique_ptr<ExactClusterSums> sums(new ExactClusterSums(points, weights, k, std::move(low)));
  // Terms of at most kNarrowBits bits from the unit (unweighted float data
  // whose exponents spread over at most 25 binades: data far from the
  // origin, or on a grid) add up in int64s, block_ terms at a time, before
  // each block goes into the 128-bit sums: block_ terms of fewer than
  // 2^widest units sum to less than 2^60.
  constexpr int kNarrowBits = 49;
  const bool units_in_range = std::all_of(sums->unit_.begin(), sums->unit_.end(),
                                          [](int unit) { return unit > -1000 && unit < 1000; });
  if (widest <= kNarrowBits && units_in_range) {
    sums->block_ =
        std::min<Eigen::Index>(Eigen::Index{1} << 12, Eigen::Index{1} << (61 - widest - 1));
    for (const int unit : sums->unit_) sums->scale_.push_back(std::ldexp(1.0, -unit));
  }
  return sums;
}

template <typename Scalar>
ExactClusterSums<Scalar>::ExactClusterSums(const Matrix<Scalar>& points,
                                           const Vector<Scalar>* weights, int k,
                                           std::vector<int> unit)
    : points_(points),
      weights_(weights),
      rows_(points.rows() + (weights != nullptr ? 1 : 0)),
      unit_(std::move(unit)),
      sums_(static_cast<size_t>(rows_) * k, 0),
      counts_(k, 0) {}

template <typename Scalar>
void ExactClusterSums<Scalar>::Add(Eigen::Index i, int j, int sign, Fixed* sums,
                                   int64_t* counts) const {
  Fixed* row = sums + static_cast<size_t>(j) * rows_;
  // Without branches (the signs of data are a coin toss to a predictor):
  // the magnitude shifted into place, then negated where the term's sign and
  // the direction differ (q ^ -1) + 1, in wrapping arithmetic. A zero term
  // adds 0 at any shift; the shift of a nonzero one is at least 0.
  const uint64_t away = sign < 0 ? ~uint64_t{0} : 0;
  const auto put = [&](Eigen::Index l, Term t) {
    const uint64_t m = static_cast<uint64_t>(t.m);
    const uint64_t negative = static_cast<uint64_t>(t.m >> 63);  // all ones or 0
    const uint64_t magnitude = (m ^ negative) - negative;
    const Fixed q = static_cast<Fixed>(magnitude) << std::max(0, t.e - unit_[l]);
    const uint64_t flip = negative ^ away;
    const Fixed mask = (static_cast<Fixed>(flip) << 64) | flip;
    row[l] += (q ^ mask) + (flip & 1);
  };
  const Scalar* x = points_.col(i).data();
  const Eigen::Index d = points_.rows();
  if (weights_ == nullptr) {
    for (Eigen::Index l = 0; l < d; ++l) put(l, Decompose(x[l]));
  } else {
    // TermOf's terms, the weight decomposed once.
    const Term w = Decompose((*weights_)[i]);
    for (Eigen::Index l = 0; l < d; ++l) put(l, Product(w, Decompose(x[l])));
    put(d, w);
  }
  counts[j] += sign;
}

template <typename Scalar>
void ExactClusterSums<Scalar>::AddNarrow(Eigen::Index i, int j, int sign, int64_t* sums) const {
  // Each term times 2^-unit, exactly: an integer of at most kNarrowBits
  // bits in a double (a float weight times a float coordinate is exact in
  // double, and so is scaling by a power of two), then converted exactly.
  int64_t* row = sums + static_cast<size_t>(j) * rows_;
  const Scalar* x = points_.col(i).data();
  const double* scale = scale_.data();
  const Eigen::Index d = points_.rows();
  const double w = weights_ != nullptr ? static_cast<double>((*weights_)[i]) : 1.0;
  if (sign > 0) {
    for (Eigen::Index l = 0; l < d; ++l) {
      row[l] += static_cast<int64_t>(w * static_cast<double>(x[l]) * scale[l]);
    }
    if (weights_ != nullptr) row[d] += static_cast<int64_t>(w * scale[d]);
  } else {
    for (Eigen::Index l = 0; l < d; ++l) {
      row[l] -= static_cast<int64_t>(w * static_cast<double>(x[l]) * scale[l]);
    }
    if (weights_ != nullptr) row[d] -= static_cast<int64_t>(w * scale[d]);
  }
}

template <typename Scalar>
template <typename Visit>
void ExactClusterSums<Scalar>::AddAll(Eigen::Index items, const Visit& visit) {
  Parallel(items, [&](Eigen::Index first, Eigen::Index last, Fixed* sums, int64_t* counts) {
    if (scale_.empty()) {
      for (Eigen::Index m = first; m < last; ++m) {
        visit(m, [&](Eigen::Index i, int j, int sign) { Add(i, j, sign, sums, counts); });
      }
      return;
    }
    // An item adds at most two terms to a sum: block_ / 2 items a block.
    std::vector<int64_t> narrow(sums_.size(), 0);
    const Eigen::Index block = std::max<Eigen::Index>(1, block_ / 2);
    for (Eigen::Index start = first; start < last; start += block) {
      const Eigen::Index end = std::min(last, start + block);
      for (Eigen::Index m = start; m < end; ++m) {
        visit(m, [&](Eigen::Index i, int j, int sign) {
          AddNarrow(i, j, sign, narrow.data());
          counts[j] += sign;
        });
      }
      for (size_t s = 0; s < narrow.size(); ++s) {
        sums[s] += static_cast<Fixed>(static_cast<__int128>(narrow[s]));
        narrow[s] = 0;
      }
    }
  });
}

template <typename Scalar>
template <typename Body>
void ExactClusterSums<Scalar>::Parallel(Eigen::Index items, const Body& body) {
  constexpr Eigen::Index kPart = 1 << 13;
  const Eigen::Index parts = (items + kPart - 1) / kPart;
  if (parts <= 1 || omp_get_max_threads() == 1) {
    body(0, items, sums_.data(), counts_.data());
    return;
  }
#pragma omp parallel
  {
    std::vector<Fixed> sums(sums_.size(), 0);
    std::vector<int64_t> counts(counts_.size(), 0);
#pragma omp for schedule(static)
    for (Eigen::Index p = 0; p < parts; ++p) {
      body(p * kPart, std::min(items, (p + 1) * kPart), sums.data(), counts.data());
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
