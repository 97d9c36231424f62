#include "core/point_passes.h"

#include <algorithm>
#include <cstring>

namespace kmt {

template <typename Scalar>
ScalarBits<Scalar> LargestMagnitudeBits(const Scalar* values, int64_t count) {
  using Bits = ScalarBits<Scalar>;
  constexpr Bits kMagnitude = ~Bits{0} >> 1;
  // An integer reduction without an early exit: it vectorises.
  Bits largest = 0;
  for (int64_t i = 0; i < count; ++i) {
    Bits bits;
    std::memcpy(&bits, values + i, sizeof(bits));
    largest = std::max<Bits>(largest, bits & kMagnitude);
  }
  return largest;
}

namespace {

// CoordinateSums for coordinates [c, c + W), their W running sums held in
// registers rather than stored at every point.
template <int W, typename Scalar>
void SumCoordinates(const Scalar* values, int64_t count, int d, int c, const double* center,
                    double* out) {
  double sum[W], at[W];
  for (int l = 0; l < W; ++l) {
    sum[l] = 0;
    at[l] = center != nullptr ? center[c + l] : 0;
  }
  for (int64_t i = 0; i < count; ++i) {
    const Scalar* x = values + i * d + c;
    if (center == nullptr) {
      for (int l = 0; l < W; ++l) sum[l] += x[l];
    } else {
      for (int l = 0; l < W; ++l) {
        const double deviation = x[l] - at[l];
        sum[l] += deviation * deviation;
      }
    }
  }
  for (int l = 0; l < W; ++l) out[c + l] = sum[l];
}

}  // namespace

template <typename Scalar>
void CoordinateSums(const Scalar* values, int64_t count, int d, const double* center, double* out) {
  // Each running sum is a chain of additions, one a point: the more sums a
  // pass carries, the more of them run at once (with 8, a pass waited on
  // one vector's latency at every point).
  int c = 0;
  for (; c + 32 <= d; c += 32) SumCoordinates<32>(values, count, d, c, center, out);
  for (; c + 8 <= d; c += 8) SumCoordinates<8>(values, count, d, c, center, out);
  for (; c < d; ++c) SumCoordinates<1>(values, count, d, c, center, out);
}

#define KMT_INSTANTIATE(S)                                           \
  template ScalarBits<S> LargestMagnitudeBits<S>(const S*, int64_t); \
  template void CoordinateSums<S>(const S*, int64_t, int, const double*, double*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
