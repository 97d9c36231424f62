#include "proto/request.h"

#include "absl/strings/str_cat.h"
#include "core/validation.h"
#include "proto/init_method.h"
#include "proto/raw_payload.h"

namespace kmt {

absl::StatusOr<Batch<float>> BatchFromRequest(const v1::ClusterRequest& r) {
  absl::StatusOr<Matrix<float>> points =
      r.points_f32().empty()
          ? PointsFromRowMajor<float>(r.points(), r.n(), r.d())
          : RawMatrix({"points", "n", r.n(), "d", r.d()}, r.points_size(), r.points_f32());
  if (!points.ok()) return points.status();
  BatchSpec<float> spec{.points = *std::move(points),
                        .k = r.k(),
                        .layers = r.iterations(),
                        .seed = r.seed(),
                        .parameters = {r.parameters().begin(), r.parameters().end()},
                        .cluster_sums = r.return_cluster_sums()};
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
  if (r.return_trajectory()) {
    out->mutable_layer_objectives()->Add(run.layer_objectives.begin(), run.layer_objectives.end());
  }
  out->set_iterations_run(run.layers_run);
  out->set_empty_cluster_events(run.empty_cluster_events);
  if (run.cluster_sums) {
    const ClusterSums& sums = *run.cluster_sums;
    out->mutable_center_counts()->Add(sums.counts.begin(), sums.counts.end());
    out->mutable_center_sums()->Add(sums.sums.data(), sums.sums.data() + sums.sums.size());
  }
}

}  // namespace kmt
