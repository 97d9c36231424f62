#include "server/resident_shard.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/empty_clusters.h"
#include "core/lloyd_steps.h"
#include "core/minibatch.h"
#include "core/omp_threads.h"
#include "core/sparse.h"
#include "core/sparse_sums.h"
#include "core/transformer.h"
#include "core/validation.h"
#include "proto/csr_payload.h"
#include "proto/job_matrices.h"
#include "proto/minibatch_state.h"
#include "proto/raw_payload.h"
#include "proto/request.h"
#include "proto/shared_points.h"

namespace kmt {

template <typename Scalar>
struct ResidentShard::State {
  using ScalarType = Scalar;
  Matrix<Scalar> points;  // d x n; empty in a sparse shard
  // The points' pages mapped ahead of the chunks (destroyed before them).
  std::optional<PagesInAdvance> points_pages;
  // A sparse shard's points, its chunks' rows appended as they arrive.
  std::optional<CsrMatrix<Scalar>> csr;
  Vector<Scalar> weights;  // n, or empty: 1 each
  // Hamerly's bounds across the assign steps (BoundedAssignment's labels
  // and lower bounds), for the steps' k.
  std::unique_ptr<BoundedAssignment<Scalar>> assignment;
  int assignment_k = 0;
  std::unique_ptr<SeedingShard<Scalar>> seeding;  // holds weights by reference

