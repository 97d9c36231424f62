#include "proto/request.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/validation.h"
#include "proto/csr_payload.h"
#include "proto/init_method.h"
#include "proto/job_matrices.h"
#include "proto/raw_payload.h"

namespace kmt {

namespace {

// The payload fields of each type that a request sets, in field order.
std::vector<const char*> Float32Payloads(const v1::ClusterRequest& r) {
  std::vector<const char*> set;
  if (r.points_size() > 0) set.push_back("points");
  if (r.centers_size() > 0) set.push_back("centers");
  if (r.points_f32().size() > 0) set.push_back("points_f32");
  if (r.centers_f32().size() > 0) set.push_back("centers_f32");
  if (r.weights_size() > 0) set.push_back("weights");
  if (r.weights_f32().size() > 0) set.push_back("weights_f32");
  if (r.points_offset_size() > 0) set.push_back("points_offset");
  if (!r.points_f16().empty()) set.push_back("points_f16");
  if (!r.points_bf16().empty()) set.push_back("points_bf16");
  if (!r.centers_f16().empty()) set.push_back("centers_f16");
  if (!r.centers_bf16().empty()) set.push_back("centers_bf16");
  if (!r.points_csr().values_f32().empty()) set.push_back("points_csr.values_f32");
  return set;
}

std::vector<const char*> Float64Payloads(const v1::ClusterRequest& r) {
  std::vector<const char*> set;
  if (!r.points_f64().empty()) set.push_back("points_f64");
  if (!r.centers_f64().empty()) set.push_back("centers_f64");
  if (!r.weights_f64().empty()) set.push_back("weights_f64");
  if (!r.points_offset_f64().empty()) set.push_back("points_offset_f64");
  if (!r.points_csr().values_f64().empty()) set.push_back("points_csr.values_f64");
  return set;
}

// The points, d x n, before the offset; their shape and values are left to
// Batch::Validate, as for the other payloads below.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> RequestPoints(const v1::ClusterRequest& r) {
  if constexpr (std::is_same_v<Scalar, double>) {
    return RawMatrix<double>({"points", "n", r.n(), "d", r.d()}, 0, r.points_f64());
  } else {
    // Its float32 forms (RequestPayloadType refused float64 beside them).
    return ReadMatrix<float>(
        {"points", &r.points(), &r.points_f32(), nullptr, &r.points_f16(), &r.points_bf16()}, "n",
        r.n(), r.d());
  }
}

// The offset's d values; empty when the request sets none.
template <typename Scalar>
absl::StatusOr<std::vector<Scalar>> RequestOffset(const v1::ClusterRequest& r) {
  if constexpr (std::is_same_v<Scalar, double>) {
    if (r.points_offset_f64().empty()) return std::vector<double>();
    return RawVector<double>({"points_offset", "d", r.d(), "", 1}, 0, r.points_offset_f64());
  } else {
    if (r.points_offset_size() > 0 && r.points_offset_size() != r.d()) {
      return absl::InvalidArgumentError(absl::StrCat("points_offset has ", r.points_offset_size(),
                                                     " values; expected d = ", r.d()));
    }
    return std::vector<float>(r.points_offset().begin(), r.points_offset().end());
  }
}

// The weights' n values; empty when the request sets none.
template <typename Scalar>
absl::StatusOr<std::vector<Scalar>> RequestWeights(const v1::ClusterRequest& r) {
  if constexpr (std::is_same_v<Scalar, double>) {
    if (r.weights_f64().empty()) return std::vector<double>();
    return RawVector<double>({"weights", "n", r.n(), "", 1}, 0, r.weights_f64());
  } else {
    if (r.weights_f32().empty()) return std::vector<float>(r.weights().begin(), r.weights().end());
    return RawVector({"weights", "n", r.n(), "", 1}, r.weights_size(), r.weights_f32());
  }
}

// The given centers, d x k.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> RequestCenters(const v1::ClusterRequest& r) {
  if constexpr (std::is_same_v<Scalar, double>) {
    return RawMatrix<double>({"centers", "k", r.k(), "d", r.d()}, 0, r.centers_f64());
  } else {
    return ReadMatrix<float>(
        {"centers", &r.centers(), &r.centers_f32(), nullptr, &r.centers_f16(), &r.centers_bf16()},
        "k", r.k(), r.d());
  }
}

// Values as a response's raw bytes: float64 for a double run, else float32.
void EncodeRaw(absl::Span<const float> values, std::string* f32, std::string*) {
  EncodeFloat32(values, f32);
}
void EncodeRaw(absl::Span<const double> values, std::string*, std::string* f64) {
  EncodeFloat64(values, f64);
}

