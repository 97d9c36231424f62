#include "core/point_moments.h"

#include <cstddef>

#include "core/point_passes.h"

namespace kmt {

template <typename Scalar>
void PointMoments::Add(const Scalar* values, int64_t count, int d) {
  if (count == 0) return;
  // Two passes over the part, the mean first: the deviations are then
  // small, where one pass's sum of squares would cancel.
  PointMoments part;
  part.n_ = count;
  part.mean_.assign(d, 0);
  part.m2_.assign(d, 0);
  CoordinateSums(values, count, d, nullptr, part.mean_.data());
  for (double& m : part.mean_) m /= static_cast<double>(count);
  CoordinateSums(values, count, d, part.mean_.data(), part.m2_.data());
  Add(part);
}

template <typename Scalar>
void PointMoments::AddSparse(const int64_t* indptr, const int32_t* indices, const Scalar* values,
                             int64_t count, int d) {
  if (count == 0) return;
  PointMoments part;
  part.n_ = count;
  part.mean_.assign(d, 0);
  part.m2_.assign(d, 0);
  std::vector<int64_t> nonzeros(d, 0);
  for (int64_t p = indptr[0]; p < indptr[count]; ++p) {
    part.mean_[indices[p]] += values[p];
    ++nonzeros[indices[p]];
  }
  for (double& m : part.mean_) m /= static_cast<double>(count);
  for (int64_t p = indptr[0]; p < indptr[count]; ++p) {
    const double deviation = values[p] - part.mean_[indices[p]];
    part.m2_[indices[p]] += deviation * deviation;
  }
  // Each zero deviates from the mean by the mean.
  for (int l = 0; l < d; ++l) {
    part.m2_[l] += static_cast<double>(count - nonzeros[l]) * part.mean_[l] * part.mean_[l];
  }
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
template void PointMoments::AddSparse<float>(const int64_t*, const int32_t*, const float*, int64_t,
                                             int);
template void PointMoments::AddSparse<double>(const int64_t*, const int32_t*, const double*,
                                              int64_t, int);

}  // namespace kmt
