// Raw binary16 / bfloat16 / float32 / float64 / int32 payloads: checks,
// decoding (the narrow types widened exactly) and encoding.
#include "proto/raw_payload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace kmt {
namespace {

// Little-endian float32 bytes of `values`, written byte by byte so the test
// does not rest on the host's order.
std::string LittleEndian(const std::vector<float>& values) {
  std::string bytes;
  for (float v : values) {
    uint32_t word;
    std::memcpy(&word, &v, 4);
    for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((word >> (8 * b)) & 0xff));
  }
  return bytes;
}

TEST(RawPayload, AMatrixIsItsRowMajorValuesAsColumns) {
  const absl::StatusOr<Matrix<float>> got =
      RawMatrix({"points", "n", 3, "d", 2}, 0, LittleEndian({1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(got.ok()) << got.status();
  Matrix<float> want(2, 3);
  want << 1, 3, 5, 2, 4, 6;
  EXPECT_EQ(*got, want);
}

TEST(RawPayload, PerPointValuesBecomeAVectorAndAreChecked) {
  const RawShape weights{"weights", "n", 3, "", 1};
  const absl::StatusOr<std::vector<float>> got = RawVector(weights, 0, LittleEndian({1, 0.5f, 2}));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<float>{1, 0.5f, 2}));
  EXPECT_EQ(RawVector(weights, 0, LittleEndian({1, 2})).status().message(),
            "weights_f32 has 8 bytes, expected n*4 = 3*4");
  EXPECT_EQ(RawVector(weights, 3, LittleEndian({1, 0.5f, 2})).status().message(),
            "weights and weights_f32 are both set; send one of them");
  // A shape whose byte count would overflow is refused, not wrapped around.
  EXPECT_FALSE(CheckRaw({"points", "n", int64_t{1} << 62, "d", 8}, 0, "").ok());
}

// Little-endian float64 bytes of `values`, byte by byte.
std::string LittleEndian64(const std::vector<double>& values) {
  std::string bytes;
  for (double v : values) {
    uint64_t word;
    std::memcpy(&word, &v, 8);
    for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<char>((word >> (8 * b)) & 0xff));
  }
  return bytes;
}

TEST(RawPayload, Float64BytesDecodeToDoublesAndAreCheckedByTheirWidth) {
  const absl::StatusOr<Matrix<double>> got =
      RawMatrix<double>({"points", "n", 3, "d", 2}, 0, LittleEndian64({0.1, 2, 3, 4, 5, 1e300}));
  ASSERT_TRUE(got.ok()) << got.status();
  Matrix<double> want(2, 3);
  want << 0.1, 3, 5, 2, 4, 1e300;
  EXPECT_EQ(*got, want);
  const RawShape weights{"weights", "n", 3, "", 1};
  EXPECT_EQ(RawVector<double>(weights, 0, LittleEndian64({1, 0.5, 2})).value(),
            (std::vector<double>{1, 0.5, 2}));
  // Three float32 values' bytes are not three float64 values.
  EXPECT_EQ(RawVector<double>(weights, 0, LittleEndian({1, 0.5f, 2})).status().message(),
            "weights_f64 has 12 bytes, expected n*8 = 3*8");
  EXPECT_EQ(CheckRaw<double>({"centers", "k", 2, "d", 2}, 0, LittleEndian64({1, 2, 3})).message(),
            "centers_f64 has 24 bytes, expected k*d*8 = 2*2*8");
  EXPECT_FALSE(CheckRaw<double>({"points", "n", int64_t{1} << 61, "d", 8}, 0, "").ok());
}

TEST(RawPayload, EncodedValuesAreLittleEndian) {
  std::string bytes;
  EncodeFloat32({1.f, -2.5f}, &bytes);
  EXPECT_EQ(bytes, LittleEndian({1.f, -2.5f}));
  EncodeFloat64({0.1, -2.5e-300}, &bytes);
  EXPECT_EQ(bytes, LittleEndian64({0.1, -2.5e-300}));
  std::vector<double> decoded(2);
  DecodeFloat64(bytes, decoded.data());
  EXPECT_EQ(decoded, (std::vector<double>{0.1, -2.5e-300}));
  EncodeInt32({1, 258, -1}, &bytes);
  EXPECT_EQ(bytes, std::string("\x01\0\0\0\x02\x01\0\0\xff\xff\xff\xff", 12));
  std::vector<int32_t> columns(3);
  DecodeInt32(bytes, columns.data());
  EXPECT_EQ(columns, (std::vector<int32_t>{1, 258, -1}));
  EncodeInt64({258, int64_t{1} << 40}, &bytes);
  EXPECT_EQ(bytes, std::string("\x02\x01\0\0\0\0\0\0\0\0\0\0\0\x01\0\0", 16));
  std::vector<int64_t> offsets(2);
  DecodeInt64(bytes, offsets.data());
  EXPECT_EQ(offsets, (std::vector<int64_t>{258, int64_t{1} << 40}));
}