// Values into a response's repeated float field, a double run's rounded.
template <typename Scalar>
void AddFloats(absl::Span<const Scalar> values, google::protobuf::RepeatedField<float>* out) {
  if constexpr (std::is_same_v<Scalar, float>) {
    out->Add(values.begin(), values.end());
  } else {
    out->Reserve(out->size() + static_cast<int>(values.size()));
    for (const Scalar v : values) out->Add(static_cast<float>(v));
  }
}

}  // namespace

bool HasFloat64Payloads(const v1::ClusterRequest& r) { return !Float64Payloads(r).empty(); }

absl::StatusOr<PayloadType> RequestPayloadType(const v1::ClusterRequest& r) {
  const std::vector<const char*> f32 = Float32Payloads(r);
  const std::vector<const char*> f64 = Float64Payloads(r);
  if (f64.empty()) return PayloadType::kFloat32;
  if (!f32.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        f32.front(), " and ", f64.front(),
        " are both set: a request's payloads are all float32 (points, centers, weights, "
        "points_offset, their _f32 bytes, or points and centers as _f16 or _bf16 bytes) or all "
        "float64 (their _f64 bytes)"));
  }
  return PayloadType::kFloat64;
}

namespace {

// The request's empty-cluster policy.
absl::StatusOr<EmptyClusterPolicy> EmptyClustersFromProto(int policy) {
  switch (policy) {
    case v1::EMPTY_CLUSTERS_KEEP:
      return EmptyClusterPolicy::kKeep;
    case v1::EMPTY_CLUSTERS_RELOCATE_FARTHEST:
      return EmptyClusterPolicy::kRelocateFarthest;
    case v1::EMPTY_CLUSTERS_SPLIT_LARGEST:
      return EmptyClusterPolicy::kSplitLargest;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("empty_clusters = ", policy, " is not a policy"));
  }
}

// What a request to a fitted model may not set, each with the field that
// sets it; the first found, or OK.
absl::Status CheckFittedRequest(const v1::ClusterRequest& r, const FittedCenters& fitted) {
  const std::string model = absl::StrCat("model '", r.model(), "' is fitted: ");
  const char* centers = r.centers_size() > 0        ? "centers"
                        : !r.centers_f32().empty()  ? "centers_f32"
                        : !r.centers_f64().empty()  ? "centers_f64"
                        : !r.centers_f16().empty()  ? "centers_f16"
                        : !r.centers_bf16().empty() ? "centers_bf16"
                                                    : nullptr;
  if (centers != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(centers, " is set; ", model, "it serves its own ", fitted.k(), " centers"));
  }
  if (r.has_init()) {
    return absl::InvalidArgumentError(
        absl::StrCat("init is set; ", model, "its ", fitted.k(), " centers start every batch"));
  }
  if (r.points_offset_size() > 0 || !r.points_offset_f64().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.points_offset_size() > 0 ? "points_offset" : "points_offset_f64",
                     " is set; ", model, "the model's own offset is subtracted"));
  }
  if (r.d() != fitted.d()) {
    return absl::InvalidArgumentError(
        absl::StrCat("d = ", r.d(), ", but ", model, "its centers have d = ", fitted.d()));
  }
  if (r.k() != 0 && r.k() != fitted.k()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "k = ", r.k(), ", but ", model, "it has k = ", fitted.k(), " centers (0 takes them)"));
  }
  return absl::OkStatus();
}

