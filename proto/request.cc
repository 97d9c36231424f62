#include "proto/request.h"

#include "absl/strings/str_cat.h"
#include "core/validation.h"
#include "proto/init_method.h"

namespace kmt {

absl::StatusOr<Batch<float>> BatchFromRequest(const v1::ClusterRequest& r) {
  absl::StatusOr<Matrix<float>> points = PointsFromRowMajor<float>(r.points(), r.n(), r.d());
  if (!points.ok()) return points.status();
  BatchSpec<float> spec{.points = *std::move(points),
                        .k = r.k(),
                        .layers = r.iterations(),
                        .seed = r.seed(),
                        .parameters = {r.parameters().begin(), r.parameters().end()},
                        .cluster_sums = r.return_cluster_sums()};
  if (r.init() == v1::INIT_GIVEN) {
    if (absl::Status s = ValidateClusterCount(r.n(), r.k()); !s.ok()) return s;
    absl::StatusOr<Matrix<float>> centers = CentersFromRowMajor<float>(r.centers(), r.k(), r.d());
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
  if (!r.omit_labels()) out->mutable_labels()->Add(run.labels.begin(), run.labels.end());
  out->mutable_centers()->Add(run.centers.data(), run.centers.data() + run.centers.size());
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
