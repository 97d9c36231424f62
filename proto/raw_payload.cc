#include "proto/raw_payload.h"

#include <cassert>
#include <cstring>
#include <type_traits>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"

namespace kmt {
namespace {

static_assert(sizeof(float) == 4 && sizeof(int) == 4 && sizeof(double) == 8,
              "raw payloads are 4- and 8-byte values");

// Copies `count` values of `width` bytes (4 or 8) between host order and
// little-endian bytes (the same operation both ways).
void CopyLittleEndian(const void* from, void* to, size_t count, size_t width) {
  // An empty array's data() may be null, which memcpy may not take even for
  // 0 bytes.
  if (count == 0) return;
  std::memcpy(to, from, count * width);
#if defined(ABSL_IS_BIG_ENDIAN)
  if (width == 4) {
    auto* words = static_cast<uint32_t*>(to);
    for (size_t i = 0; i < count; ++i) words[i] = __builtin_bswap32(words[i]);
  } else {
    auto* words = static_cast<uint64_t*>(to);
    for (size_t i = 0; i < count; ++i) words[i] = __builtin_bswap64(words[i]);
  }
#endif
}

// Narrow values, little-endian in any host order, widened by `Widen`.
template <float (*Widen)(uint16_t)>
void DecodeNarrow(const std::string& bytes, float* out) {
  const size_t count = bytes.size() / 2;
  for (size_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
#if defined(ABSL_IS_BIG_ENDIAN)
    bits = __builtin_bswap16(bits);
#endif
    out[i] = Widen(bits);
  }
}

// Each RawType's width, field suffix and name, in the enum's order.
struct RawTypeInfo {
  int width;
  const char* suffix;
  const char* name;
};
constexpr RawTypeInfo kRawTypes[] = {{2, "_f16", "binary16"},
                                     {2, "_bf16", "bfloat16"},
                                     {4, "_f32", "float32"},
                                     {8, "_f64", "float64"}};

}  // namespace

int RawWidth(RawType type) { return kRawTypes[static_cast<int>(type)].width; }
const char* RawSuffix(RawType type) { return kRawTypes[static_cast<int>(type)].suffix; }
const char* RawName(RawType type) { return kRawTypes[static_cast<int>(type)].name; }

template <typename Scalar>
void DecodeRaw(const std::string& bytes, RawType type, Scalar* out) {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (type == RawType::kFloat16) return DecodeNarrow<WidenFloat16>(bytes, out);
    if (type == RawType::kBFloat16) return DecodeNarrow<WidenBFloat16>(bytes, out);
  }
  assert(type == kRawTypeOf<Scalar>);
  CopyLittleEndian(bytes.data(), out, bytes.size() / sizeof(Scalar), sizeof(Scalar));
}

absl::StatusOr<RawBytes> OneRawField(const char* field, int repeated_count,
                                     std::initializer_list<RawBytes> raw) {
  const RawBytes* chosen = nullptr;
  for (const RawBytes& r : raw) {
    if (!r.set()) continue;
    if (repeated_count > 0 || chosen != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, chosen == nullptr ? "" : RawSuffix(chosen->type), " and ", field,
                       RawSuffix(r.type), " are both set; send one of them"));
    }
    chosen = &r;
  }
  return chosen == nullptr ? RawBytes{} : *chosen;
}

