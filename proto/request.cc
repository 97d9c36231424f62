#include "proto/request.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/validation.h"
#include "proto/enum_names.h"
#include "proto/init_method.h"
#include "proto/raw_payload.h"

namespace kmt {

absl::StatusOr<Batch<float>> BatchFromRequest(const v1::ClusterRequest& r) {
  absl::StatusOr<Matrix<float>> points =
      r.points_f32().empty()
          ? PointsFromRowMajor<float>(r.points(), r.n(), r.d())
          : RawMatrix({"points", "n", r.n(), "d", r.d()}, r.points_size(), r.points_f32());
  if (!points.ok()) return points.status();
  if (r.points_offset_size() > 0) {
    if (r.points_offset_size() != r.d()) {
      return absl::InvalidArgumentError(absl::StrCat("points_offset has ", r.points_offset_size(),
                                                     " values; expected d = ", r.d()));
    }
    for (int l = 0; l < r.d(); ++l) {
      if (!std::isfinite(r.points_offset(l))) {
        return absl::InvalidArgumentError(
            absl::StrCat("points_offset[", l, "] is ", r.points_offset(l), "; it must be finite"));
      }
    }
    points->colwise() -= Eigen::Map<const Vector<float>>(r.points_offset().data(), r.d());
  }
  BatchSpec<float> spec{.points = *std::move(points),
                        .k = r.k(),
                        .layers = r.iterations(),
                        .seed = r.seed(),
                        .parameters = {r.parameters().begin(), r.parameters().end()},
                        .cluster_sums = r.return_cluster_sums(),
                        .tol = r.has_tol() ? std::optional<double>(r.tol()) : std::nullopt,
                        .n_init = std::max(1, r.n_init()),
                        .guard = r.guard()};
  if (!r.weights_f32().empty()) {
    absl::StatusOr<std::vector<float>> weights =
        RawVector({"weights", "n", r.n(), "", 1}, r.weights_size(), r.weights_f32());
    if (!weights.ok()) return weights.status();
    spec.weights = Eigen::Map<const Vector<float>>(weights->data(),
                                                   static_cast<Eigen::Index>(weights->size()));
  } else if (r.weights_size() > 0) {
    spec.weights = Eigen::Map<const Vector<float>>(r.weights().data(), r.weights_size());
  }
  if (r.n_init() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_init = ", r.n_init(), ", must be at least 1 (0: one run)"));
  }
  absl::StatusOr<EmptyClusterPolicy> empty_clusters =
      ParseEmptyClusterPolicy(EngineName<v1::EmptyClusters>(r.empty_clusters()));
  if (!empty_clusters.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty_clusters = ", r.empty_clusters(), " is not a policy"));
  }
  spec.empty_clusters = *empty_clusters;
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
  if (r.init() == v1::INIT_GIVEN) {
    if (absl::Status s = ValidateClusterCount(r.n(), r.k()); !s.ok()) return s;
    absl::StatusOr<Matrix<float>> centers =
        r.centers_f32().empty()
            ? CentersFromRowMajor<float>(r.centers(), r.k(), r.d())
            : RawMatrix({"centers", "k", r.k(), "d", r.d()}, r.centers_size(), r.centers_f32());
    if (!centers.ok()) return centers.status();
    spec.given_centers = *std::move(centers);
  } else if (r.has_init()) {
    absl::StatusOr<InitMethod> method = InitFromProto(r.init());
    if (!method.ok()) return method.status();
    spec.init = *method;
  }
  return Batch<float>::Validate(std::move(spec));
}

void FillResponse(const v1::ClusterRequest& r, const RunResult<float>& run,
                  v1::ClusterResponse* out) {
  // A d x k matrix is its k x d row-major values.
  const absl::Span<const float> centers(run.centers.data(), run.centers.size());
  if (r.raw_response()) {
    if (!r.omit_labels()) EncodeInt32(run.labels, out->mutable_labels_i32());
    EncodeFloat32(centers, out->mutable_centers_f32());
  } else {
    if (!r.omit_labels()) out->mutable_labels()->Add(run.labels.begin(), run.labels.end());
    out->mutable_centers()->Add(centers.begin(), centers.end());
  }
  out->set_objective(run.objective);
  out->set_points_offset_applied(r.points_offset_size() > 0);
  if (r.return_trajectory()) {
    out->mutable_layer_objectives()->Add(run.layer_objectives.begin(), run.layer_objectives.end());
  }
  out->set_iterations_run(run.layers_run);
  out->set_empty_cluster_events(run.empty_cluster_events);
  if (run.cluster_sums) {
    const ClusterSums& sums = *run.cluster_sums;
    out->mutable_center_counts()->Add(sums.counts.begin(), sums.counts.end());
    out->mutable_center_sums()->Add(sums.sums.data(), sums.sums.data() + sums.sums.size());
    if (r.weights_size() > 0 || !r.weights_f32().empty()) {
      out->mutable_center_weights()->Add(sums.weights.begin(), sums.weights.end());
    }
  }
  out->set_converged(run.convergence != Convergence::kNone);
  switch (run.convergence) {
    case Convergence::kNone:
      out->set_convergence(v1::CONVERGENCE_NONE);
      break;
    case Convergence::kTolerance:
      out->set_convergence(v1::CONVERGENCE_TOLERANCE);
      break;
    case Convergence::kLabelsUnchanged:
      out->set_convergence(v1::CONVERGENCE_LABELS_UNCHANGED);
      break;
  }
  out->mutable_restart_objectives()->Add(run.restart_objectives.begin(),
                                         run.restart_objectives.end());
  out->set_best_restart(run.best_restart);
  out->set_guard_learned_layers(run.guard_learned_layers);
  out->set_guard_lloyd_layers(run.guard_lloyd_layers);
  out->set_guard_lloyd_answered(run.guard_lloyd_answered);
  // Distances are k x n in the engine (a point's to every center in one
  // column), n x k row-major on the wire: the same memory.
  const absl::Span<const float> distances(run.distances.data(), run.distances.size());
  if (r.raw_response()) {
    if (!distances.empty()) EncodeFloat32(distances, out->mutable_distances_f32());
  } else {
    out->mutable_distances()->Add(distances.begin(), distances.end());
  }
}

}  // namespace kmt
