#include "proto/csr_payload.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/raw_payload.h"

namespace kmt {

int64_t CsrRowCount(const v1::CsrPoints& csr) {
  const int64_t bytes = static_cast<int64_t>(csr.indptr_i64().size());
  return bytes > 0 && bytes % 8 == 0 ? bytes / 8 - 1 : -1;
}

template <typename Scalar>
absl::StatusOr<CsrMatrix<Scalar>> CsrFromProto(const v1::CsrPoints& csr, int64_t d,
                                               const char* field) {
  constexpr bool kIsFloat64 = std::is_same_v<Scalar, double>;
  const char* own = kIsFloat64 ? ".values_f64" : ".values_f32";
  // A field of the other precision: its values, or float32 points flagged
  // float64.
  const char* other = kIsFloat64 ? (csr.values_f32().empty() ? nullptr : ".values_f32")
                      : !csr.values_f64().empty() ? ".values_f64"
                      : csr.float64()             ? ".float64"
                                                  : nullptr;
  if (other != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, other, " is set where the points are ", RawName(kRawTypeOf<Scalar>),
                     ": send ", field, own,
                     "; one request's or job's payloads are all float32 "
                     "or all float64"));
  }
  const int64_t rows = CsrRowCount(csr);
  if (rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".indptr_i64 has ", csr.indptr_i64().size(),
                     " bytes, not a whole number of int64 offsets: it holds rows + 1 of them"));
  }
  if (csr.indices_i32().size() % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".indices_i32 has ",
                                                   csr.indices_i32().size(),
                                                   " bytes, not a whole number of int32 columns"));
  }
  const int64_t values = CsrValueCount<Scalar>(csr);
  if (values < 0) {
    const std::string& bytes = kIsFloat64 ? csr.values_f64() : csr.values_f32();
    return absl::InvalidArgumentError(absl::StrCat(field, own, " has ", bytes.size(),
                                                   " bytes, not a whole number of ",
                                                   RawName(kRawTypeOf<Scalar>), " values"));
  }
  std::vector<int64_t> indptr(rows + 1);
  DecodeInt64(csr.indptr_i64(), indptr.data());
  std::vector<int32_t> indices(csr.indices_i32().size() / 4);
  if (!indices.empty()) DecodeInt32(csr.indices_i32(), indices.data());
  std::vector<Scalar> decoded(values);
  if (values > 0) {
    DecodeRaw(kIsFloat64 ? csr.values_f64() : csr.values_f32(), kRawTypeOf<Scalar>, decoded.data());
  }
  absl::StatusOr<CsrMatrix<Scalar>> matrix =
      CsrMatrix<Scalar>::Create(rows, d, std::move(indptr), std::move(indices), std::move(decoded));
  if (!matrix.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", matrix.status().message()));
  }
  return matrix;
}

template absl::StatusOr<CsrMatrix<float>> CsrFromProto<float>(const v1::CsrPoints&, int64_t,
                                                              const char*);
template absl::StatusOr<CsrMatrix<double>> CsrFromProto<double>(const v1::CsrPoints&, int64_t,
                                                                const char*);

}  // namespace kmt
