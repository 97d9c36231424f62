#include "core/point_moments.h"

#include <cstddef>

namespace kmt {

namespace {

// Coordinates [c, c + W) of `count` points of d values each: their sums
// over the points, in point order (`mean` null), or the sums of their
// squared deviations from `mean`, each coordinate's W running sums held in
// registers rather than stored at every point.
template <int W, typename Scalar>
void SumColumns(const Scalar* values, int64_t count, int d, int c, const double* mean,
                double* out) {
  double sum[W], center[W];
  for (int l = 0; l < W; ++l) {
    sum[l] = 0;
    center[l] = mean != nullptr ? mean[c + l] : 0;
  }
  for (int64_t i = 0; i < count; ++i) {
    const Scalar* x = values + i * d + c;
    if (mean == nullptr) {
      for (int l = 0; l < W; ++l) sum[l] += x[l];
    } else {
      for (int l = 0; l < W; ++l) {
        const double deviation = x[l] - center[l];
        sum[l] += deviation * deviation;
      }
    }
  }
  for (int l = 0; l < W; ++l) out[c + l] = sum[l];
}

// SumColumns over all d coordinates, eight at a time.
template <typename Scalar>
void SumAllColumns(const Scalar* values, int64_t count, int d, const double* mean, double* out) {
  constexpr int kChunk = 8;
  int c = 0;
  for (; c + kChunk <= d; c += kChunk) SumColumns<kChunk>(values, count, d, c, mean, out);
  for (; c < d; ++c) SumColumns<1>(values, count, d, c, mean, out);
}

}  // namespace

template <typename Scalar>
void PointMoments::Add(const Scalar* values, int64_t count, int d) {
  if (count == 0) return;
  // Two passes over the part, the mean first: the deviations are then
  // small, where one pass's sum of squares would cancel.
  PointMoments part;
  part.n_ = count;
  part.mean_.assign(d, 0);
  part.m2_.assign(d, 0);
  SumAllColumns(values, count, d, nullptr, part.mean_.data());
  for (double& m : part.mean_) m /= static_cast<double>(count);
  SumAllColumns(values, count, d, part.mean_.data(), part.m2_.data());
  Add(part);
}

void PointMoments::Add(const PointMoments& other) {
  if (other.n_ == 0) return;
  if (n_ == 0) {
    *this = other;
    return;
  }
  const double n = static_cast<double>(n_ + other.n_);
  const double a = static_cast<double>(n_), b = static_cast<double>(other.n_);
  for (std::size_t l = 0; l < mean_.size(); ++l) {
    const double delta = other.mean_[l] - mean_[l];
    mean_[l] += delta * b / n;
    m2_[l] += other.m2_[l] + delta * delta * a * b / n;
  }
  n_ += other.n_;
}

double PointMoments::MeanVariance() const {
  if (n_ == 0) return 0;
  double m2 = 0;
  for (double v : m2_) m2 += v;
  return m2 / (static_cast<double>(n_) * static_cast<double>(m2_.size()));
}

template void PointMoments::Add<float>(const float*, int64_t, int);
template void PointMoments::Add<double>(const double*, int64_t, int);

}  // namespace kmt
