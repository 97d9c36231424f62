// Raw float32 / float64 / int32 payloads: checks, decoding and encoding.
#include "proto/raw_payload.h"

#include <gtest/gtest.h>

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
}

}  // namespace
}  // namespace kmt
