#include "proto/job_matrices.h"

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/validation.h"

namespace kmt {

bool MatrixForms::float32_set() const {
  const auto set = [](const std::string* bytes) { return bytes != nullptr && !bytes->empty(); };
  return (values != nullptr && !values->empty()) || set(f32) || set(f16) || set(bf16);
}

bool MatrixForms::float64_set() const { return f64 != nullptr && !f64->empty(); }

std::string FirstSetForm(const MatrixForms& forms) {
  if (forms.values != nullptr && !forms.values->empty()) return forms.name;
  const RawBytes raw[] = {{RawType::kFloat32, forms.f32},
                          {RawType::kFloat16, forms.f16},
                          {RawType::kBFloat16, forms.bf16},
                          {RawType::kFloat64, forms.f64}};
  for (const RawBytes& r : raw) {
    if (r.set()) return absl::StrCat(forms.name, RawSuffix(r.type));
  }
  return "";
}

namespace wire {

MatrixForms Points(const v1::ShardChunk& c) {
  return {"points",        &c.points(),     &c.points_f32(),
          &c.points_f64(), &c.points_f16(), &c.points_bf16()};
}
MutableMatrixForms Points(v1::ShardChunk* c) {
  return {c->mutable_points(), c->mutable_points_f32(), c->mutable_points_f64(),
          c->mutable_points_f16(), c->mutable_points_bf16()};
}
MatrixForms Weights(const v1::ShardChunk& c) {
  return {"weights", &c.weights(), &c.weights_f32(), &c.weights_f64()};
}
MutableMatrixForms Weights(v1::ShardChunk* c) {
  return {c->mutable_weights(), c->mutable_weights_f32(), c->mutable_weights_f64()};
}
MutableMatrixForms Values(v1::CsrPoints* csr) {
  return {nullptr, csr->mutable_values_f32(), csr->mutable_values_f64()};
}

MatrixForms Centers(const v1::AssignStep& s) {
  return {"centers", &s.centers(), &s.centers_f32(), &s.centers_f64()};
}
MutableMatrixForms Centers(v1::AssignStep* s) {
  return {s->mutable_centers(), s->mutable_centers_f32(), s->mutable_centers_f64()};
}
MatrixForms Centers(const v1::SampleSumsStep& s) {
  return {"centers", nullptr, &s.centers_f32(), &s.centers_f64()};
}
MutableMatrixForms Centers(v1::SampleSumsStep* s) {
  return {nullptr, s->mutable_centers_f32(), s->mutable_centers_f64()};
}
MatrixForms AddCenters(const v1::SeedStep& s) {
  return {"add_centers", &s.add_centers(), nullptr, &s.add_centers_f64()};
}
MutableMatrixForms AddCenters(v1::SeedStep* s) {
  return {s->mutable_add_centers(), nullptr, s->mutable_add_centers_f64()};
}
MatrixForms Candidates(const v1::SeedStep& s) {
  return {"candidates", &s.candidates(), nullptr, &s.candidates_f64()};
}
MutableMatrixForms Candidates(v1::SeedStep* s) {
  return {s->mutable_candidates(), nullptr, s->mutable_candidates_f64()};
}
MatrixForms AddCenters(const v1::KMeansParallelStep& s) {
  return {"add_centers", &s.add_centers(), &s.add_centers_f32(), &s.add_centers_f64()};
}
MutableMatrixForms AddCenters(v1::KMeansParallelStep* s) {
  return {s->mutable_add_centers(), s->mutable_add_centers_f32(), s->mutable_add_centers_f64()};
}
MatrixForms Candidates(const v1::CandidateWeightsStep& s) {
  return {"candidates", &s.candidates(), &s.candidates_f32(), &s.candidates_f64()};
}
MutableMatrixForms Candidates(v1::CandidateWeightsStep* s) {
  return {s->mutable_candidates(), s->mutable_candidates_f32(), s->mutable_candidates_f64()};
}

MatrixForms Centers(const v1::LloydStepsAnswer& a) {
  return {"centers", nullptr, &a.centers_f32(), &a.centers_f64()};
}
MutableMatrixForms Centers(v1::LloydStepsAnswer* a) {
  return {nullptr, a->mutable_centers_f32(), a->mutable_centers_f64()};
}
MatrixForms Points(const v1::JobResponse& a) {
  return {"points", &a.points(), nullptr, &a.points_f64()};
}
MutableMatrixForms Points(v1::JobResponse* a) {
  return {a->mutable_points(), nullptr, a->mutable_points_f64()};
}
MatrixForms SampledPoints(const v1::JobResponse& a) {
  return {"sampled_points", &a.sampled_points(), nullptr, &a.sampled_points_f64()};
}
MutableMatrixForms SampledPoints(v1::JobResponse* a) {
  return {a->mutable_sampled_points(), nullptr, a->mutable_sampled_points_f64()};
}
MatrixForms FarPoints(const v1::JobResponse& a) {
  return {"far_points", nullptr, &a.far_points_f32(), &a.far_points_f64()};
}
MutableMatrixForms FarPoints(v1::JobResponse* a) {
  return {nullptr, a->mutable_far_points_f32(), a->mutable_far_points_f64()};
}

}  // namespace wire

template <typename Scalar>
absl::Status MatchPrecision(const MatrixForms& forms) {
  const char* what = forms.name;
  if (std::is_same_v<Scalar, double> && forms.float32_set()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " comes as float32 (", what, " or ", what,
                     "_f32) for a float64 shard (its points came as points_f64): send ", what,
                     "_f64; one job's shards and steps are all float32 or all float64"));
  }
  if (std::is_same_v<Scalar, float> && forms.float64_set()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "_f64 is set for a float32 shard (its points came as float32): send ", what, " or ",
        what, "_f32; one job's shards and steps are all float32 or all float64"));
  }
  return absl::OkStatus();
}