template <typename Scalar>
absl::Status CheckRaw(const RawShape& shape, int repeated_count, const std::string& bytes,
                      RawType type) {
  const uint64_t kWidth = RawWidth(type);
  const char* suffix = RawSuffix(type);
  if (repeated_count > 0 && !bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(shape.field, " and ", shape.field, suffix, " are both set; send one of them"));
  }
  const bool per_row = shape.cols_name[0] == '\0';
  // Compared by division, so a huge shape cannot overflow the product.
  const bool fits = shape.rows >= 0 && shape.cols >= 1 &&
                    bytes.size() % (kWidth * static_cast<uint64_t>(shape.cols)) == 0 &&
                    bytes.size() / (kWidth * static_cast<uint64_t>(shape.cols)) ==
                        static_cast<uint64_t>(shape.rows);
  if (!fits) {
    const std::string expected =
        per_row ? absl::StrCat(shape.rows_name, "*", kWidth, " = ", shape.rows, "*", kWidth)
                : absl::StrCat(shape.rows_name, "*", shape.cols_name, "*", kWidth, " = ",
                               shape.rows, "*", shape.cols, "*", kWidth);
    return absl::InvalidArgumentError(
        absl::StrCat(shape.field, suffix, " has ", bytes.size(), " bytes, expected ", expected));
  }
  return absl::OkStatus();
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> RawMatrix(const RawShape& shape, int repeated_count,
                                         const std::string& bytes, RawType type) {
  if (absl::Status s = CheckRaw<Scalar>(shape, repeated_count, bytes, type); !s.ok()) return s;
  Matrix<Scalar> values(shape.cols, shape.rows);
  DecodeRaw(bytes, type, values.data());
  return values;
}

template <typename Scalar>
absl::StatusOr<std::vector<Scalar>> RawVector(const RawShape& shape, int repeated_count,
                                              const std::string& bytes, RawType type) {
  if (absl::Status s = CheckRaw<Scalar>(shape, repeated_count, bytes, type); !s.ok()) return s;
  std::vector<Scalar> values(bytes.size() / RawWidth(type));
  DecodeRaw(bytes, type, values.data());
  return values;
}

void DecodeFloat32(const std::string& bytes, float* out) {
  DecodeRaw(bytes, RawType::kFloat32, out);
}

void DecodeFloat64(const std::string& bytes, double* out) {
  DecodeRaw(bytes, RawType::kFloat64, out);
}

void DecodeInt64(const std::string& bytes, int64_t* out) {
  CopyLittleEndian(bytes.data(), out, bytes.size() / 8, 8);
}

void DecodeInt32(const std::string& bytes, int32_t* out) {
  CopyLittleEndian(bytes.data(), out, bytes.size() / 4, 4);
}

void EncodeFloat32(absl::Span<const float> values, std::string* out) {
  out->resize(values.size() * 4);
  CopyLittleEndian(values.data(), out->data(), values.size(), 4);
}

void EncodeFloat64(absl::Span<const double> values, std::string* out) {
  out->resize(values.size() * 8);
  CopyLittleEndian(values.data(), out->data(), values.size(), 8);
}

void EncodeInt32(absl::Span<const int> values, std::string* out) {
  out->resize(values.size() * 4);
  CopyLittleEndian(values.data(), out->data(), values.size(), 4);
}

void EncodeInt64(absl::Span<const int64_t> values, std::string* out) {
  out->resize(values.size() * 8);
  CopyLittleEndian(values.data(), out->data(), values.size(), 8);
}

void EncodeNarrow(absl::Span<const float> values, RawType type, std::string* out) {
  assert(type == RawType::kFloat16 || type == RawType::kBFloat16);
  out->resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits =
        type == RawType::kFloat16 ? NarrowFloat16(values[i]) : NarrowBFloat16(values[i]);
    (*out)[2 * i] = static_cast<char>(bits & 0xff);
    (*out)[2 * i + 1] = static_cast<char>(bits >> 8);
  }
}

#define KMT_INSTANTIATE(S)                                                                       \
  template absl::Status CheckRaw<S>(const RawShape&, int, const std::string&, RawType);          \
  template absl::StatusOr<Matrix<S>> RawMatrix<S>(const RawShape&, int, const std::string&,      \
                                                  RawType);                                      \
  template absl::StatusOr<std::vector<S>> RawVector<S>(const RawShape&, int, const std::string&, \
                                                       RawType);                                 \
  template void DecodeRaw<S>(const std::string&, RawType, S*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
