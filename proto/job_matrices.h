// Where each matrix of the resident-job messages travels, and the one
// reading and writing of them. A matrix (a step's centers, a chunk's
// points, an answer's points) has up to five forms in its message: the
// repeated float field NAME and the bytes NAME_f32, NAME_f64, NAME_f16 and
// NAME_bf16, as the contract declares them for it. The functions of the
// namespace `wire` name each matrix's forms, once; a reader or writer takes
// the precision (float or double) from its Scalar and the forms from there,
// so that a new form or a new matrix is one line of this table, not a twin
// at every use.
//
//   WriteMatrix(centers, wire::Centers(request.mutable_assign()));
//   absl::StatusOr<Matrix<Scalar>> add = ReadRows<Scalar>(wire::AddCenters(step), d);
#ifndef KMT_PROTO_JOB_MATRICES_H_
#define KMT_PROTO_JOB_MATRICES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/types.h"
#include "google/protobuf/repeated_field.h"
#include "proto/kmeans_transformer.pb.h"
#include "proto/raw_payload.h"

namespace kmt {

// A matrix's forms in a message as read: null where the message does not
// declare the form.
struct MatrixForms {
  const char* name;  // the repeated field's name, the bytes fields' stem
  const google::protobuf::RepeatedField<float>* values = nullptr;
  const std::string* f32 = nullptr;
  const std::string* f64 = nullptr;
  const std::string* f16 = nullptr;
  const std::string* bf16 = nullptr;

  // Whether a float32 form is set (the repeated field, _f32 or a narrow
  // one); whether the float64 one is.
  bool float32_set() const;
  bool float64_set() const;
};

// The same as written: the forms a writer may fill.
struct MutableMatrixForms {
  google::protobuf::RepeatedField<float>* values = nullptr;
  std::string* f32 = nullptr;
  std::string* f64 = nullptr;
  std::string* f16 = nullptr;
  std::string* bf16 = nullptr;
};

namespace wire {
// ShardChunk: the points (dense forms; points_shared and points_csr are
// read on their own) and the weights.
MatrixForms Points(const v1::ShardChunk& chunk);
MutableMatrixForms Points(v1::ShardChunk* chunk);
MatrixForms Weights(const v1::ShardChunk& chunk);
MutableMatrixForms Weights(v1::ShardChunk* chunk);
// CsrPoints: the nonzeros' values (its other arrays are not matrices).
MutableMatrixForms Values(v1::CsrPoints* csr);
// Steps.
MatrixForms Centers(const v1::AssignStep& step);
MutableMatrixForms Centers(v1::AssignStep* step);
MatrixForms Centers(const v1::SampleSumsStep& step);
MutableMatrixForms Centers(v1::SampleSumsStep* step);
MatrixForms AddCenters(const v1::SeedStep& step);
MutableMatrixForms AddCenters(v1::SeedStep* step);
MatrixForms Candidates(const v1::SeedStep& step);
MutableMatrixForms Candidates(v1::SeedStep* step);
MatrixForms AddCenters(const v1::KMeansParallelStep& step);
MutableMatrixForms AddCenters(v1::KMeansParallelStep* step);
MatrixForms Candidates(const v1::CandidateWeightsStep& step);
MutableMatrixForms Candidates(v1::CandidateWeightsStep* step);
// Answers.
MatrixForms Centers(const v1::LloydStepsAnswer& answer);
MutableMatrixForms Centers(v1::LloydStepsAnswer* answer);
MatrixForms Points(const v1::JobResponse& answer);
MutableMatrixForms Points(v1::JobResponse* answer);
MatrixForms SampledPoints(const v1::JobResponse& answer);
MutableMatrixForms SampledPoints(v1::JobResponse* answer);
MatrixForms FarPoints(const v1::JobResponse& answer);
MutableMatrixForms FarPoints(v1::JobResponse* answer);
}  // namespace wire

// Checks that `forms` come in a job's precision (Scalar: float for a
// float32 shard, double for a float64 one): a float64 shard takes the _f64
// form alone, a float32 shard any form but it. INVALID_ARGUMENT naming the
// forms otherwise.
template <typename Scalar>
absl::Status MatchPrecision(const MatrixForms& forms);

// The name of the first form set ("points", "points_f32", "points_f16",
// "points_bf16", "points_f64" in that order), empty if none is.
std::string FirstSetForm(const MatrixForms& forms);

// The one form set in Scalar's precision (MatchPrecision, then
// OneRawField): its bytes, or an unset RawBytes where the repeated field or
// no form is set.
template <typename Scalar>
absl::StatusOr<RawBytes> OneForm(const MatrixForms& forms);

// The matrix as d x m (a row per column, as the core takes them), m from
// the number of values sent (0 if none): OneForm, then a count that is not
// a multiple of d is INVALID_ARGUMENT ("add_centers has 4 values, not a
// multiple of d = 3").
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ReadRows(const MatrixForms& forms, int64_t d);

// The matrix as d x rows, its row count given (`rows_name` = `rows`, e.g.
// k): OneForm, then another number of values is INVALID_ARGUMENT naming the
// form, the numbers and the names (CheckRaw's and MatrixFromRowMajor's).
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ReadMatrix(const MatrixForms& forms, const char* rows_name,
                                          int64_t rows, int64_t d);

// The bytes the matrix's forms took on the wire (4 a value of the repeated
// field).
int64_t WireBytes(const MatrixForms& forms);

// Whether no form of the matrix is set.
bool IsEmpty(const MatrixForms& forms);

// Copies each form set in `from` to the same form of `to` (the messages'
// matrix of the same kind, where `to` declares every form `from` has).
void CopyForms(const MatrixForms& from, const MutableMatrixForms& to);

// Writes `m` (d x m, written row-major as the contract's matrices are) in
// its precision's form, replacing what the form held: a float matrix as the
// _f32 bytes where the message declares them, else in the repeated field; a
// double matrix as the _f64 bytes.
template <typename Scalar>
void WriteMatrix(const Matrix<Scalar>& m, const MutableMatrixForms& forms);
// The same for values in a row-major span (a chunk's points, weights), as
// `type`: by default Scalar's own form as above, or (float values) the
// _f16 or _bf16 bytes, each value rounded to nearest (EncodeNarrow).
template <typename Scalar>
void WriteValues(absl::Span<const Scalar> values, const MutableMatrixForms& forms,
                 RawType type = kRawTypeOf<Scalar>);

}  // namespace kmt

#endif  // KMT_PROTO_JOB_MATRICES_H_