template <typename Scalar>
absl::StatusOr<Batch<Scalar>> RequestBatch(const v1::ClusterRequest& r,
                                           const FittedCenters* fitted) {
  if (fitted != nullptr) {
    if (absl::Status s = CheckFittedRequest(r, *fitted); !s.ok()) return s;
  }
  if (r.return_distances() == v1::DISTANCES_ALL) {
    const int64_t k = fitted != nullptr ? fitted->k() : r.k();
    const double bytes = static_cast<double>(r.n()) * static_cast<double>(k) * sizeof(Scalar);
    if (bytes > static_cast<double>(kMaxAllDistancesBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "return_distances = DISTANCES_ALL asks for n * k = ", r.n(), " * ", k, " distances (",
          static_cast<int64_t>(bytes), " bytes), more than a response carries (",
          kMaxAllDistancesBytes, " bytes): ask DISTANCES_NEAREST, or send fewer points a batch"));
    }
  }
  absl::StatusOr<PayloadType> type = RequestPayloadType(r);
  if (!type.ok()) return type.status();
  constexpr PayloadType kRead =
      std::is_same_v<Scalar, double> ? PayloadType::kFloat64 : PayloadType::kFloat32;
  if (*type != kRead) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request's payloads are ", *type == PayloadType::kFloat64 ? "float64" : "float32",
        "; this reads ", kRead == PayloadType::kFloat64 ? "float64" : "float32", " ones"));
  }
  absl::StatusOr<Matrix<Scalar>> points = RequestPoints<Scalar>(r);
  if (!points.ok()) return points.status();
  absl::StatusOr<std::vector<Scalar>> offset =
      fitted != nullptr ? absl::StatusOr<std::vector<Scalar>>(fitted->Offset<Scalar>())
                        : RequestOffset<Scalar>(r);
  if (!offset.ok()) return offset.status();
  if (!offset->empty()) {
    for (int l = 0; l < r.d(); ++l) {
      if (!std::isfinite((*offset)[l])) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::is_same_v<Scalar, double> ? "points_offset_f64[" : "points_offset[",
                         l, "] is ", (*offset)[l], "; it must be finite"));
      }
    }
    points->colwise() -= Eigen::Map<const Vector<Scalar>>(offset->data(), r.d());
  }
  BatchSpec<Scalar> spec{.points = *std::move(points),
                         .k = fitted != nullptr ? fitted->k() : r.k(),
                         .layers = r.iterations(),
                         .seed = r.seed(),
                         .parameters = {r.parameters().begin(), r.parameters().end()},
                         .layer_objectives = r.return_trajectory(),
                         .cluster_sums = r.return_cluster_sums(),
                         .tol = r.has_tol() ? std::optional<double>(r.tol()) : std::nullopt,
                         .n_init = std::max(1, r.n_init()),
                         .guard = r.guard()};
  absl::StatusOr<std::vector<Scalar>> weights = RequestWeights<Scalar>(r);
  if (!weights.ok()) return weights.status();
  if (fitted != nullptr && r.n() < fitted->k() && spec.points.cols() == r.n() &&
      (weights->empty() || static_cast<int64_t>(weights->size()) == r.n())) {
    // Fewer points than centers: completed with the centers themselves at
    // weight 0, which change no other point's answer, no sum and no
    // objective; RunBatch drops their answers.
    const Eigen::Index n = spec.points.cols();
    Matrix<Scalar> completed(spec.points.rows(), fitted->k());
    completed << spec.points, fitted->Centers<Scalar>().leftCols(fitted->k() - n);
    spec.points = std::move(completed);
    if (weights->empty()) weights->assign(n, Scalar(1));
    weights->resize(fitted->k(), Scalar(0));
  }
  if (!weights->empty()) {
    spec.weights = Eigen::Map<const Vector<Scalar>>(weights->data(),
                                                    static_cast<Eigen::Index>(weights->size()));
  }
  if (r.n_init() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_init = ", r.n_init(), ", must be at least 1 (0: one run)"));
  }
  absl::StatusOr<EmptyClusterPolicy> empty = EmptyClustersFromProto(r.empty_clusters());
  if (!empty.ok()) return empty.status();
  spec.empty_clusters = *empty;
  switch (r.return_distances()) {
    case v1::DISTANCES_NONE:
      break;
    case v1::DISTANCES_NEAREST:
      spec.distances = DistanceOutput::kNearest;
      break;
    case v1::DISTANCES_ALL:
      spec.distances = DistanceOutput::kAll;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("return_distances = ", r.return_distances(), " is not a choice"));
  }
  if (fitted != nullptr) {
    spec.given_centers = fitted->Centers<Scalar>();
  } else if (r.init() == v1::INIT_GIVEN) {
    absl::StatusOr<Matrix<Scalar>> centers = RequestCenters<Scalar>(r);
    if (!centers.ok()) return centers.status();
    spec.given_centers = *std::move(centers);
  } else if (r.has_init()) {
    absl::StatusOr<InitMethod> method = InitFromProto(r.init());
    if (!method.ok()) return method.status();
    spec.init = *method;
  }
  return Batch<Scalar>::Validate(std::move(spec));
}

// The first dense points field a request sets, or null.
const char* DensePointsField(const v1::ClusterRequest& r) {
  return r.points_size() > 0        ? "points"
         : !r.points_f32().empty()  ? "points_f32"
         : !r.points_f64().empty()  ? "points_f64"
         : !r.points_f16().empty()  ? "points_f16"
         : !r.points_bf16().empty() ? "points_bf16"
                                    : nullptr;
}

