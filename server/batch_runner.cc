#include "server/batch_runner.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/engine.h"
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
  if (r.d() > limits.max_d) {
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

// The batch, its payloads read as Scalar: the model's version, the server's
// limits, the batch, its plan, the run, each checked once.
template <typename Scalar>
absl::Status RunAs(const ModelRegistry& registry, const Limits& limits, const v1::ClusterRequest& r,
                   const StopCheck& check, v1::ClusterResponse* out) {
  // The version resolved now is the one this batch runs to its end, whatever
  // a reload publishes meanwhile.
  absl::StatusOr<std::shared_ptr<const RegistryEntry>> served =
      registry.Resolve(r.model(), r.model_version());
  if (!served.ok()) return served.status();
  if (absl::Status s = CheckLimits(r, limits); !s.ok()) return s;
  const ServedModel<Scalar>& model = (*served)->served<Scalar>();
  const FittedCenters* fitted = (*served)->fitted.get();
  if (fitted != nullptr && fitted->k() > limits.max_k) {
    return absl::InvalidArgumentError(absl::StrCat("model '", r.model(), "' has k = ", fitted->k(),
                                                   " centers, beyond this server's limit of ",
                                                   limits.max_k, " (--max_k)"));
  }
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