// Little-endian bytes of 16-bit values given by their bits.
std::string LittleEndian16(const std::vector<uint16_t>& bits) {
  std::string bytes;
  for (uint16_t b : bits) {
    bytes.push_back(static_cast<char>(b & 0xff));
    bytes.push_back(static_cast<char>(b >> 8));
  }
  return bytes;
}

// The value of a binary float of `exponent_bits` and `mantissa_bits` from
// its fields, by the format's definition: (-1)^s 2^(e - bias) (1 + m/2^p)
// for a normal e, (-1)^s 2^(1 - bias) m/2^p for e = 0. In double, which
// holds every such value exactly; NaN and infinity for the all-ones e.
double Reference(uint16_t bits, int exponent_bits, int mantissa_bits) {
  const int mantissa = bits & ((1 << mantissa_bits) - 1);
  const int exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const double sign = (bits >> 15) ? -1.0 : 1.0;
  if (exponent == (1 << exponent_bits) - 1) {
    return mantissa == 0 ? sign * INFINITY : NAN;
  }
  const double scale = std::ldexp(1.0, -mantissa_bits);
  if (exponent == 0) return sign * std::ldexp(mantissa * scale, 1 - bias);
  return sign * std::ldexp(1.0 + mantissa * scale, exponent - bias);
}

void ExpectWidenedExactly(float got, double want, uint16_t bits) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << "bits " << bits;
    return;
  }
  // The float32 holds the value itself, and a zero keeps its sign.
  EXPECT_EQ(static_cast<double>(got), want) << "bits " << bits;
  EXPECT_EQ(std::signbit(got), std::signbit(want)) << "bits " << bits;
}

TEST(RawPayload, EveryBinary16ValueWidensToTheSameFloat32Value) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    ExpectWidenedExactly(WidenFloat16(b), Reference(b, 5, 10), b);
  }
  // The smallest subnormal, the largest subnormal and the largest finite.
  EXPECT_EQ(WidenFloat16(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(WidenFloat16(0x03ff), 1023 * std::ldexp(1.f, -24));
  EXPECT_EQ(WidenFloat16(0x7bff), 65504.f);
}

TEST(RawPayload, EveryBFloat16ValueWidensToTheSameFloat32Value) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    ExpectWidenedExactly(WidenBFloat16(b), Reference(b, 8, 7), b);
  }
  EXPECT_EQ(WidenBFloat16(0x0001), std::ldexp(1.f, -133));
}

// Narrowing rounds to nearest, ties to even, and gives a widened value its
// own bits back: encoded and decoded, every finite value of both types is
// itself.
TEST(RawPayload, NarrowEncodingRoundsToNearestEvenAndRoundTrips) {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t b = 0; b <= 0xffff; ++b) all[b] = static_cast<uint16_t>(b);
  const std::string bytes = LittleEndian16(all);
  for (RawType type : {RawType::kFloat16, RawType::kBFloat16}) {
    SCOPED_TRACE(RawName(type));
    std::vector<float> widened(all.size());
    DecodeRaw(bytes, type, widened.data());
    std::string again;
    EncodeNarrow(widened, type, &again);
    for (uint32_t b = 0; b <= 0xffff; ++b) {
      const uint16_t got = static_cast<uint16_t>(static_cast<unsigned char>(again[2 * b]) |
                                                 static_cast<unsigned char>(again[2 * b + 1]) << 8);
      if (std::isnan(widened[b])) {
        EXPECT_TRUE(type == RawType::kFloat16 ? std::isnan(WidenFloat16(got))
                                              : std::isnan(WidenBFloat16(got)))
            << b;
      } else {
        EXPECT_EQ(got, b);
      }
    }
  }
  const auto f16 = [](float v) { return NarrowFloat16(v); };
  // Ties go to the even neighbour; past 65504 by half a spacing, infinity.
  EXPECT_EQ(f16(1 + std::ldexp(1.f, -11)), 0x3c00);
  EXPECT_EQ(f16(1 + 3 * std::ldexp(1.f, -11)), 0x3c02);
  EXPECT_EQ(f16(65519.f), 0x7bff);
  EXPECT_EQ(f16(65520.f), 0x7c00);
  EXPECT_EQ(f16(-1e10f), 0xfc00);
  // Below the smallest subnormal by less than half: zero; just below the
  // smallest normal: the smallest normal.
  EXPECT_EQ(f16(std::ldexp(1.f, -26)), 0x0000);
  EXPECT_EQ(f16(std::ldexp(1.f, -14) - std::ldexp(1.f, -30)), 0x0400);
  EXPECT_EQ(NarrowBFloat16(1 + std::ldexp(1.f, -8)), 0x3f80);
  EXPECT_EQ(NarrowBFloat16(1 + 3 * std::ldexp(1.f, -8)), 0x3f82);
