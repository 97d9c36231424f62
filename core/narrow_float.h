// Binary16 (IEEE 754 half) and bfloat16 values, given by their bits, as the
// float32 of the same value: every value of both formats is a float32 value
// (subnormals included), so the widening is exact. The one home of the
// conversion for the contract's narrow payloads (proto/raw_payload.h), the
// point files (io/) and the Python extension.
#ifndef KMT_CORE_NARROW_FLOAT_H_
#define KMT_CORE_NARROW_FLOAT_H_

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

}  // namespace kmt

#endif  // KMT_CORE_NARROW_FLOAT_H_