  const Vector<Scalar>* weights_or_null() const { return weights.size() > 0 ? &weights : nullptr; }
  // f(points) with the points as they are held, dense (Matrix) or sparse
  // (CsrMatrix): a step's one code for both, over the core's overloads.
  template <typename F>
  decltype(auto) WithPoints(F&& f) const {
    return csr ? f(*csr) : f(points);
  }
  // The shard's points `rows` (m of them), dense: d x m.
  Matrix<Scalar> Gather(const int64_t* rows, Eigen::Index m) const {
    Matrix<Scalar> gathered(csr ? csr->cols() : points.rows(), m);
    for (Eigen::Index i = 0; i < m; ++i) {
      if (csr) {
        csr->Row(rows[i], gathered.col(i).data());
      } else {
        gathered.col(i) = points.col(rows[i]);
      }
    }
    return gathered;
  }
  // The seeding steps' state, made at the first of them.
  SeedingShard<Scalar>& Seeding() {
    if (seeding == nullptr) {
      seeding = WithPoints([&](const auto& held) {
        return std::make_unique<SeedingShard<Scalar>>(&held, weights_or_null());
      });
    }
    return *seeding;
  }
};

namespace {

// No non-finite number leaves the server (ValidateAnswer's rule for a
// request): coordinates within MaxCoordinate keep each squared distance
// finite, but a float64 shard's objective, potentials and sums add many of
// them, each scaled by its weight, and may pass double's range.
// `largest_weight`: the shard's largest weight (0 if it has none). An
// omitted objective is NaN and passes.
// How many of the labels differ from `before`'s (the same length).
int64_t LabelsChanged(const Labels& labels, const Labels& before) {
  int64_t changed = 0;
  for (size_t i = 0; i < labels.size(); ++i) changed += labels[i] != before[i];
  return changed;
}

// Why a step's sums or objective overflowed: the weights, where the largest
// is above 1, or the points' magnitudes.
absl::Status StepOverflow(double largest_weight) {
  if (largest_weight > 1) return SampleWeightsOverflow(largest_weight, "double");
  return SumsOverflow("double");
}

absl::Status FiniteStep(const v1::JobResponse& out, double largest_weight) {
  const auto finite = [](const auto& values) {
    return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
  };
  bool ok = !std::isinf(out.objective()) && std::isfinite(out.potential()) &&
            finite(out.center_sums()) && finite(out.center_weights()) &&
            finite(out.candidate_potentials()) && finite(out.candidate_weights());
  const std::string& rows = out.center_sums_csr().values_f64();
  for (size_t at = 0; ok && at + sizeof(double) <= rows.size(); at += sizeof(double)) {
    double v;
    std::memcpy(&v, rows.data() + at, sizeof v);
    ok = std::isfinite(v);
  }
  if (ok) return absl::OkStatus();
  return StepOverflow(largest_weight);
}

// What the assign steps' bounds hold per point: a label and a lower bound
// (BoundedAssignment's).
constexpr int64_t kBoundsBytesPerPoint = sizeof(int) + sizeof(double);

// A sample-sums step's assignment of the shard's rows `rows` (in order) to
// `centers`: each row's label, the (weighted) objective and, into `sums` if
// given, the rows' counts, weights and (weighted) sums (AssignRows).
template <typename Scalar>
double SampleAssign(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                    const Matrix<Scalar>& centers, const int64_t* row, Eigen::Index m,
                    Labels* labels, ClusterSums* sums) {
  return AssignRows(points, centers, row, m, labels, sums, weights);
}

// Rows `row` (m of them, in order) of a sparse shard as compressed sparse
// rows of their own (their nonzeros alone), with their weights (none if
// the shard has none).
template <typename Scalar>
struct GatheredRows {
  GatheredRows(const CsrMatrix<Scalar>& points, const Vector<Scalar>* weights, const int64_t* row,
               Eigen::Index m)
      : rows(points.Rows(row, m)) {
    if (weights == nullptr) return;
    row_weights.resize(m);
    for (Eigen::Index i = 0; i < m; ++i) row_weights[i] = (*weights)[row[i]];
  }
  const Vector<Scalar>* weights_or_null() const {
    return row_weights.size() > 0 ? &row_weights : nullptr;
  }
  CsrMatrix<Scalar> rows;
  Vector<Scalar> row_weights;
};

// The same as SampleAssign on a sparse shard: the gathered rows assigned by
// AssignNearestSparse, the sums in the rows' order.
template <typename Scalar>
double SampleAssign(const CsrMatrix<Scalar>& points, const Vector<Scalar>* weights,
                    const Matrix<Scalar>& centers, const int64_t* row, Eigen::Index m,
                    Labels* labels, ClusterSums* sums) {
  const GatheredRows<Scalar> gathered(points, weights, row, m);
  return AssignNearestSparse(gathered.rows, centers, labels, nullptr, sums,
                             gathered.weights_or_null(), SparseDistances::kProduct);
}

// A step's cluster sums into `out`: the counts, a weighted shard's weights
// and the sums.
void PutSums(const ClusterSums& sums, bool weighted, v1::JobResponse* out) {
  out->mutable_center_counts()->Add(sums.counts.begin(), sums.counts.end());
  out->mutable_center_sums()->Add(sums.sums.data(), sums.sums.data() + sums.sums.size());
  if (weighted) out->mutable_center_weights()->Add(sums.weights.begin(), sums.weights.end());
}

// The labels and objective of AssignNearestSparse on `points` (a sparse
// shard, or rows gathered from it), and their cluster sums put into `out`
// as center_sums_csr (sparse_sums): the bits center_sums would hold, in
// about the clusters' nonzeros rather than k*d doubles.
template <typename Scalar>
absl::StatusOr<double> AssignWithSparseSums(const CsrMatrix<Scalar>& points,
                                            const Vector<Scalar>* weights,
                                            const Matrix<Scalar>& centers, Labels* labels,
                                            v1::JobResponse* out) {
  const int k = static_cast<int>(centers.cols());
  const double objective = AssignNearestSparse(points, centers, labels, nullptr, nullptr, weights,
                                               SparseDistances::kProduct);
  absl::StatusOr<CsrClusterSums> sums = SparseClusterSums(
      points, *labels, k, weights, AssignmentPartSize<Scalar>(points.rows(), points.cols(), k));
  if (!sums.ok()) return sums.status();
  out->mutable_center_counts()->Add(sums->counts.begin(), sums->counts.end());
  if (weights != nullptr) {
    out->mutable_center_weights()->Add(sums->weights.begin(), sums->weights.end());
  }
  v1::CsrPoints* csr = out->mutable_center_sums_csr();
  EncodeInt64(sums->sums.indptr(), csr->mutable_indptr_i64());
  EncodeInt32(sums->sums.indices(), csr->mutable_indices_i32());
  WriteValues<double>(sums->sums.values(), wire::Values(csr));
  csr->set_float64(true);
  csr->set_shard_nnz(sums->sums.nnz());
  return objective;
}

// sparse_sums on a dense shard.
absl::Status SparseSumsOnADenseShard(const char* step) {
  return absl::InvalidArgumentError(
      absl::StrCat(step,
                   ".sparse_sums is set for a dense shard (its points came dense): its sums "
                   "come as center_sums"));
}

// The bytes a shard holds per point besides its coordinates: an assign
// step's label and distance, the bounds, k-means++'s state, the weight and
// the last assign step's label.
int64_t StateBytesPerPoint(bool weighted, bool count_label_changes, bool float64) {
  const int64_t value = float64 ? 8 : 4;
  const int64_t seeding =
      float64 ? SeedingShard<double>::kBytesPerPoint : SeedingShard<float>::kBytesPerPoint;
  return 4 + value + kBoundsBytesPerPoint + seeding + (weighted ? value : 0) +
         (count_label_changes ? 4 : 0);
}

// The dense points fields a chunk carries, the first set one's name, or
// empty if none is.
std::string DensePointsField(const v1::ShardChunk& chunk) {
  std::string field = FirstSetForm(wire::Points(chunk));
  if (field.empty() && chunk.has_points_shared()) return "points_shared";
  return field;
}

// A sparse chunk's rows as a matrix of their own (CsrFromProto: its
// arrays' lengths, then CsrMatrix::Create's rules), after the shard's
// `first` rows and `nnz` nonzeros: at most `rows_left` rows and
// `shard_nnz` nonzeros in all, counted before anything is decoded. Create
// names rows and positions within the chunk: its message says where the
// chunk starts in the shard.
template <typename Scalar>
absl::StatusOr<CsrMatrix<Scalar>> ChunkRows(const v1::CsrPoints& csr, int64_t d, int64_t first,
                                            int64_t rows_left, int64_t nnz, int64_t shard_nnz) {
  const int64_t rows = CsrRowCount(csr), values = CsrValueCount<Scalar>(csr);
  if (rows > rows_left) {
    return absl::InvalidArgumentError(absl::StrCat("points_csr has ", rows, " rows after ", first,
                                                   " of the shard's n = ", first + rows_left,
                                                   " points: at most the points left"));
  }
  if (values > shard_nnz - nnz) {
    return absl::InvalidArgumentError(
        absl::StrCat("points_csr has ", values, " nonzeros after the shard's ", nnz,
                     ": past its points_csr.shard_nnz = ", shard_nnz));
  }
  absl::StatusOr<CsrMatrix<Scalar>> chunk = CsrFromProto<Scalar>(csr, d);
  if (!chunk.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the chunk from shard row ", first,
                                                   " (its row r is shard row ", first,
                                                   " + r): ", chunk.status().message()));
  }
  return chunk;
}

// An assign step's centers sent as compressed sparse rows (centers_csr: k
// rows of d, the zeros of the means of sparse points left out), made
// dense: the same values as a dense form of the centers would carry.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> CentersFromCsr(const v1::AssignStep& step, int64_t d) {
  const MatrixForms dense = wire::Centers(step);
  if (dense.float32_set() || dense.float64_set()) {
    return absl::InvalidArgumentError(
        "centers_csr and a dense centers field are both set; send one of them");
  }
  absl::StatusOr<CsrMatrix<Scalar>> rows =
      CsrFromProto<Scalar>(step.centers_csr(), d, "centers_csr");
  if (!rows.ok()) return rows.status();
  if (rows->rows() != step.k()) {
    return absl::InvalidArgumentError(
        absl::StrCat("centers_csr has ", rows->rows(), " rows for k = ", step.k(), " centers"));
  }
  return rows->ToDense();
}

}  // namespace

ResidentShard::ResidentShard(ResidentMemory* memory, const Limits& limits)
    : memory_(memory), limits_(limits) {}

