#include "server/batch_runner.h"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/cluster_sums.h"
#include "core/empty_clusters.h"
#include "core/engine.h"
#include "core/point_moments.h"
#include "core/sparse.h"
#include "core/unit_norm.h"
#include "core/validation.h"
#include "proto/batch_error.h"
#include "proto/request.h"
#include "server/grpc_status.h"

namespace kmt {
namespace {

// " with beta = 10, ..." for the parameters a request sets, in name order.
std::string GivenParameters(const v1::ClusterRequest& r) {
  const std::map<std::string, double> given(r.parameters().begin(), r.parameters().end());
  std::string out;
  for (const auto& [name, value] : given) {
    absl::StrAppend(&out, out.empty() ? " with " : ", ", name, " = ", value);
  }
  return out;
}

absl::Status CheckLimits(const v1::ClusterRequest& r, const Limits& limits) {
  if (r.n() > limits.max_points) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n = ", r.n(), " exceeds this server's limit of ", limits.max_points, " points per batch"));
  }
  if (HasSparsePoints(r) && r.d() > limits.max_sparse_d) {
    return absl::InvalidArgumentError(absl::StrCat("d = ", r.d(),
                                                   " exceeds this server's limit of ",
                                                   limits.max_sparse_d, " for sparse points"));
  }
  if (!HasSparsePoints(r) && r.d() > limits.max_d) {
    return absl::InvalidArgumentError(
        absl::StrCat("d = ", r.d(), " exceeds this server's limit of ", limits.max_d));
  }
  if (r.k() > limits.max_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", r.k(), " exceeds this server's limit of ", limits.max_k));
  }
  // Negative iterations are the batch's own error (Batch::Validate).
  if (r.iterations() > limits.max_iterations) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iterations = ", r.iterations(), ", must be between 0 and ", limits.max_iterations));
  }
  return absl::OkStatus();
}

// The model version a batch runs, within the server's limits (a fitted
// model's k included). The version resolved now is the one the batch runs
// to its end, whatever a reload publishes meanwhile.
absl::StatusOr<std::shared_ptr<const RegistryEntry>> Served(const ModelRegistry& registry,
                                                            const Limits& limits,
                                                            const v1::ClusterRequest& r) {
  absl::StatusOr<std::shared_ptr<const RegistryEntry>> served =
      registry.Resolve(r.model(), r.model_version());
  if (!served.ok()) return served.status();
  if (absl::Status s = CheckLimits(r, limits); !s.ok()) return s;
  const FittedCenters* fitted = (*served)->fitted.get();
  if (fitted != nullptr && fitted->k() > limits.max_k) {
    return absl::InvalidArgumentError(absl::StrCat("model '", r.model(), "' has k = ", fitted->k(),
                                                   " centers, beyond this server's limit of ",
                                                   limits.max_k, " (--max_k)"));
  }
  return served;
}

