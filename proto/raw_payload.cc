#include "proto/raw_payload.h"

#include <cstring>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"

namespace kmt {
namespace {

static_assert(sizeof(float) == 4 && sizeof(int) == 4, "raw payloads are 4-byte values");

// Copies `count` 4-byte values between host order and little-endian bytes
// (the same operation both ways).
void CopyLittleEndian(const void* from, void* to, size_t count) {
  std::memcpy(to, from, count * 4);
#if defined(ABSL_IS_BIG_ENDIAN)
  auto* words = static_cast<uint32_t*>(to);
  for (size_t i = 0; i < count; ++i) words[i] = __builtin_bswap32(words[i]);
#endif
}

}  // namespace

absl::Status CheckRaw(const RawShape& shape, int repeated_count, const std::string& bytes) {
  if (repeated_count > 0 && !bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(shape.field, " and ", shape.field, "_f32 are both set; send one of them"));
  }
  const bool per_row = shape.cols_name[0] == '\0';
  // Compared by division, so a huge shape cannot overflow the product.
  const bool fits =
      shape.rows >= 0 && shape.cols >= 1 &&
      bytes.size() % (4 * static_cast<uint64_t>(shape.cols)) == 0 &&
      bytes.size() / (4 * static_cast<uint64_t>(shape.cols)) == static_cast<uint64_t>(shape.rows);
  if (!fits) {
    const std::string expected = per_row ? absl::StrCat(shape.rows_name, "*4 = ", shape.rows, "*4")
                                         : absl::StrCat(shape.rows_name, "*", shape.cols_name,
                                                        "*4 = ", shape.rows, "*", shape.cols, "*4");
    return absl::InvalidArgumentError(
        absl::StrCat(shape.field, "_f32 has ", bytes.size(), " bytes, expected ", expected));
  }
  return absl::OkStatus();
}

absl::StatusOr<Matrix<float>> RawMatrix(const RawShape& shape, int repeated_count,
                                        const std::string& bytes) {
  if (absl::Status s = CheckRaw(shape, repeated_count, bytes); !s.ok()) return s;
  Matrix<float> values(shape.cols, shape.rows);
  DecodeFloat32(bytes, values.data());
  return values;
}

absl::StatusOr<std::vector<float>> RawVector(const RawShape& shape, int repeated_count,
                                             const std::string& bytes) {
  if (absl::Status s = CheckRaw(shape, repeated_count, bytes); !s.ok()) return s;
  std::vector<float> values(bytes.size() / 4);
  DecodeFloat32(bytes, values.data());
  return values;
}

void DecodeFloat32(const std::string& bytes, float* out) {
  CopyLittleEndian(bytes.data(), out, bytes.size() / 4);
}

void EncodeFloat32(absl::Span<const float> values, std::string* out) {
  out->resize(values.size() * 4);
  CopyLittleEndian(values.data(), out->data(), values.size());
}

void EncodeInt32(absl::Span<const int> values, std::string* out) {
  out->resize(values.size() * 4);
  CopyLittleEndian(values.data(), out->data(), values.size());
}

}  // namespace kmt
