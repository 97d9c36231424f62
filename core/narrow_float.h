// Binary16 (IEEE 754 half) and bfloat16 values, given by their bits, as the
// float32 of the same value: every value of both formats is a float32 value
// (subnormals included), so the widening is exact; and float32 values
// narrowed to them, rounded to nearest, ties to even, so a widened value
// narrows back to its own bits. The one home of the conversions for the
// contract's narrow payloads (proto/raw_payload.h), the point files (io/)
// and the Python extension.
#ifndef KMT_CORE_NARROW_FLOAT_H_
#define KMT_CORE_NARROW_FLOAT_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kmt {

namespace narrow_float_internal {
inline float FloatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
}  // namespace narrow_float_internal

// A NaN stays a NaN, its payload kept; a zero keeps its sign.
inline float WidenFloat16(uint16_t bits) {
  using narrow_float_internal::FloatOfBits;
  // The exponent and mantissa moved to float32's places, the exponent
  // rebiased (15 -> 127). Infinities and NaNs keep the all-ones exponent;
  // subnormals (m * 2^-24) are renormalised exactly by a float32
  // subtraction, since both operands and the result are float32 values.
  uint32_t magnitude = static_cast<uint32_t>(bits & 0x7fff) << 13;
  const uint32_t exponent = magnitude & 0x0f800000u;
  magnitude += (127 - 15) << 23;
  float value;
  if (exponent == 0x0f800000u) {
    value = FloatOfBits(magnitude + ((128 - 16) << 23));
  } else if (exponent == 0) {
    value = FloatOfBits(magnitude + (1 << 23)) - FloatOfBits(113u << 23);
  } else {
    value = FloatOfBits(magnitude);
  }
  uint32_t widened;
  std::memcpy(&widened, &value, 4);
  return FloatOfBits(widened | static_cast<uint32_t>(bits & 0x8000) << 16);
}

// Bfloat16 is float32's upper half.
inline float WidenBFloat16(uint16_t bits) {
  return narrow_float_internal::FloatOfBits(static_cast<uint32_t>(bits) << 16);
}

// Beyond binary16's largest finite value (65504) by half its spacing there
// or more: an infinity; a NaN stays a quiet NaN, the top of its payload kept.
inline uint16_t NarrowFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    return static_cast<uint16_t>(sign | 0x7e00 | ((magnitude >> 13) & 0x3ff));
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // >= 65520
  if (magnitude < 0x38800000u) {
    // Below 2^-14: m * 2^-24, m = |value| * 2^24 (exact in float32) rounded
    // to an integer, ties to even; 1024 is the smallest normal's encoding.
    const float scaled = narrow_float_internal::FloatOfBits(magnitude) * 0x1p24f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Rebiased (127 -> 15), the 13 dropped bits rounded to nearest, ties to
  // the even result; a carry moves into the exponent, as it should.
  const uint32_t rebiased = magnitude - ((127u - 15u) << 23);
  const uint32_t rounded = rebiased + 0xfff + ((rebiased >> 13) & 1);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

// Float32's upper half, rounded to nearest, ties to even; a NaN stays a
// quiet NaN.
inline uint16_t NarrowBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

}  // namespace kmt

#endif  // KMT_CORE_NARROW_FLOAT_H_