// The batch, its payloads read as Scalar: the model's version, the server's
// limits, the batch, its plan, the run, each checked once.
template <typename Scalar>
absl::Status RunAs(const ModelRegistry& registry, const Limits& limits, const v1::ClusterRequest& r,
                   const StopCheck& check, v1::ClusterResponse* out) {
  absl::StatusOr<std::shared_ptr<const RegistryEntry>> served = Served(registry, limits, r);
  if (!served.ok()) return served.status();
  const ServedModel<Scalar>& model = (*served)->served<Scalar>();
  const FittedCenters* fitted = (*served)->fitted.get();
  absl::StatusOr<Batch<Scalar>> batch =
      fitted != nullptr ? BatchFromRequest<Scalar>(r, *fitted) : BatchFromRequest<Scalar>(r);
  if (!batch.ok()) return batch.status();
  absl::StatusOr<ClusterPlan<Scalar>> plan = model.Plan(*batch);
  if (!plan.ok()) return plan.status();
  if (plan->dense && r.n() > limits.max_dense_points) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n = ", r.n(), " exceeds this server's limit of ", limits.max_dense_points, " points for ",
        r.model(), GivenParameters(r), ", which runs the O(n^2) dense evaluator",
        model.exact() ? "" : "; exact models such as lloyd-onehot run any n"));
  }
  absl::StatusOr<RunResult<Scalar>> run = Cluster(*plan, check);
  if (!run.ok()) return run.status();
  if (fitted != nullptr && static_cast<int64_t>(run->labels.size()) > r.n()) {
    // The centers that completed a short batch (BatchFromRequest).
    run->labels.resize(r.n());
    if (run->distances.cols() > r.n()) {
      run->distances = run->distances.leftCols(r.n()).eval();
    }
  }
  if (fitted != nullptr && r.iterations() == 0) {
    // The model's own centers: the client has them, or asks ListModels.
    run->centers.resize(0, 0);
  } else if (fitted != nullptr) {
    // Back from the offset's coordinates, which the client never saw.
    const std::vector<Scalar> offset = fitted->Offset<Scalar>();
    if (!offset.empty()) {
      run->centers.colwise() += Eigen::Map<const Vector<Scalar>>(offset.data(), fitted->d());
    }
  }
  FillResponse(r, *run, out);
  out->set_model_version((*served)->version);
  return absl::OkStatus();
}

// A batch of sparse points (points_csr): exact Lloyd's or spherical
// k-means from the nonzeros (core/sparse.h), from the given centers or a
// fitted model's, with the engine's response fields. Another model is
// INVALID_ARGUMENT naming it.
template <typename Scalar>
absl::Status RunSparseAs(const ModelRegistry& registry, const Limits& limits,
                         const v1::ClusterRequest& r, const StopCheck& check,
                         v1::ClusterResponse* out) {
  absl::StatusOr<std::shared_ptr<const RegistryEntry>> served = Served(registry, limits, r);
  if (!served.ok()) return served.status();
  const ServedModel<Scalar>& model = (*served)->served<Scalar>();
  const FittedCenters* fitted = (*served)->fitted.get();
  // Lloyd's, or spherical k-means: the same steps on rows and centers of
  // unit norm, each center its cluster's normalized sum (the algorithm's
  // CentersFromSums).
  const Algorithm& algorithm = model.algorithm();
  const bool spherical = algorithm.unit_norm();
  if (fitted == nullptr && !(model.exact() && algorithm.UpdatesFromSums() &&
                             (algorithm.lloyd_at_defaults() || spherical))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", r.model(),
        "' with points_csr: sparse points are clustered by exact Lloyd's (lloyd-onehot, or a "
        "fitted model) or spherical k-means, not by a learned model or another variant"));
  }
  absl::StatusOr<SparseBatch<Scalar>> batch = SparseBatchFromRequest<Scalar>(r, fitted);
  if (!batch.ok()) return batch.status();
  if (spherical) {
    int64_t zero = -1;
    batch->points = ScaleRowsToUnitNorm(batch->points, &zero);
    if (zero >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("point ", zero, " has norm 0: spherical k-means needs a direction"));
    }
    if (absl::Status s = algorithm.Prepare(&batch->centers, "center"); !s.ok()) return s;
  }
  const Vector<Scalar>* weights = batch->weights.size() > 0 ? &batch->weights : nullptr;
  const Eigen::Index d = batch->centers.rows(), k = batch->centers.cols();
  RunResult<Scalar> run;
  run.centers = std::move(batch->centers);
  // scikit-learn's rule, as the dense path applies it (core/batch.h): after
  // the step whose labels equal the step's before, or whose total squared
  // shift is at most tol times the points' mean per-dimension variance.
  std::optional<double> shift_tolerance;
  if (r.has_tol()) {
    PointMoments moments;
    moments.AddSparse(batch->points.indptr().data(), batch->points.indices().data(),
                      batch->points.values().data(), batch->points.rows(), static_cast<int>(d));
    shift_tolerance = r.tol() * moments.MeanVariance();
  }
  Labels previous;
  for (int t = 0; t < batch->iterations; ++t) {
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    ClusterSums sums(static_cast<int>(d), static_cast<int>(k));
    const double objective = AssignNearestSparse(batch->points, run.centers, &run.labels, nullptr,
                                                 &sums, weights, SparseDistances::kProduct);
    // The objective after each step, as the dense path records it: this
    // assignment's is the step's before.
    if (r.return_trajectory() && t > 0) run.layer_objectives.push_back(objective);
    const Matrix<Scalar> before = shift_tolerance ? run.centers : Matrix<Scalar>();
    // The dense path's policies, in its order (core/transformer.cc).
    if (batch->empty_clusters == EmptyClusterPolicy::kRelocateFarthest) {
      run.empty_cluster_events +=
          RelocateEmptyClusters(batch->points, weights, run.labels, run.centers, &sums);
      algorithm.CentersFromSums(sums, &run.centers);
    } else {
      run.empty_cluster_events += algorithm.CentersFromSums(sums, &run.centers);
      if (batch->empty_clusters == EmptyClusterPolicy::kSplitLargest) {
        SplitLargestClusters(&sums, &run.centers);
      }
    }
    run.layers_run = t + 1;
    if (shift_tolerance) {
      if (t > 0 && run.labels == previous) {
        run.convergence = Convergence::kLabelsUnchanged;
        break;
      }
      if ((run.centers - before).template cast<double>().squaredNorm() <= *shift_tolerance) {
        run.convergence = Convergence::kTolerance;
        break;
      }
      previous = run.labels;
    }
  }
  Vector<Scalar> own;
  run.objective = AssignNearestSparse(batch->points, run.centers, &run.labels, &own, nullptr,
                                      weights, SparseDistances::kProduct);
  if (r.return_trajectory() && run.layers_run > 0) run.layer_objectives.push_back(run.objective);
  if (r.return_distances() == v1::DISTANCES_NEAREST) {
    run.distances = own.transpose();
  } else if (r.return_distances() == v1::DISTANCES_ALL) {
    run.distances = SparseSquaredDistances(batch->points, run.centers);
  }
  if (absl::Status s =
          ValidateAnswer(run.objective, run.centers, batch->weights, r.model(), /*exact=*/true);
      !s.ok()) {
    return s;
  }
  if (fitted != nullptr && r.iterations() == 0) run.centers.resize(0, 0);
  FillResponse(r, run, out);
  out->set_model_version((*served)->version);
  return absl::OkStatus();
}

}  // namespace