// What a sparse request may not ask, with the field that asks it; OK if
// nothing.
absl::Status CheckSparseRequest(const v1::ClusterRequest& r) {
  if (const char* dense = DensePointsField(r); dense != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("points_csr and ", dense, " are both set; send one of them"));
  }
  const auto refuse = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is set beside points_csr: ", why,
                     "; a request over sparse points runs exact Lloyd's from given centers, and "
                     "k-means++ and restarts over sparse points run as a resident job "
                     "(ShardChunk.points_csr)"));
  };
  if (r.points_offset_size() > 0 || !r.points_offset_f64().empty()) {
    return refuse(r.points_offset_size() > 0 ? "points_offset" : "points_offset_f64",
                  "sparse points are never shifted (the shift would fill every row)");
  }
  if (r.n_init() > 1) return refuse("n_init", "one run from the given centers");
  if (r.guard()) return refuse("guard", "exact Lloyd's needs no guard");
  if (r.return_cluster_sums()) return refuse("return_cluster_sums", "not served for sparse points");
  if (r.parameters_size() > 0) return refuse("parameters", "exact Lloyd's takes none");
  return absl::OkStatus();
}

template <typename Scalar>
absl::StatusOr<SparseBatch<Scalar>> SparseRequestBatch(const v1::ClusterRequest& r,
                                                       const FittedCenters* fitted) {
  if (fitted != nullptr) {
    if (absl::Status s = CheckFittedRequest(r, *fitted); !s.ok()) return s;
  }
  if (absl::Status s = CheckSparseRequest(r); !s.ok()) return s;
  absl::StatusOr<PayloadType> type = RequestPayloadType(r);
  if (!type.ok()) return type.status();
  if ((*type == PayloadType::kFloat64) != std::is_same_v<Scalar, double>) {
    return absl::InvalidArgumentError("the request's payloads are of the other precision");
  }
  if (r.d() < 1)
    return absl::InvalidArgumentError(absl::StrCat("d = ", r.d(), ", must be at least 1"));
  const int64_t rows = CsrRowCount(r.points_csr());
  if (rows >= 0 && rows != r.n()) {
    return absl::InvalidArgumentError(
        absl::StrCat("points_csr.indptr_i64 holds ", rows, " rows, but n = ", r.n()));
  }
  absl::StatusOr<CsrMatrix<Scalar>> points = CsrFromProto<Scalar>(r.points_csr(), r.d());
  if (!points.ok()) return points.status();
  if (absl::Status s = ValidateSparseValues(*points); !s.ok()) return s;
  if (points->rows() < 1) return absl::InvalidArgumentError("n = 0: a batch has at least 1 point");
  SparseBatch<Scalar> batch{.points = *std::move(points), .iterations = r.iterations()};
  if (r.iterations() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("iterations = ", r.iterations(), ", must be at least 0"));
  }
  if (fitted != nullptr) {
    batch.centers = fitted->Centers<Scalar>();
    const std::vector<Scalar> offset = fitted->Offset<Scalar>();
    if (!offset.empty()) {
      batch.centers.colwise() += Eigen::Map<const Vector<Scalar>>(offset.data(), fitted->d());
    }
  } else {
    if (!r.has_init() || r.init() != v1::INIT_GIVEN) {
      return absl::InvalidArgumentError(absl::StrCat(
          "init = ", r.has_init() ? v1::Init_Name(r.init()) : "unset",
          " with points_csr: a request over sparse points starts from given centers "
          "(INIT_GIVEN) or a fitted model's; k-means++ and k-means|| over sparse points run "
          "as a resident job (ShardChunk.points_csr), as kmt.KMeans and kmt cluster run them"));
    }
    if (r.k() < 1 || r.k() > r.n()) {
      return absl::InvalidArgumentError(
          absl::StrCat("k = ", r.k(), ", must be between 1 and n = ", r.n()));
    }
    absl::StatusOr<Matrix<Scalar>> centers = RequestCenters<Scalar>(r);
    if (!centers.ok()) return centers.status();
    if (absl::Status s = ValidateCenterValues(*centers, r.d()); !s.ok()) return s;
    batch.centers = *std::move(centers);
  }
  absl::StatusOr<std::vector<Scalar>> weights = RequestWeights<Scalar>(r);
  if (!weights.ok()) return weights.status();
  if (!weights->empty()) {
    batch.weights = Eigen::Map<const Vector<Scalar>>(weights->data(),
                                                     static_cast<Eigen::Index>(weights->size()));
    if (absl::Status s = ValidateWeights(batch.weights, r.n()); !s.ok()) return s;
  }
  absl::StatusOr<EmptyClusterPolicy> empty = EmptyClustersFromProto(r.empty_clusters());
  if (!empty.ok()) return empty.status();
  batch.empty_clusters = *empty;
  return batch;
}

}  // namespace