#if defined(__FLT16_MANT_DIG__)
  // Against the compiler's own conversion where it has _Float16.
  uint32_t state = 12345;
  for (int i = 0; i < 1000000; ++i) {
    state = state * 1664525u + 1013904223u;
    const uint32_t bits = (state & 0x807fffffu) | ((100u + (state >> 8) % 45) << 23);
    float v;
    std::memcpy(&v, &bits, 4);
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(f16(v), want) << bits;
  }
#endif
}

TEST(RawPayload, NarrowBytesDecodeToAFloat32MatrixAndAreCheckedByTheirWidth) {
  // 1, -2, the smallest binary16 subnormal, -0, 65504, 0.5 as binary16.
  const std::string f16 = LittleEndian16({0x3c00, 0xc000, 0x0001, 0x8000, 0x7bff, 0x3800});
  const absl::StatusOr<Matrix<float>> got =
      RawMatrix({"points", "n", 3, "d", 2}, 0, f16, RawType::kFloat16);
  ASSERT_TRUE(got.ok()) << got.status();
  Matrix<float> want(2, 3);
  want << 1, std::ldexp(1.f, -24), 65504, -2, -0.f, 0.5f;
  EXPECT_EQ(*got, want);
  // 1, -2, 3e38 as bfloat16 (0x7f62 = 1.765625 * 2^127).
  const absl::StatusOr<Matrix<float>> bf = RawMatrix(
      {"centers", "k", 1, "d", 3}, 0, LittleEndian16({0x3f80, 0xc000, 0x7f62}), RawType::kBFloat16);
  ASSERT_TRUE(bf.ok()) << bf.status();
  EXPECT_EQ((*bf)(2, 0), std::ldexp(1.765625f, 127));
  // A NaN widens to a NaN, which the core's validation refuses as a float32
  // one; the codec only checks counts.
  const absl::StatusOr<Matrix<float>> nan =
      RawMatrix({"points", "n", 1, "d", 1}, 0, LittleEndian16({0x7e00}), RawType::kFloat16);
  ASSERT_TRUE(nan.ok()) << nan.status();
  EXPECT_TRUE(std::isnan((*nan)(0, 0)));

  EXPECT_EQ(CheckRaw({"points", "n", 3, "d", 2}, 0, f16.substr(1), RawType::kFloat16).message(),
            "points_f16 has 11 bytes, expected n*d*2 = 3*2*2");
  EXPECT_EQ(CheckRaw({"points", "n", 3, "d", 2}, 0, f16 + f16, RawType::kBFloat16).message(),
            "points_bf16 has 24 bytes, expected n*d*2 = 3*2*2");
  // Six float32 values' bytes are not six binary16 values.
  EXPECT_EQ(
      CheckRaw({"points", "n", 3, "d", 2}, 0, LittleEndian({1, 2, 3, 4, 5, 6}), RawType::kFloat16)
          .message(),
      "points_f16 has 24 bytes, expected n*d*2 = 3*2*2");
  EXPECT_FALSE(CheckRaw({"points", "n", int64_t{1} << 62, "d", 8}, 0, "", RawType::kFloat16).ok());
}

TEST(RawPayload, AMatrixComesInOneFieldOnly) {
  const std::string none, some = LittleEndian16({0x3c00}), more = LittleEndian({1});
  const absl::StatusOr<RawBytes> one = OneRawField(
      "points", 0,
      {{RawType::kFloat32, &none}, {RawType::kFloat16, &some}, {RawType::kBFloat16, &none}});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->type, RawType::kFloat16);
  EXPECT_EQ(one->bytes, &some);
  // The repeated field alone, or nothing: no raw field.
  EXPECT_FALSE(OneRawField("points", 3, {{RawType::kFloat32, &none}}).value().set());
  EXPECT_EQ(OneRawField("points", 3, {{RawType::kFloat32, &none}, {RawType::kFloat16, &some}})
                .status()
                .message(),
            "points and points_f16 are both set; send one of them");
  EXPECT_EQ(
      OneRawField(
          "centers", 0,
          {{RawType::kFloat32, &more}, {RawType::kFloat16, &none}, {RawType::kBFloat16, &some}})
          .status()
          .message(),
      "centers_f32 and centers_bf16 are both set; send one of them");
}

}  // namespace
}  // namespace kmt