v1::ClusterResponse ErrorResponse(const v1::ClusterRequest& request, const absl::Status& status) {
  v1::ClusterResponse response;
  response.set_request_id(request.request_id());
  response.set_model(request.model());
  *response.mutable_error() = ToBatchError(status);
  return response;
}

v1::ClusterResponse RunBatch(const ModelRegistry& registry, const Limits& limits,
                             const v1::ClusterRequest& request, const StopCheck& check) {
  const auto start = std::chrono::steady_clock::now();
  v1::ClusterResponse response;
  absl::Status status = check ? check() : absl::OkStatus();
  // The payloads' precision is the batch's; BatchFromRequest checks them.
  // A batch that throws (memory it could not allocate) fails alone, not
  // the process.
  if (status.ok()) {
    status = Handled([&] {
      if (HasSparsePoints(request)) {
        return HasFloat64Payloads(request)
                   ? RunSparseAs<double>(registry, limits, request, check, &response)
                   : RunSparseAs<float>(registry, limits, request, check, &response);
      }
      return HasFloat64Payloads(request)
                 ? RunAs<double>(registry, limits, request, check, &response)
                 : RunAs<float>(registry, limits, request, check, &response);
    });
  }
  if (!status.ok()) response = ErrorResponse(request, status);
  response.set_request_id(request.request_id());
  response.set_model(request.model());
  response.mutable_timing()->set_compute_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return response;
}

}  // namespace kmt