template <typename Scalar>
absl::StatusOr<SparseBatch<Scalar>> SparseBatchFromRequest(const v1::ClusterRequest& r,
                                                           const FittedCenters* fitted) {
  return SparseRequestBatch<Scalar>(r, fitted);
}

template <typename Scalar>
absl::StatusOr<Batch<Scalar>> BatchFromRequest(const v1::ClusterRequest& r) {
  return RequestBatch<Scalar>(r, nullptr);
}

template <typename Scalar>
absl::StatusOr<Batch<Scalar>> BatchFromRequest(const v1::ClusterRequest& r,
                                               const FittedCenters& fitted) {
  return RequestBatch<Scalar>(r, &fitted);
}

v1::ConvergenceReason ConvergenceReasonOf(Convergence why) {
  switch (why) {
    case Convergence::kTolerance:
      return v1::CONVERGENCE_TOLERANCE;
    case Convergence::kLabelsUnchanged:
      return v1::CONVERGENCE_LABELS_UNCHANGED;
    case Convergence::kNone:
      break;
  }
  return v1::CONVERGENCE_NONE;
}

Convergence ConvergenceOf(v1::ConvergenceReason reason) {
  switch (reason) {
    case v1::CONVERGENCE_TOLERANCE:
      return Convergence::kTolerance;
    case v1::CONVERGENCE_LABELS_UNCHANGED:
      return Convergence::kLabelsUnchanged;
    default:
      return Convergence::kNone;
  }
}

template <typename Scalar>
void FillResponse(const v1::ClusterRequest& r, const RunResult<Scalar>& run,
                  v1::ClusterResponse* out) {
  // A d x k matrix is its k x d row-major values.
  const absl::Span<const Scalar> centers(run.centers.data(), run.centers.size());
  if (r.raw_response()) {
    if (!r.omit_labels()) EncodeInt32(run.labels, out->mutable_labels_i32());
    EncodeRaw(centers, out->mutable_centers_f32(), out->mutable_centers_f64());
  } else {
    if (!r.omit_labels()) out->mutable_labels()->Add(run.labels.begin(), run.labels.end());
    AddFloats(centers, out->mutable_centers());
  }
  out->set_objective(run.objective);
  out->set_points_offset_applied(r.points_offset_size() > 0 || !r.points_offset_f64().empty());
  if (r.return_trajectory()) {
    out->mutable_layer_objectives()->Add(run.layer_objectives.begin(), run.layer_objectives.end());
  }
  out->set_iterations_run(run.layers_run);
  out->set_empty_cluster_events(run.empty_cluster_events);
  if (run.cluster_sums) {
    const ClusterSums& sums = *run.cluster_sums;
    out->mutable_center_counts()->Add(sums.counts.begin(), sums.counts.end());
    out->mutable_center_sums()->Add(sums.sums.data(), sums.sums.data() + sums.sums.size());
    if (r.weights_size() > 0 || !r.weights_f32().empty() || !r.weights_f64().empty()) {
      out->mutable_center_weights()->Add(sums.weights.begin(), sums.weights.end());
    }
  }
  out->set_converged(run.convergence != Convergence::kNone);
  out->set_convergence(ConvergenceReasonOf(run.convergence));
  out->mutable_restart_objectives()->Add(run.restart_objectives.begin(),
                                         run.restart_objectives.end());
  out->set_best_restart(run.best_restart);
  out->set_guard_learned_layers(run.guard_learned_layers);
  out->set_guard_lloyd_layers(run.guard_lloyd_layers);
  out->set_guard_lloyd_answered(run.guard_lloyd_answered);
  // Distances are k x n in the engine (a point's to every center in one
  // column), n x k row-major on the wire: the same memory.
  const absl::Span<const Scalar> distances(run.distances.data(), run.distances.size());
  if (r.raw_response()) {
    if (!distances.empty()) {
      EncodeRaw(distances, out->mutable_distances_f32(), out->mutable_distances_f64());
    }
  } else {
    AddFloats(distances, out->mutable_distances());
  }
}

#define KMT_INSTANTIATE(S)                                                                     \
  template absl::StatusOr<Batch<S>> BatchFromRequest<S>(const v1::ClusterRequest&);            \
  template absl::StatusOr<Batch<S>> BatchFromRequest<S>(const v1::ClusterRequest&,             \
                                                        const FittedCenters&);                 \
  template absl::StatusOr<SparseBatch<S>> SparseBatchFromRequest<S>(const v1::ClusterRequest&, \
                                                                    const FittedCenters*);     \
  template void FillResponse<S>(const v1::ClusterRequest&, const RunResult<S>&,                \
                                v1::ClusterResponse*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
