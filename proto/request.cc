#include "proto/request.h"

#include "absl/strings/str_cat.h"
#include "core/validation.h"

namespace kmt {

absl::StatusOr<Batch<float>> BatchFromRequest(const v1::ClusterRequest& r) {
  absl::StatusOr<Matrix<float>> points = PointsFromRowMajor<float>(r.points(), r.n(), r.d());
  if (!points.ok()) return points.status();
  BatchSpec<float> spec{.points = *std::move(points),
                        .k = r.k(),
                        .layers = r.iterations(),
                        .seed = r.seed(),
                        .beta = r.beta(),
                        .tau = r.has_tau() ? std::optional<double>(r.tau()) : std::nullopt,
                        .gamma = r.gamma(),
                        .cluster_sums = r.return_cluster_sums()};
  switch (r.init()) {
    case v1::INIT_GIVEN: {
      if (absl::Status s = ValidateClusterCount(r.n(), r.k()); !s.ok()) return s;
      absl::StatusOr<Matrix<float>> centers = CentersFromRowMajor<float>(r.centers(), r.k(), r.d());
      if (!centers.ok()) return centers.status();
      spec.given_centers = *std::move(centers);
      break;
    }
    case v1::INIT_RANDOM:
      spec.init = InitMethod::kRandomSubset;
      break;
    case v1::INIT_KMEANS_PLUS_PLUS:
      spec.init = InitMethod::kKMeansPlusPlus;
      break;
    case v1::INIT_PLAIN_KMEANS_PLUS_PLUS:
      spec.init = InitMethod::kPlainKMeansPlusPlus;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown init ", r.init()));
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
