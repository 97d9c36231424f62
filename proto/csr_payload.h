// Sparse points on the wire (CsrPoints: scipy.sparse's CSR arrays as raw
// little-endian bytes) as a CsrMatrix: the one decoder of a request's and
// a resident shard's sparse points.
#ifndef KMT_PROTO_CSR_PAYLOAD_H_
#define KMT_PROTO_CSR_PAYLOAD_H_

#include <cstdint>
#include <type_traits>

#include "absl/status/statusor.h"
#include "core/sparse.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

// Whether the values come as float64 (values_f64 or the float64 flag set).
inline bool CsrIsFloat64(const v1::CsrPoints& csr) {
  return !csr.values_f64().empty() || csr.float64();
}

// The rows the arrays hold (indptr's offsets less one; -1 for no whole
// offset) and their values in Scalar's field (-1 for no whole number), for
// a caller's limits before anything is decoded.
int64_t CsrRowCount(const v1::CsrPoints& csr);
template <typename Scalar>
int64_t CsrValueCount(const v1::CsrPoints& csr) {
  const std::string& bytes = std::is_same_v<Scalar, double> ? csr.values_f64() : csr.values_f32();
  return bytes.size() % sizeof(Scalar) == 0 ? static_cast<int64_t>(bytes.size() / sizeof(Scalar))
                                            : -1;
}

// The points of `csr` (field name `field`, as "points_csr") as a CsrMatrix
// of d columns, their values read from Scalar's field (values_f32 for
// float, values_f64 for double; the other must be empty). INVALID_ARGUMENT
// naming the array: a field of the other precision, byte counts that are
// not whole numbers of their values (no indptr at all included), then
// CsrMatrix::Create's rules (docs/core.md, "Sparse points").
template <typename Scalar>
absl::StatusOr<CsrMatrix<Scalar>> CsrFromProto(const v1::CsrPoints& csr, int64_t d,
                                               const char* field = "points_csr");

}  // namespace kmt

#endif  // KMT_PROTO_CSR_PAYLOAD_H_
