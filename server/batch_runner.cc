#include "server/batch_runner.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/transformer.h"
#include "core/validation.h"

namespace kmt {
namespace {

// Error messages travel to clients; a long one is cut here.
constexpr size_t kMaxMessageBytes = 1024;

// Per-dimension affine map of a batch onto [0, 1] (a learned model's input
// scaling); a constant dimension maps to 0.
struct MinMax {
  Vector<float> lo, range;

  explicit MinMax(const Matrix<float>& points)
      : lo(points.rowwise().minCoeff()),
        range(points.rowwise().maxCoeff() - lo) {}
  Matrix<float> Apply(const Matrix<float>& m) const {
    const Vector<float> inv = range.unaryExpr(
        [](float r) { return r > 0 ? 1.0f / r : 0.0f; });
    return ((m.colwise() - lo).array().colwise() * inv.array()).matrix();
  }
  Matrix<float> Invert(const Matrix<float>& m) const {
    return ((m.array().colwise() * range.array()).matrix()).colwise() + lo;
  }
};

absl::Status CheckLimits(const v1::ClusterRequest& r, const Limits& limits) {
  if (r.n() > limits.max_points) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n = ", r.n(), " exceeds this server's limit of ", limits.max_points,
        " points per batch"));
  }
  if (r.d() > limits.max_d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "d = ", r.d(), " exceeds this server's limit of ", limits.max_d));
  }
  if (r.k() > limits.max_k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "k = ", r.k(), " exceeds this server's limit of ", limits.max_k));
  }
  if (r.iterations() < 0 || r.iterations() > limits.max_iterations) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iterations = ", r.iterations(), ", must be between 0 and ",
        limits.max_iterations));
  }
  return absl::OkStatus();
}

// Initial centers; random and k-means++ draw from `points`.
absl::StatusOr<Matrix<float>> Centers(const v1::ClusterRequest& r,
                                      const Matrix<float>& points, const StopCheck& check) {
  switch (r.init()) {
    case v1::INIT_GIVEN:
      return CentersFromRowMajor<float>(r.centers(), r.k(), r.d());
    case v1::INIT_RANDOM:
      return InitialCenters(points, r.k(), InitMethod::kRandomSubset, r.seed());
    case v1::INIT_KMEANS_PLUS_PLUS:
      return InitialCenters(points, r.k(), InitMethod::kKMeansPlusPlus, r.seed(), check);
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown init ", r.init()));
  }
}

