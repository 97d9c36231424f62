#include "proto/raw_payload.h"

#include <cstring>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"

namespace kmt {
namespace {

static_assert(sizeof(float) == 4 && sizeof(int) == 4 && sizeof(double) == 8,
              "raw payloads are 4- and 8-byte values");

// Copies `count` values of `width` bytes (4 or 8) between host order and
// little-endian bytes (the same operation both ways).
void CopyLittleEndian(const void* from, void* to, size_t count, size_t width) {
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

template <typename Scalar>
void Decode(const std::string& bytes, Scalar* out) {
  CopyLittleEndian(bytes.data(), out, bytes.size() / sizeof(Scalar), sizeof(Scalar));
}

}  // namespace

template <typename Scalar>
absl::Status CheckRaw(const RawShape& shape, int repeated_count, const std::string& bytes) {
  constexpr uint64_t kWidth = sizeof(Scalar);
  const char* suffix = kWidth == 8 ? "_f64" : "_f32";
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
                                         const std::string& bytes) {
  if (absl::Status s = CheckRaw<Scalar>(shape, repeated_count, bytes); !s.ok()) return s;
  Matrix<Scalar> values(shape.cols, shape.rows);
  Decode(bytes, values.data());
  return values;
}

template <typename Scalar>
absl::StatusOr<std::vector<Scalar>> RawVector(const RawShape& shape, int repeated_count,
                                              const std::string& bytes) {
  if (absl::Status s = CheckRaw<Scalar>(shape, repeated_count, bytes); !s.ok()) return s;
  std::vector<Scalar> values(bytes.size() / sizeof(Scalar));
  Decode(bytes, values.data());
  return values;
}

void DecodeFloat32(const std::string& bytes, float* out) { Decode(bytes, out); }

void DecodeFloat64(const std::string& bytes, double* out) { Decode(bytes, out); }

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

void PutMatrix(const Matrix<float>& m, google::protobuf::RepeatedField<float>* values,
               std::string*) {
  values->Add(m.data(), m.data() + m.size());
}

void PutMatrix(const Matrix<double>& m, google::protobuf::RepeatedField<float>*, std::string* f64) {
  EncodeFloat64(absl::MakeConstSpan(m.data(), m.size()), f64);
}

#define KMT_INSTANTIATE(S)                                                                   \
  template absl::Status CheckRaw<S>(const RawShape&, int, const std::string&);               \
  template absl::StatusOr<Matrix<S>> RawMatrix<S>(const RawShape&, int, const std::string&); \
  template absl::StatusOr<std::vector<S>> RawVector<S>(const RawShape&, int, const std::string&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
