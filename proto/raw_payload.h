// Raw payloads: the float fields of the contract (points, centers, weights)
// may travel as little-endian float32 bytes instead of `repeated float`, as
// little-endian float64 bytes for a batch clustered in double, or (points and
// centers) as little-endian binary16 or bfloat16 bytes that widen exactly to
// float32; labels, centers and distances come back as little-endian int32 /
// float32 / float64 bytes. A client then builds a message from an array with
// one copy and reads one without a per-value loop; the values are the same
// either way. Each field's element type is a RawType tag: one codec for all.
#ifndef KMT_PROTO_RAW_PAYLOAD_H_
#define KMT_PROTO_RAW_PAYLOAD_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/narrow_float.h"
#include "core/types.h"

namespace kmt {

// The element type of a raw field's bytes, which its name's suffix says.
// Binary16 (IEEE 754 half) and bfloat16 are narrow forms of float32: every
// value of theirs is a float32 value, to which they decode exactly.
enum class RawType { kFloat16, kBFloat16, kFloat32, kFloat64 };
int RawWidth(RawType type);           // bytes per value: 2, 2, 4, 8
const char* RawSuffix(RawType type);  // "_f16", "_bf16", "_f32", "_f64"
const char* RawName(RawType type);    // "binary16", "bfloat16", "float32", "float64"

// The type a Scalar travels as by default: float as float32, double as
// float64.
template <typename Scalar>
inline constexpr RawType kRawTypeOf =
    std::is_same_v<Scalar, double> ? RawType::kFloat64 : RawType::kFloat32;

// One raw field of a matrix: its bytes (null or empty when unset) and type.
struct RawBytes {
  RawType type = RawType::kFloat32;
  const std::string* bytes = nullptr;
  bool set() const { return bytes != nullptr && !bytes->empty(); }
};

// The one field set among a matrix's repeated field (`field`, holding
// `repeated_count` values) and its raw fields `raw`: the raw one, or an
// unset RawBytes when the repeated field or none is set. Two set is
// INVALID_ARGUMENT naming both ("points and points_f16 are both set").
absl::StatusOr<RawBytes> OneRawField(const char* field, int repeated_count,
                                     std::initializer_list<RawBytes> raw);

// What a raw field should hold: `rows` x `cols` values, row-major. Names the
// field in errors: `field` is the repeated field ("points"), whose bytes
// twins are field + "_f32" and field + "_f64"; `rows_name` and `cols_name`
// name the shape ("n", "d"; cols_name empty for one value per row, as
// weights have).
struct RawShape {
  const char* field;
  const char* rows_name;
  int64_t rows;
  const char* cols_name;
  int64_t cols;
};

// Checks a raw field `bytes` of `type` values (by default the Scalar's own:
// float the _f32 field, double the _f64 one) against its shape and against
// its repeated twin, which holds `repeated_count` values: setting both, or a
// byte count other than rows*cols*RawWidth(type), is INVALID_ARGUMENT naming
// the field and the numbers.
template <typename Scalar = float>
absl::Status CheckRaw(const RawShape& shape, int repeated_count, const std::string& bytes,
                      RawType type = kRawTypeOf<Scalar>);

// The shape's values as a cols x rows matrix (a point or center per column,
// as the core takes them), `type` values widened to Scalar (a float matrix
// reads float32 and the narrow types, a double one float64). Checked as
// CheckRaw does; the values themselves (NaN, infinities) are left to the
// core's validation, which sees a narrow NaN as the float32 NaN it widens to.
template <typename Scalar = float>
absl::StatusOr<Matrix<Scalar>> RawMatrix(const RawShape& shape, int repeated_count,
                                         const std::string& bytes,
                                         RawType type = kRawTypeOf<Scalar>);

// The same as a flat vector (per-point values such as weights).
template <typename Scalar = float>
absl::StatusOr<std::vector<Scalar>> RawVector(const RawShape& shape, int repeated_count,
                                              const std::string& bytes,
                                              RawType type = kRawTypeOf<Scalar>);

// bytes.size() / RawWidth(type) little-endian `type` values into `out`,
// widened to Scalar; bytes.size() is a multiple of the width, and `type` is
// Scalar's own or (for float) a narrow one.
template <typename Scalar>
void DecodeRaw(const std::string& bytes, RawType type, Scalar* out);
void DecodeFloat32(const std::string& bytes, float* out);
void DecodeFloat64(const std::string& bytes, double* out);
// Compressed sparse rows' offsets and columns (CsrPoints): bytes.size() / 8
// or / 4 values, the size a multiple of the width.
void DecodeInt64(const std::string& bytes, int64_t* out);
void DecodeInt32(const std::string& bytes, int32_t* out);

// Values as little-endian bytes, replacing `out`'s contents.
void EncodeFloat32(absl::Span<const float> values, std::string* out);
void EncodeFloat64(absl::Span<const double> values, std::string* out);
void EncodeInt32(absl::Span<const int> values, std::string* out);
void EncodeInt64(absl::Span<const int64_t> values, std::string* out);
// Float32 values as little-endian binary16 or bfloat16 (`type`), each
// rounded to nearest, ties to even (core/narrow_float.h): exact for values
// of that type, as widened ones are.
void EncodeNarrow(absl::Span<const float> values, RawType type, std::string* out);

}  // namespace kmt

#endif  // KMT_PROTO_RAW_PAYLOAD_H_