template <typename Scalar>
absl::StatusOr<RawBytes> OneForm(const MatrixForms& forms) {
  if (absl::Status s = MatchPrecision<Scalar>(forms); !s.ok()) return s;
  if constexpr (std::is_same_v<Scalar, double>) {
    return forms.float64_set() ? RawBytes{RawType::kFloat64, forms.f64} : RawBytes{};
  } else {
    return OneRawField(forms.name, forms.values == nullptr ? 0 : forms.values->size(),
                       {{RawType::kFloat32, forms.f32},
                        {RawType::kFloat16, forms.f16},
                        {RawType::kBFloat16, forms.bf16}});
  }
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ReadRows(const MatrixForms& forms, int64_t d) {
  absl::StatusOr<RawBytes> raw = OneForm<Scalar>(forms);
  if (!raw.ok()) return raw.status();
  if (raw->set()) {
    const int64_t width = RawWidth(raw->type);
    const int64_t bytes = static_cast<int64_t>(raw->bytes->size());
    if (bytes % (width * d) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(forms.name, RawSuffix(raw->type), " has ",
                                                     bytes, " bytes, not a multiple of ", width,
                                                     " * d = ", width * d));
    }
    Matrix<Scalar> m(d, static_cast<Eigen::Index>(bytes / (width * d)));
    DecodeRaw(*raw->bytes, raw->type, m.data());
    return m;
  }
  if (std::is_same_v<Scalar, double> || forms.values == nullptr) return Matrix<Scalar>(d, 0);
  const int64_t count = forms.values->size();
  if (count % d != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(forms.name, " has ", count, " values, not a multiple of d = ", d));
  }
  return Eigen::Map<const Matrix<float>>(forms.values->data(), d, count / d)
      .template cast<Scalar>();
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ReadMatrix(const MatrixForms& forms, const char* rows_name,
                                          int64_t rows, int64_t d) {
  absl::StatusOr<RawBytes> raw = OneForm<Scalar>(forms);
  if (!raw.ok()) return raw.status();
  if (std::is_same_v<Scalar, float> && !raw->set() && forms.values != nullptr) {
    return MatrixFromRowMajor<Scalar>(*forms.values, rows, d, forms.name, rows_name);
  }
  // Nothing sent reads as the precision's own bytes, empty: too few values.
  const std::string none;
  const RawBytes bytes = raw->set() ? *raw : RawBytes{kRawTypeOf<Scalar>, &none};
  return RawMatrix<Scalar>({forms.name, rows_name, rows, "d", d}, 0, *bytes.bytes, bytes.type);
}

int64_t WireBytes(const MatrixForms& forms) {
  int64_t bytes = forms.values != nullptr ? int64_t{4} * forms.values->size() : 0;
  for (const std::string* form : {forms.f32, forms.f64, forms.f16, forms.bf16}) {
    if (form != nullptr) bytes += static_cast<int64_t>(form->size());
  }
  return bytes;
}

bool IsEmpty(const MatrixForms& forms) { return !forms.float32_set() && !forms.float64_set(); }

void CopyForms(const MatrixForms& from, const MutableMatrixForms& to) {
  if (from.values != nullptr && !from.values->empty()) *to.values = *from.values;
  const std::pair<const std::string*, std::string*> bytes[] = {
      {from.f32, to.f32}, {from.f64, to.f64}, {from.f16, to.f16}, {from.bf16, to.bf16}};
  for (const auto& [source, target] : bytes) {
    if (source != nullptr && !source->empty()) *target = *source;
  }
}

template <typename Scalar>
void WriteValues(absl::Span<const Scalar> values, const MutableMatrixForms& forms, RawType type) {
  if constexpr (std::is_same_v<Scalar, double>) {
    EncodeFloat64(values, forms.f64);
  } else if (type == RawType::kFloat16 || type == RawType::kBFloat16) {
    EncodeNarrow(values, type, type == RawType::kFloat16 ? forms.f16 : forms.bf16);
  } else if (forms.f32 != nullptr) {
    EncodeFloat32(values, forms.f32);
  } else {
    forms.values->Assign(values.begin(), values.end());
  }
}

template <typename Scalar>
void WriteMatrix(const Matrix<Scalar>& m, const MutableMatrixForms& forms) {
  WriteValues<Scalar>(absl::MakeConstSpan(m.data(), m.size()), forms);
}

#define KMT_INSTANTIATE(S)                                                                   \
  template absl::Status MatchPrecision<S>(const MatrixForms&);                               \
  template absl::StatusOr<RawBytes> OneForm<S>(const MatrixForms&);                          \
  template absl::StatusOr<Matrix<S>> ReadRows<S>(const MatrixForms&, int64_t);               \
  template absl::StatusOr<Matrix<S>> ReadMatrix<S>(const MatrixForms&, const char*, int64_t, \
                                                   int64_t);                                 \
  template void WriteValues<S>(absl::Span<const S>, const MutableMatrixForms&, RawType);     \
  template void WriteMatrix<S>(const Matrix<S>&, const MutableMatrixForms&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
