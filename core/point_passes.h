// Passes over a batch's values that every request takes before its layers:
// the largest magnitude (validation.h's check of every value) and the sums
// of each coordinate over the points (point_moments.h's mean and variance).
// Kernels (simd_kernels.h): every level gives the same bits.
#ifndef KMT_CORE_POINT_PASSES_H_
#define KMT_CORE_POINT_PASSES_H_

#include <cstdint>
#include <type_traits>

namespace kmt {

// A Scalar's bits as an unsigned integer of its size.
template <typename Scalar>
using ScalarBits = std::conditional_t<sizeof(Scalar) == 4, uint32_t, uint64_t>;

// The largest of the `count` values' bits without their sign: the bits of
// the largest magnitude, where magnitudes order as these integers do, and
// above every finite value's if any value is NaN or an infinity. 0 for no
// values.
template <typename Scalar>
ScalarBits<Scalar> LargestMagnitudeBits(const Scalar* values, int64_t count);

// For `count` points of d values each, stored point after point (a d x n
// column-major matrix's data, or n x d row-major): out[l] = the sum over the
// points, in point order and in double, of coordinate l (`center` null) or
// of its squared deviation from center[l].
template <typename Scalar>
void CoordinateSums(const Scalar* values, int64_t count, int d, const double* center, double* out);

}  // namespace kmt

#endif  // KMT_CORE_POINT_PASSES_H_