ResidentShard::~ResidentShard() {
  if (reserved_ > 0) memory_->Release(reserved_);
}

int64_t ResidentShard::Bytes(int64_t n, int64_t d, bool weighted, bool count_label_changes,
                             bool float64) {
  const int64_t value = float64 ? 8 : 4;
  const int64_t per_point = value * d + StateBytesPerPoint(weighted, count_label_changes, float64);
  if (n > std::numeric_limits<int64_t>::max() / per_point) return 0;
  return n * per_point;
}

int64_t ResidentShard::SparseBytes(int64_t n, int64_t nnz, bool weighted, bool count_label_changes,
                                   bool float64) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t per_nonzero = 4 + (float64 ? 8 : 4);
  const int64_t per_point = StateBytesPerPoint(weighted, count_label_changes, float64);
  if (n >= kMax / (4 * (8 + per_point)) || nnz > kMax / (4 * per_nonzero)) return 0;
  return nnz * per_nonzero + 8 * (n + 1) + n * per_point;
}

absl::Status ResidentShard::Load(const v1::ShardChunk& chunk, v1::JobResponse* out) {
  const int64_t n = chunk.n(), d = chunk.d();
  const MatrixForms points = wire::Points(chunk), weights = wire::Weights(chunk);
  const bool has_weights = weights.float32_set() || weights.float64_set();
  const bool sparse_chunk = chunk.has_points_csr();
  const std::string dense_field = DensePointsField(chunk);
  if (sparse_chunk && !dense_field.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("points_csr and ", dense_field, " are both set; send one of them"));
  }
  const bool float64_chunk = points.float64_set() || weights.float64_set() ||
                             CsrIsFloat64(chunk.points_csr()) || chunk.points_shared().float64();
  const int64_t shard_nnz = chunk.points_csr().shard_nnz();
  if (reserved_ == 0) {
    // Sparse points cost their nonzeros: their d is a vocabulary's.
    const int max_d = sparse_chunk ? limits_.max_sparse_d : limits_.max_d;
    if (n < 1 || d < 1 || d > max_d) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard of n = ", n, ", d = ", d, ": needs n >= 1 and 1 <= d <= ", max_d,
                       sparse_chunk ? " (--max_sparse_d)" : " (--max_d)"));
    }
    // A sparse shard's rows hold at most d nonzeros each (columns strictly
    // increasing).
    if (sparse_chunk && (shard_nnz < 0 || shard_nnz / d + (shard_nnz % d != 0) > n)) {
      return absl::InvalidArgumentError(absl::StrCat("points_csr.shard_nnz = ", shard_nnz,
                                                     ", must be between 0 and n * d for n = ", n,
                                                     ", d = ", d));
    }
    const int64_t bytes =
        sparse_chunk
            ? SparseBytes(n, shard_nnz, has_weights, chunk.count_label_changes(), float64_chunk)
            : Bytes(n, d, has_weights, chunk.count_label_changes(), float64_chunk);
    if (bytes == 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("shard of n = ", n, " points in d = ", d, " overflows a byte count"));
    }
    if (absl::Status s = memory_->Reserve(bytes); !s.ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("shard of n = ", n, " points in d = ", d, ": ", s.message()));
    }
    reserved_ = bytes;
    n_ = n;
    d_ = d;
    weighted_ = has_weights;
    count_label_changes_ = chunk.count_label_changes();
    sparse_ = sparse_chunk;
    shard_nnz_ = shard_nnz;
    const auto make = [&](auto& state) {
      using Scalar = typename std::remove_reference_t<decltype(*state)>::ScalarType;
      state = std::make_unique<State<Scalar>>();
      if (sparse_) {
        state->csr.emplace(*CsrMatrix<Scalar>::Create(0, d, {0}, {}, {}));
        state->csr->Reserve(n, shard_nnz);
      } else {
        state->points.resize(d, n);
        state->points_pages.emplace(state->points.data(),
                                    sizeof(Scalar) * static_cast<size_t>(state->points.size()));
      }
      if (has_weights) state->weights.resize(n);
    };
    if (float64_chunk) {
      make(f64_);
    } else {
      make(f32_);
    }
  } else if (n != n_ || d != d_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a chunk says n = ", n, ", d = ", d, ", the shard's first said n = ", n_, ", d = ", d_));
  } else if (chunk.count_label_changes() != count_label_changes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a chunk says count_label_changes = ", chunk.count_label_changes() ? "true" : "false",
        ", the shard's first said ", count_label_changes_ ? "true" : "false"));
  } else if (sparse_ && !sparse_chunk) {
    return absl::InvalidArgumentError(
        absl::StrCat("a chunk carries ", !dense_field.empty() ? dense_field : "no points_csr",
                     " for a sparse shard (its first chunk came as points_csr): every chunk of "
                     "a sparse shard carries its points as points_csr"));
  } else if (!sparse_ && sparse_chunk) {
    return absl::InvalidArgumentError(
        "a chunk carries points_csr for a dense shard (its first chunk came as dense points): "
        "every chunk of one shard is sparse or none is");
  } else if (sparse_ && shard_nnz != shard_nnz_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a chunk says points_csr.shard_nnz = ", shard_nnz, ", the shard's first said ",
                     shard_nnz_));
  }
  if (has_weights && !weighted_) {
    return absl::InvalidArgumentError(
        "a chunk carries weights, but the shard's first chunk had none: weights come in every "
        "chunk or in none");
  }
  const absl::Status loaded = f64_ ? LoadInto(*f64_, chunk) : LoadInto(*f32_, chunk);
  if (!loaded.ok()) return loaded;
  out->set_points_loaded(received_);
  return absl::OkStatus();
}

