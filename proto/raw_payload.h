// Raw payloads: the float fields of the contract (points, centers, weights)
// may travel as little-endian float32 bytes instead of `repeated float`, or
// as little-endian float64 bytes for a batch clustered in double, and labels,
// centers and distances come back as little-endian int32 / float32 / float64
// bytes. A client then builds a message from an array with one copy and reads
// one without a per-value loop; the values are the same either way.
#ifndef KMT_PROTO_RAW_PAYLOAD_H_
#define KMT_PROTO_RAW_PAYLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/types.h"
#include "google/protobuf/repeated_field.h"

namespace kmt {

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

// Checks a raw field `bytes` of Scalar values (float: the _f32 field, double:
// the _f64 one) against its shape and against its repeated twin, which holds
// `repeated_count` values: setting both, or a byte count other than
// rows*cols*sizeof(Scalar), is INVALID_ARGUMENT naming the field and the
// numbers.
template <typename Scalar = float>
absl::Status CheckRaw(const RawShape& shape, int repeated_count, const std::string& bytes);

// The shape's values as a cols x rows matrix (a point or center per column,
// as the core takes them). Checked as CheckRaw does; the values themselves
// are left to the core's validation.
template <typename Scalar = float>
absl::StatusOr<Matrix<Scalar>> RawMatrix(const RawShape& shape, int repeated_count,
                                         const std::string& bytes);

// The same as a flat vector (per-point values such as weights).
template <typename Scalar = float>
absl::StatusOr<std::vector<Scalar>> RawVector(const RawShape& shape, int repeated_count,
                                              const std::string& bytes);

// bytes.size() / 4 little-endian float32 values into `out`; bytes.size() is
// a multiple of 4. DecodeFloat64 the same for 8-byte float64 values.
void DecodeFloat32(const std::string& bytes, float* out);
void DecodeFloat64(const std::string& bytes, double* out);

// Values as little-endian bytes, replacing `out`'s contents.
void EncodeFloat32(absl::Span<const float> values, std::string* out);
void EncodeFloat64(absl::Span<const double> values, std::string* out);
void EncodeInt32(absl::Span<const int> values, std::string* out);

// A matrix's values in a resident job's precision (a float32 job's in its
// repeated float field, appended; a float64 job's as its _f64 bytes,
// replacing them): the other of the two is left alone.
void PutMatrix(const Matrix<float>& m, google::protobuf::RepeatedField<float>* values,
               std::string* f64);
void PutMatrix(const Matrix<double>& m, google::protobuf::RepeatedField<float>* values,
               std::string* f64);

}  // namespace kmt

#endif  // KMT_PROTO_RAW_PAYLOAD_H_