absl::Status Run(const ModelRegistry& registry, const Limits& limits,
                 const v1::ClusterRequest& r, const StopCheck& check,
                 v1::ClusterResponse* out) {
  const ServedModel* served = registry.Find(r.model());
  if (served == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "unknown model '", r.model(), "'; ListModels names the ",
        registry.models().size(), " models served"));
  }
  if (absl::Status s = CheckLimits(r, limits); !s.ok()) return s;
  absl::StatusOr<Matrix<float>> points = PointsFromRowMajor<float>(r.points(), r.n(), r.d());
  if (!points.ok()) return points.status();
  if (served->learned() && (r.d() != served->model->d || r.k() != served->model->k)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", r.model(), " was trained for d = ", served->model->d, ", k = ",
        served->model->k, "; the batch has d = ", r.d(), ", k = ", r.k()));
  }
  if (absl::Status s = ValidateClusterCount(r.n(), r.k()); !s.ok()) return s;
  if (std::isnan(r.beta()) || r.beta() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("beta = ", r.beta(), ", must be 0 (hardmax) or positive"));
  }
  if (served->learned() && r.beta() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "beta applies to the exact models; ", r.model(), " is learned"));
  }
  const bool dense = served->learned() ? !served->fast : r.beta() > 0;
  if (dense && r.n() > limits.max_dense_points) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n = ", r.n(), " exceeds this server's limit of ", limits.max_dense_points,
        " points for ", r.model(), r.beta() > 0 ? " with beta > 0" : "",
        ", which runs the O(n^2) dense evaluator"));
  }
  // A learned model with input scaling sees the batch mapped onto [0, 1]
  // and starts from centers chosen (or given, then mapped) in that space.
  std::optional<MinMax> scaling;
  Matrix<float> scaled;
  const Matrix<float>* model_points = &*points;
  if (served->min_max_scaling) {
    scaling.emplace(*points);
    scaled = scaling->Apply(*points);
    model_points = &scaled;
  }
  absl::StatusOr<Matrix<float>> init = Centers(r, *model_points, check);
  if (!init.ok()) return init.status();
  if (scaling && r.init() == v1::INIT_GIVEN) *init = scaling->Apply(*init);

  const RunOptions options{
      .layers = r.iterations(),
      .record_trajectory = scaling && r.return_trajectory(),
      .before_layer = [&check](int) { return check(); }};
  absl::StatusOr<RunResult<float>> run;
  if (scaling) {
    run = RunTransformer(*served->model, scaled, *init, options);
    if (run.ok()) {
      // Report in the caller's units: centers mapped back, then labels and
      // objectives against the original points.
      run->centers = scaling->Invert(run->centers);
      Vector<float> sq_dist;
      AssignNearest(*points, run->centers, &run->labels, &sq_dist);
      run->objective = sq_dist.cast<double>().sum();
      for (size_t t = 0; t < run->trajectory.size(); ++t) {
        run->layer_objectives[t] =
            Objective(*points, scaling->Invert(run->trajectory[t].centers));
      }
    }
  } else if (served->learned()) {
    run = RunTransformer(*served->model, *points, *init, options);
  } else {
    LloydOptions lloyd = served->lloyd;
    lloyd.beta = r.beta() > 0 ? r.beta() : std::numeric_limits<double>::infinity();
    run = RunLloyd(lloyd, *points, *init, options);
  }
  if (!run.ok()) return run.status();

  if (!r.omit_labels()) out->mutable_labels()->Add(run->labels.begin(), run->labels.end());
  out->mutable_centers()->Add(run->centers.data(), run->centers.data() + run->centers.size());
  out->set_objective(run->objective);
  if (r.return_trajectory()) {
    out->mutable_layer_objectives()->Add(run->layer_objectives.begin(),
                                         run->layer_objectives.end());
  }
  out->set_iterations_run(run->layers_run);
  out->set_empty_cluster_events(run->empty_cluster_events);
  if (r.return_cluster_sums()) {
    ClusterSums sums(r.d(), r.k());
    AccumulateClusterSums(*points, run->labels, &sums);
    out->mutable_center_counts()->Add(sums.counts.begin(), sums.counts.end());
    out->mutable_center_sums()->Add(sums.sums.data(), sums.sums.data() + sums.sums.size());
  }
  return absl::OkStatus();
}

}  // namespace

v1::ClusterResponse ErrorResponse(const v1::ClusterRequest& request,
                                  const absl::Status& status) {
  v1::ClusterResponse response;
  response.set_request_id(request.request_id());
  response.set_model(request.model());
  response.mutable_error()->set_code(static_cast<int>(status.code()));
  response.mutable_error()->set_message(
      std::string(status.message().substr(0, kMaxMessageBytes)));
  return response;
}

v1::ClusterResponse RunBatch(const ModelRegistry& registry, const Limits& limits,
                             const v1::ClusterRequest& request,
                             const StopCheck& check) {
  const auto start = std::chrono::steady_clock::now();
  v1::ClusterResponse response;
  absl::Status status = check();
  if (status.ok()) status = Run(registry, limits, request, check, &response);
  if (!status.ok()) response = ErrorResponse(request, status);
  response.set_request_id(request.request_id());
  response.set_model(request.model());
  response.mutable_timing()->set_compute_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return response;
}

}  // namespace kmt