template <typename Scalar>
absl::Status ResidentShard::LoadInto(State<Scalar>& state, const v1::ShardChunk& chunk) {
  constexpr bool kIsFloat64 = std::is_same_v<Scalar, double>;
  constexpr int64_t kWidth = sizeof(Scalar);
  const int64_t d = d_;
  if (absl::Status s = MatchPrecision<Scalar>(wire::Points(chunk)); !s.ok()) return s;
  const bool shared = chunk.has_points_shared();
  if (shared && chunk.points_shared().float64() != kIsFloat64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "points_shared.float64 is ", kIsFloat64 ? "false" : "true", " for a ",
        kIsFloat64 ? "float64" : "float32",
        " shard (its first chunk decided): one job's shards and steps are all float32 or all "
        "float64"));
  }
  if (absl::Status s = MatchPrecision<Scalar>(wire::Weights(chunk)); !s.ok()) return s;
  const auto& offset = chunk.points_offset();
  if (!offset.empty()) {
    if (kIsFloat64) {
      return absl::InvalidArgumentError(
          "points_offset is set for a float64 shard: a float64 shard's points come shifted");
    }
    if (sparse_) {
      return absl::InvalidArgumentError(
          "points_offset is set for a sparse shard (its points came as points_csr): shifting "
          "would fill its rows");
    }
    if (offset.size() != d) {
      return absl::InvalidArgumentError(
          absl::StrCat("points_offset has ", offset.size(), " values; expected d = ", d));
    }
    for (int l = 0; l < d; ++l) {
      if (!std::isfinite(offset[l])) {
        return absl::InvalidArgumentError(
            absl::StrCat("points_offset[", l, "] is ", offset[l], "; it must be finite"));
      }
    }
  }
  // The chunk's points, checked before any is kept: a sparse chunk's rows
  // as a matrix of their own, or a dense chunk's values in one of its
  // fields (a float32 shard's in one of four, the narrow ones widened to
  // float32 as they are kept).
  std::optional<CsrMatrix<Scalar>> rows;
  RawBytes points_raw;
  int64_t values = 0, count = 0;
  if (sparse_) {
    absl::StatusOr<CsrMatrix<Scalar>> chunk_rows = ChunkRows<Scalar>(
        chunk.points_csr(), d, received_, n_ - received_, state.csr->nnz(), shard_nnz_);
    if (!chunk_rows.ok()) return chunk_rows.status();
    count = chunk_rows->rows();
    rows.emplace(*std::move(chunk_rows));
  } else if (shared) {
    if (absl::Status s = SharedPointsAllowed(); !s.ok()) return s;
    // points_shared is the last field DensePointsField looks at.
    if (DensePointsField(chunk) != "points_shared") {
      return absl::InvalidArgumentError(
          "points_shared and another points field are both set; send one of them");
    }
    const int64_t bytes = chunk.points_shared().bytes();
    if (bytes < 0 || bytes % kWidth != 0) {
      return absl::InvalidArgumentError(absl::StrCat("points_shared names ", bytes,
                                                     " bytes, not a whole number of ",
                                                     RawName(kRawTypeOf<Scalar>), " values"));
    }
    values = bytes / kWidth;
  } else {
    absl::StatusOr<RawBytes> raw = OneForm<Scalar>(wire::Points(chunk));
    if (!raw.ok()) return raw.status();
    points_raw = *raw;
    const int64_t points_width = RawWidth(points_raw.type);
    if (points_raw.set() && points_raw.bytes->size() % points_width != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("points", RawSuffix(points_raw.type), " has ", points_raw.bytes->size(),
                       " bytes, not a whole number of ", RawName(points_raw.type), " values"));
    }
    values = points_raw.set() ? static_cast<int64_t>(points_raw.bytes->size()) / points_width
                              : chunk.points_size();
  }
  if (!rows) {
    if (values % d != 0 || values / d > n_ - received_) {
      return absl::InvalidArgumentError(
          absl::StrCat("a chunk of ", values, " values after ", received_, " of n = ", n_,
                       " points: needs a multiple of d = ", d, " and at most the points left"));
    }
    count = values / d;
  }
  // A weighted shard (its first chunk carried weights) takes a weight with
  // every point, an unweighted one none.
  RawBytes weights_raw;
  if (weighted_) {
    absl::StatusOr<RawBytes> raw = OneForm<Scalar>(wire::Weights(chunk));
    if (!raw.ok()) return raw.status();
    weights_raw = *raw;
    const int64_t bytes = weights_raw.set() ? static_cast<int64_t>(weights_raw.bytes->size()) : 0;
    if (bytes % kWidth != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights", RawSuffix(kRawTypeOf<Scalar>), " has ", bytes,
                       " bytes, not a whole number of ", RawName(kRawTypeOf<Scalar>), " values"));
    }
    const int64_t weights = weights_raw.set() ? bytes / kWidth : chunk.weights_size();
    if (weights != count) {
      return absl::InvalidArgumentError(
          absl::StrCat("a chunk of ", count, " points has ", weights,
                       " weights; a weighted shard takes one with every point"));
    }
  }
  if (rows) {
    if (absl::Status s = state.csr->Append(*rows); !s.ok()) return s;
  } else {
    Scalar* const at = state.points.data() + received_ * d;
    if (shared) {
      if (absl::Status s = ReadSharedPoints(chunk.points_shared(), at); !s.ok()) return s;
    } else if (points_raw.set()) {
      DecodeRaw(*points_raw.bytes, points_raw.type, at);
    } else if (values > 0) {
      std::copy_n(chunk.points().data(), values, at);
    }
    if (!offset.empty()) {
      Eigen::Map<Matrix<Scalar>>(at, d, count).colwise() -=
          Eigen::Map<const Vector<float>>(offset.data(), d).template cast<Scalar>();
    }
  }
  if (weighted_ && weights_raw.set()) {
    DecodeRaw(*weights_raw.bytes, kRawTypeOf<Scalar>, state.weights.data() + received_);
  } else if (weighted_ && count > 0) {
    std::copy_n(chunk.weights().data(), count, state.weights.data() + received_);
  }
  received_ += count;
  // Checked once, when complete: a NaN or a value whose squares would
  // overflow ends the job (a sparse shard's finiteness was checked chunk by
  // chunk, its magnitudes here), as does a sparse shard
  // whose chunks said another count of nonzeros. One shard may weigh 0 in
  // all; the job's coordinator checks the dataset's sum.
  if (complete()) {
    if (sparse_ && state.csr->nnz() != shard_nnz_) {
      return absl::InvalidArgumentError(
          absl::StrCat("the shard's ", n_, " points have ", state.csr->nnz(),
                       " nonzeros; its chunks said points_csr.shard_nnz = ", shard_nnz_));
    }
    if (absl::Status s = sparse_ ? ValidateSparseValues(*state.csr) : ValidatePoints(state.points);
        !s.ok()) {
      return s;
    }
    if (weighted_) {
      if (absl::Status s = ValidateWeights(state.weights, n_, /*zero_sum_allowed=*/true); !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ResidentShard::SharedPointsAllowed() const {
  if (!limits_.shared_points) {
    return absl::FailedPreconditionError(
        "points_shared: this server takes points over the wire only (--shared_points=false)");
  }
  if (!IsLocalPeer(peer_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("points_shared: this server reads shared points only from clients on its "
                     "own machine, not from ",
                     peer_.empty() ? "an unknown peer" : peer_));
  }
  return absl::OkStatus();
}

absl::Status ResidentShard::CheckComplete() const {
  if (complete()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the shard has ", received_, " of its ", n_, " points; steps need all of them"));
}

absl::Status ResidentShard::Assign(const v1::AssignStep& step, v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  // A sparse shard's assignment and sums are the same bits on any number of
  // threads (core/sparse.h): its steps take the idle ones.
  std::optional<ScopedOmpThreads> threads;
  if (sparse_) threads.emplace(StepThreads());
  return StepIsFinite(f64_ ? AssignIn(*f64_, step, out) : AssignIn(*f32_, step, out), *out);
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ResidentShard::StepCentersOf(const v1::AssignStep& step) const {
  const int d = static_cast<int>(d_);
  if (step.k() < 1 || step.k() > limits_.max_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", step.k(), ", must be between 1 and ", limits_.max_k));
  }
  if (absl::Status s = MatchPrecision<Scalar>(wire::Centers(step)); !s.ok()) return s;
  absl::StatusOr<Matrix<Scalar>> centers =
      step.has_centers_csr() ? CentersFromCsr<Scalar>(step, d)
                             : ReadMatrix<Scalar>(wire::Centers(step), "k", step.k(), d);
  if (!centers.ok()) return centers.status();
  if (absl::Status s = ValidateCenterValues(*centers, d); !s.ok()) return s;
  return centers;
}

template <typename Scalar>
double ResidentShard::AssignAll(State<Scalar>& state, const Matrix<Scalar>& centers, bool objective,
                                Labels* labels, ClusterSums* sums, int64_t* settled) {
  const int k = static_cast<int>(centers.cols());
  const Vector<Scalar>* weights = state.weights_or_null();
  // The steps of a job assign the same points to centers that move a little
  // each time: the bounds keep most points' labels without their distances
  // to the other centers, with the labels and objective of AssignNearest to
  // the last bit, where the centers' separations they compute may pay
  // (SeparationsMayPay); where the bounds may pay (BoundsMayPay, as a
  // request's run decides), the sums are exact and follow the points that
  // changed cluster alone (core/exact_sums.h). A step of another k starts
  // them afresh. A sparse shard's steps score every center from the
  // nonzeros, the distances taken from the scores (O(1) a point, not O(d)).
  if (state.csr) {
    return AssignNearestSparse(*state.csr, centers, labels, nullptr, sums, weights,
                               SparseDistances::kProduct);
  }
  if (state.assignment == nullptr || state.assignment_k != k) {
    const int64_t n = state.points.cols();
    const bool bounded = k <= kMostBoundedClusters && SeparationsMayPay(n, k);
    state.assignment = std::make_unique<BoundedAssignment<Scalar>>(
        state.points, weights, bounded ? AssignmentPath::kAuto : AssignmentPath::kProducts,
        bounded && BoundsMayPay(n, k));
    state.assignment_k = k;
  }
  const double value = state.assignment->Assign(centers, labels, sums, objective);
  if (state.assignment->stats().back().bounded) *settled = state.assignment->stats().back().settled;
  return value;
}

template <typename Scalar>
absl::Status ResidentShard::AssignIn(State<Scalar>& state, const v1::AssignStep& step,
                                     v1::JobResponse* out) {
  const int d = static_cast<int>(d_);
  if (step.farthest() < 0 || step.farthest() > step.k()) {
    return absl::InvalidArgumentError(
        absl::StrCat("farthest = ", step.farthest(), ", must be between 0 and k = ", step.k(),
                     " (relocation takes at most one point per empty cluster)"));
  }
  absl::StatusOr<Matrix<Scalar>> centers = StepCentersOf<Scalar>(step);
  if (!centers.ok()) return centers.status();
  if (step.sparse_sums() && !state.csr) return SparseSumsOnADenseShard("assign");
  Labels labels;
  const Vector<Scalar>* weights = state.weights_or_null();
  if (state.csr && step.sparse_sums()) {
    absl::StatusOr<double> objective =
        AssignWithSparseSums(*state.csr, weights, *centers, &labels, out);
    if (!objective.ok()) return objective.status();
    out->set_objective(step.omit_objective() ? std::numeric_limits<double>::quiet_NaN()
                                             : *objective);
  } else {
    ClusterSums sums(d, step.k());
    int64_t settled = -1;
    const double objective =
        AssignAll(state, *centers, !step.omit_objective(), &labels, &sums, &settled);
    out->set_objective(step.omit_objective() ? std::numeric_limits<double>::quiet_NaN()
                                             : objective);
    if (settled >= 0) out->set_points_settled_by_bounds(settled);
    PutSums(sums, weights != nullptr, out);
  }
  if (count_label_changes_ && last_labels_.size() == labels.size()) {
    out->set_labels_changed(LabelsChanged(labels, last_labels_));
    out->set_labels_compared(true);
  }
  if (step.farthest() > 0) {
    std::vector<Scalar> distances;
    const std::vector<int64_t> far = state.WithPoints([&](const auto& points) {
      return FarthestPoints(points, weights, labels, *centers, step.farthest(), &distances);
    });
    for (const int64_t i : far) {
      out->add_far_indices(i);
      out->add_far_labels(labels[i]);
      out->add_far_weights(weights != nullptr ? (*weights)[i] : 1.0);
    }
    out->mutable_far_distances()->Add(distances.begin(), distances.end());
    const Matrix<Scalar> rows = state.Gather(far.data(), static_cast<Eigen::Index>(far.size()));
    WriteMatrix(rows, wire::FarPoints(out));
  }
  if (step.return_labels()) out->mutable_labels()->Add(labels.begin(), labels.end());
  if (count_label_changes_) last_labels_ = std::move(labels);
  return absl::OkStatus();
}

absl::Status ResidentShard::LloydSteps(const v1::LloydStepsStep& step, const StopCheck& check,
                                       v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  return StepIsFinite(
      f64_ ? LloydStepsIn(*f64_, step, check, out) : LloydStepsIn(*f32_, step, check, out), *out);
}

template <typename Scalar>
absl::Status ResidentShard::LloydStepsIn(State<Scalar>& state, const v1::LloydStepsStep& step,
                                         const StopCheck& check, v1::JobResponse* out) {
  if (step.iterations() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("iterations = ", step.iterations(), ", must be at least 0"));
  }
  if (std::isnan(step.center_tol())) {
    return absl::InvalidArgumentError("center_tol is NaN: a shift is compared with it");
  }
  absl::StatusOr<Matrix<Scalar>> centers = StepCentersOf<Scalar>(step.start());
  if (!centers.ok()) return centers.status();
  const int d = static_cast<int>(d_), k = step.start().k();
  const Vector<Scalar>* weights = state.weights_or_null();
  const double largest_weight = weights != nullptr ? weights->maxCoeff() : 0.0;
  const LloydRules rules{.iterations = step.iterations(),
                         .center_tol = step.center_tol(),
                         .relocate = step.relocate(),
                         .iteration_objectives = step.iteration_objectives()};
  Labels labels, previous;
  // Each assignment as an assign step makes it (AssignAll), its labels
  // compared with the step's before where the shard counts label changes,
  // and its numbers checked as a step's answer is (FiniteStep).
  const LloydAssign<Scalar> assign = [&](const Matrix<Scalar>& at, bool,
                                         bool objective) -> absl::StatusOr<LloydAssignment> {
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    // A job's only shard computes on the cores nothing else is using; the
    // answers do not depend on it.
    std::optional<ScopedOmpThreads> threads;
    if (state.csr) threads.emplace(StepThreads());
    LloydAssignment a{.sums = ClusterSums(d, k)};
    int64_t settled = -1;
    previous.swap(labels);
    a.objective = AssignAll(state, at, objective, &labels, &a.sums, &settled);
    // Float32 points and weights cannot take a double sum past its range;
    // float64 ones can, and the objective's float distances can overflow.
    const bool finite =
        !std::isinf(a.objective) &&
        (!std::is_same_v<Scalar, double> ||
         (a.sums.sums.allFinite() && std::all_of(a.sums.weights.begin(), a.sums.weights.end(),
                                                 [](double w) { return std::isfinite(w); })));
    if (!finite) return StepOverflow(largest_weight);
    a.compared = count_label_changes_ && previous.size() == labels.size();
    if (a.compared) a.changed = LabelsChanged(labels, previous);
    return a;
  };
  const LloydRelocate<Scalar> relocate = [&](const Matrix<Scalar>& at,
                                             ClusterSums* sums) -> absl::StatusOr<int64_t> {
    int64_t moved = 0;
    state.WithPoints([&](const auto& points) {
      return RelocateEmptyClusters(points, weights, labels, at, sums, &moved);
    });
    return moved;
  };
  LloydTrajectory<Scalar> trajectory;
  trajectory.centers = *std::move(centers);
  if (absl::Status s = RunLloydSteps<Scalar>(rules, assign, relocate, {}, &trajectory); !s.ok()) {
    return s;
  }
  v1::LloydStepsAnswer* answer = out->mutable_lloyd();
  WriteMatrix(trajectory.centers, wire::Centers(answer));
  answer->set_initial_objective(trajectory.initial_objective);
  answer->mutable_objectives()->Add(trajectory.objectives.begin(), trajectory.objectives.end());
  answer->mutable_labels_changed()->Add(trajectory.labels_changed.begin(),
                                        trajectory.labels_changed.end());
  answer->set_iterations_run(trajectory.iterations_run);
  answer->set_convergence(ConvergenceReasonOf(trajectory.convergence));
  answer->set_empty_cluster_events(trajectory.empty_cluster_events);
  answer->set_relocations(trajectory.relocations);
  answer->mutable_iteration_seconds()->Add(trajectory.iteration_seconds.begin(),
                                           trajectory.iteration_seconds.end());
  answer->set_labels_seconds(trajectory.labels_seconds);
  out->set_objective(trajectory.objective);
  out->mutable_center_counts()->Add(trajectory.counts.begin(), trajectory.counts.end());
  if (step.start().return_labels()) out->mutable_labels()->Add(labels.begin(), labels.end());
  if (count_label_changes_) last_labels_ = std::move(labels);
  return absl::OkStatus();
}

absl::Status ResidentShard::Seed(const v1::SeedStep& step, v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  return SeedingStepIsFinite(f64_ ? SeedIn(*f64_, step, out) : SeedIn(*f32_, step, out), *out);
}

template <typename Scalar>
absl::Status ResidentShard::SeedIn(State<Scalar>& state, const v1::SeedStep& step,
                                   v1::JobResponse* out) {
  SeedRequest<Scalar> request;
  absl::StatusOr<Matrix<Scalar>> add = ReadRows<Scalar>(wire::AddCenters(step), d_);
  if (!add.ok()) return add.status();
  absl::StatusOr<Matrix<Scalar>> candidates = ReadRows<Scalar>(wire::Candidates(step), d_);
  if (!candidates.ok()) return candidates.status();
  request.add = *std::move(add);
  request.candidates = *std::move(candidates);
  request.indices.assign(step.point_indices().begin(), step.point_indices().end());
  request.targets.assign(step.draw_targets().begin(), step.draw_targets().end());
  absl::StatusOr<SeedAnswer<Scalar>> answer = state.Seeding().Step(request);
  if (!answer.ok()) return answer.status();
  out->set_potential(answer->potential);
  WriteMatrix(answer->points, wire::Points(out));
  out->mutable_candidate_potentials()->Add(answer->candidate_potentials.begin(),
                                           answer->candidate_potentials.end());
  return absl::OkStatus();
}

absl::Status ResidentShard::KMeansParallel(const v1::KMeansParallelStep& step,
                                           v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  return SeedingStepIsFinite(
      f64_ ? KMeansParallelIn(*f64_, step, out) : KMeansParallelIn(*f32_, step, out), *out);
}

template <typename Scalar>
absl::Status ResidentShard::KMeansParallelIn(State<Scalar>& state,
                                             const v1::KMeansParallelStep& step,
                                             v1::JobResponse* out) {
  absl::StatusOr<Matrix<Scalar>> add = ReadRows<Scalar>(wire::AddCenters(step), d_);
  if (!add.ok()) return add.status();
  SeedingShard<Scalar>& seeding = state.Seeding();
  // Checked before the distances change, so that a refused step leaves them.
  if (step.oversampling() != 0) {
    if (!std::isfinite(step.oversampling()) || step.oversampling() < 0 ||
        !std::isfinite(step.potential()) || step.potential() < 0 || step.round() < 0 ||
        step.first_point() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("oversampling ", step.oversampling(), ", potential ", step.potential(),
                       ", round ", step.round(), ", first_point ", step.first_point(),
                       ": oversampling and potential must be finite, none may be negative"));
    }
    if (add->cols() == 0 && !seeding.seeded()) {
      return absl::FailedPreconditionError(
          "sampling needs a center taken into the distances first (add_centers)");
    }
  }
  absl::StatusOr<double> potential = seeding.AddCenters(*add);
  if (!potential.ok()) return potential.status();
  out->set_potential(*potential);
  if (step.return_weights()) {
    const std::vector<double> weights = seeding.TakenCenterWeights();
    out->mutable_candidate_weights()->Add(weights.begin(), weights.end());
  }
  if (step.oversampling() == 0) return absl::OkStatus();
  absl::StatusOr<std::vector<int64_t>> taken = seeding.Oversample(
      step.oversampling(), step.potential(), step.seed(), step.round(), step.first_point());
  if (!taken.ok()) return taken.status();
  const Matrix<Scalar> sampled =
      state.Gather(taken->data(), static_cast<Eigen::Index>(taken->size()));
  out->mutable_sampled_indices()->Add(taken->begin(), taken->end());
  WriteMatrix(sampled, wire::SampledPoints(out));
  return absl::OkStatus();
}

absl::Status ResidentShard::CandidateWeights(const v1::CandidateWeightsStep& step,
                                             v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  return StepIsFinite(
      f64_ ? CandidateWeightsIn(*f64_, step, out) : CandidateWeightsIn(*f32_, step, out), *out);
}

template <typename Scalar>
absl::Status ResidentShard::CandidateWeightsIn(State<Scalar>& state,
                                               const v1::CandidateWeightsStep& step,
                                               v1::JobResponse* out) {
  absl::StatusOr<Matrix<Scalar>> candidates = ReadRows<Scalar>(wire::Candidates(step), d_);
  if (!candidates.ok()) return candidates.status();
  const int64_t most = int64_t{kCandidatesPerCluster} * limits_.max_k;
  if (candidates->cols() < 1 || candidates->cols() > most) {
    return absl::InvalidArgumentError(absl::StrCat(candidates->cols(),
                                                   " candidates, must be between 1 and ", most,
                                                   " (", kCandidatesPerCluster, " times max_k)"));
  }
  if (absl::Status s = ValidateCenterValues(*candidates, d_); !s.ok()) return s;
  const std::vector<double> weights = state.WithPoints([&](const auto& points) {
    return NearestCandidateWeights(points, state.weights_or_null(), *candidates);
  });
  out->mutable_candidate_weights()->Add(weights.begin(), weights.end());
  return absl::OkStatus();
}

int ResidentShard::StepThreads() const {
  return step_threads_ ? step_threads_() : omp_get_max_threads();
}

absl::Status ResidentShard::SampleSums(const v1::SampleSumsStep& step, v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  // A pass over every row (the labels after a mini-batch loop on this
  // shard) takes the idle threads; a step of drawn rows keeps the caller's,
  // its job's other shards on this server likely taking the other workers.
  std::optional<ScopedOmpThreads> threads;
  if (step.all_rows()) threads.emplace(StepThreads());
  return StepIsFinite(f64_ ? SampleSumsIn(*f64_, step, out) : SampleSumsIn(*f32_, step, out), *out);
}

absl::Status ResidentShard::StepIsFinite(absl::Status step, const v1::JobResponse& out) const {
  if (!step.ok()) return step;
  // A float32 shard's values and weights, within float's range, keep its
  // sums and objective in double far inside double's (a weight times a
  // squared distance is below 1e77): only a float64 shard's can pass it.
  if (f64_ == nullptr) return absl::OkStatus();
  return FiniteStep(out, f64_->weights.size() > 0 ? f64_->weights.maxCoeff() : 0.0);
}

absl::Status ResidentShard::SeedingStepIsFinite(absl::Status step,
                                                const v1::JobResponse& out) const {
  if (!step.ok()) return step;
  // Before a center is taken into the distances the potential is infinite
  // by definition, not by overflow.
  const auto seeded = [](const auto& state) {
    return state.seeding != nullptr && state.seeding->seeded();
  };
  if (!(f64_ ? seeded(*f64_) : seeded(*f32_))) return absl::OkStatus();
  return StepIsFinite(absl::OkStatus(), out);
}

template <typename Scalar>
absl::Status ResidentShard::SampleSumsIn(State<Scalar>& state, const v1::SampleSumsStep& step,
                                         v1::JobResponse* out) {
  const int d = static_cast<int>(d_);
  const auto check_rows = [&](const google::protobuf::RepeatedField<int64_t>& rows,
                              const char* what) -> absl::Status {
    for (int i = 0; i < rows.size(); ++i) {
      if (rows[i] < 0 || rows[i] >= n_) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, "[", i, "] = ", rows[i], ", outside the shard's n = ", n_, " rows"));
      }
    }
    return absl::OkStatus();
  };
  if (step.k() < 0 || step.k() > limits_.max_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", step.k(), ", must be between 0 (fetch only) and ", limits_.max_k));
  }
  if (step.fetch_rows_size() > limits_.max_k) {
    return absl::InvalidArgumentError(
        absl::StrCat(step.fetch_rows_size(), " fetch_rows, at most max_k = ", limits_.max_k));
  }
  if (step.all_rows() && step.rows_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows has ", step.rows_size(), " rows and all_rows is set; send one of them"));
  }
  if (absl::Status s = check_rows(step.rows(), "rows"); !s.ok()) return s;
  if (absl::Status s = check_rows(step.fetch_rows(), "fetch_rows"); !s.ok()) return s;
  if (absl::Status s = MatchPrecision<Scalar>(wire::Centers(step)); !s.ok()) return s;
  if (step.sparse_sums() && !state.csr) return SparseSumsOnADenseShard("sample_sums");
  if (step.k() > 0) {
    absl::StatusOr<Matrix<Scalar>> centers =
        ReadMatrix<Scalar>(wire::Centers(step), "k", step.k(), d);
    if (!centers.ok()) return centers.status();
    if (absl::Status s = ValidateCenterValues(*centers, d); !s.ok()) return s;
    Labels labels;
    const bool sparse_sums = step.sparse_sums() && !step.omit_sums();
    ClusterSums sums(d, step.omit_sums() || sparse_sums ? 0 : step.k());
    ClusterSums* into = step.omit_sums() || sparse_sums ? nullptr : &sums;
    double objective;
    if (sparse_sums) {
      std::optional<GatheredRows<Scalar>> gathered;
      if (!step.all_rows()) {
        gathered.emplace(*state.csr, state.weights_or_null(), step.rows().data(), step.rows_size());
      }
      absl::StatusOr<double> assigned =
          gathered
              ? AssignWithSparseSums(gathered->rows, gathered->weights_or_null(), *centers, &labels,
                                     out)
              : AssignWithSparseSums(*state.csr, state.weights_or_null(), *centers, &labels, out);
      if (!assigned.ok()) return assigned.status();
      objective = *assigned;
    } else if (step.all_rows() && state.csr) {
      objective = AssignNearestSparse(*state.csr, *centers, &labels, nullptr, into,
                                      state.weights_or_null(), SparseDistances::kProduct);
    } else if (step.all_rows()) {
      objective =
          AssignNearest(state.points, *centers, &labels, nullptr, into, state.weights_or_null());
    } else {
      objective = state.WithPoints([&](const auto& points) {
        return SampleAssign(points, state.weights_or_null(), *centers, step.rows().data(),
                            step.rows_size(), &labels, into);
      });
    }
    out->set_objective(objective);
    if (into != nullptr) PutSums(sums, weighted_, out);
    if (step.return_labels()) out->mutable_labels()->Add(labels.begin(), labels.end());
  }
  const Matrix<Scalar> fetched = state.Gather(step.fetch_rows().data(), step.fetch_rows_size());
  if (fetched.cols() > 0) WriteMatrix(fetched, wire::Points(out));
  return absl::OkStatus();
}

absl::Status ResidentShard::MiniBatchSteps(const v1::MiniBatchStepsStep& step,
                                           v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  return f64_ ? MiniBatchStepsIn(*f64_, step, out) : MiniBatchStepsIn(*f32_, step, out);
}

template <typename Scalar>
absl::Status ResidentShard::MiniBatchStepsIn(State<Scalar>& state,
                                             const v1::MiniBatchStepsStep& step,
                                             v1::JobResponse* out) {
  const int d = static_cast<int>(d_), k = step.k();
  if (k < 1 || k > limits_.max_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", k, ", must be between 1 and ", limits_.max_k));
  }
  absl::StatusOr<MiniBatchState> minibatch = GetMiniBatchState(step.state(), d, k);
  if (!minibatch.ok()) return minibatch.status();
  if (absl::Status s = ValidateCenterValues(minibatch->centers, d); !s.ok()) return s;
  const MiniBatchRules rules{.k = k,
                             .batch_size = step.batch_size(),
                             .steps = step.steps(),
                             .center_tol = step.center_tol(),
                             .max_no_improvement = step.max_no_improvement(),
                             .reassignment_ratio = step.reassignment_ratio(),
                             .float64 = std::is_same_v<Scalar, double>};
  const Vector<Scalar>* weights = state.weights_or_null();
  const MiniBatchSums sums = [&](const std::vector<int64_t>& rows, const Matrix<double>& centers,
                                 double* objective) -> absl::StatusOr<ClusterSums> {
    const ScopedOmpThreads threads(StepThreads());
    ClusterSums batch(d, k);
    Labels labels;
    *objective = state.WithPoints([&](const auto& points) {
      return SampleAssign(points, weights, Matrix<Scalar>(centers.cast<Scalar>()), rows.data(),
                          static_cast<Eigen::Index>(rows.size()), &labels, &batch);
    });
    return batch;
  };
  const MiniBatchRows fetch =
      [&](const std::vector<int64_t>& rows) -> absl::StatusOr<Matrix<double>> {
    return Matrix<double>(
        state.Gather(rows.data(), static_cast<Eigen::Index>(rows.size())).template cast<double>());
  };
  if (absl::Status s = RunMiniBatchSteps(rules, n_, sums, fetch, nullptr, &*minibatch); !s.ok()) {
    return s;
  }
  PutMiniBatchState(*minibatch, out->mutable_minibatch());
  return absl::OkStatus();
}

}  // namespace kmt
