// kmt._driver: the resident-job driver (client/resident_job.h) and the C++
// client's Cluster streams (client/cluster_client.h) under the Python
// package, so that kmt.KMeans, kmt.fit_resident and kmt.dask run the
// algorithm the CLI runs, and the estimators' batches travel as the CLI's
// do. Four entry points, `minibatch_update` and `minibatch_reassigns` for
// MiniBatchKMeans.partial_fit's steps (the rules of core/minibatch.h), and
// `column_means` for the estimators' checks of their data: `fit` loads points this process holds
// onto replicas (ReplicaShards; a CSR matrix's arrays, `csr`, as sparse shards, in both fits) and
// runs the job;
// `minibatch_fit` loads them and runs mini-batch k-means' steps (client/minibatch_job.h); `drive`
// runs the job over shards a Python object holds (kmt.dask's workers), whose steps cross as
// serialized JobRequest and JobResponse messages (sparse=True: sparse shards, their sums asked as
// rows), each shard loaded and stepped on the C++ client's stream (`Replica.load`, a `Shard`:
// client/shard_stream.h) and its seeding steps kept for a reload by `replays_of`;
// `Client.cluster` streams ClusterRequests
// (kmt.Client.cluster_each). Each releases the GIL while it runs; Python callbacks take it back. A
// float64 job (float64=True) takes its points, weights and starts as float64, loads float64 shards
// and answers float64 centers.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/allocator.h"
#include "client/cluster_client.h"
#include "client/minibatch_job.h"
#include "client/replica_shards.h"
#include "client/resident_job.h"
#include "client/shard_stream.h"
#include "core/narrow_float.h"
#include "core/sparse.h"
#include "proto/request.h"
#include "proto/transport_security.h"

namespace py = pybind11;

namespace kmt {
namespace {

// A job's failure as Python sees it: kmt._driver.Error(code, message), the
// code absl's (gRPC's) number; a shard's whose replica is gone (ReplicaGone)
// kmt._driver.ReplicaFailed, an Error.
PyObject* error_type = nullptr;
PyObject* replica_failed_type = nullptr;

[[noreturn]] void Raise(const absl::Status& status, PyObject* type = error_type) {
  py::object error = py::reinterpret_borrow<py::object>(type)(static_cast<int>(status.code()),
                                                              std::string(status.message()));
  PyErr_SetObject(type, error.ptr());
  throw py::error_already_set();
}

// The first Python exception a callback raised during a job; the job then
// fails and the exception is raised again in place of its status.
struct PythonFailure {
  std::optional<py::error_already_set> error;

  absl::Status Keep(py::error_already_set&& e) {
    if (!error) error.emplace(std::move(e));
    return absl::AbortedError("a Python callback raised");
  }
  void RaiseIfAny() {
    if (error) {
      py::gil_scoped_acquire gil;
      error->restore();
      error.reset();
      throw py::error_already_set();
    }
  }
};

ResidentSeeding SeedingNamed(const std::string& name) {
  if (name == "kmeans++") return ResidentSeeding::kGreedyKMeansPlusPlus;
  if (name == "plain-kmeans++") return ResidentSeeding::kPlainKMeansPlusPlus;
  if (name == kKMeansParallelName) return ResidentSeeding::kKMeansParallel;
  if (name == "random") return ResidentSeeding::kRandom;
  throw py::value_error("init '" + name +
                        "': expected kmeans++, plain-kmeans++, kmeans|| or random");
}

template <typename Scalar>
using Array = py::array_t<Scalar, py::array::c_style | py::array::forcecast>;

// Given starts, shape (r, k, d), as d x k matrices of Scalar.
template <typename Scalar>
std::vector<Matrix<Scalar>> StartsOf(const py::array& given, int d, int k) {
  const Array<Scalar> starts = Array<Scalar>::ensure(given);
  if (!starts || starts.ndim() != 3 || starts.shape(1) != k || starts.shape(2) != d) {
    throw py::value_error("starts must have shape (r, k, d) = (r, " + std::to_string(k) + ", " +
                          std::to_string(d) + ")");
  }
  std::vector<Matrix<Scalar>> out;
  for (py::ssize_t r = 0; r < starts.shape(0); ++r) {
    // Row-major (k, d) is column-major d x k.
    out.push_back(Eigen::Map<const Matrix<Scalar>>(starts.data(r, 0, 0), d, k));
  }
  return out;
}

// A vector argument `name` of shape (length,), or (n,) with any length for
// length -1 (`length_name` names it), as a vector of Scalar: the weights,
// the offset.
template <typename Scalar>
std::vector<Scalar> VectorOf(const py::array& given, int64_t length, const std::string& name,
                             const std::string& length_name) {
  const Array<Scalar> values = Array<Scalar>::ensure(given);
  if (!values || values.ndim() != 1 || (length >= 0 && values.shape(0) != length)) {
    throw py::value_error(name + " must have shape (" + length_name + ",)" +
                          (length >= 0 ? " = (" + std::to_string(length) + ",)" : ""));
  }
  return std::vector<Scalar>(values.data(), values.data() + values.size());
}

template <typename Scalar>
std::vector<Scalar> WeightsOf(const py::array& given, int64_t n) {
  return VectorOf<Scalar>(given, n, "weights", "n");
}

// Ctrl-C (or another signal Python handles) ends a job between steps with
// the handler's exception, as it would a loop in Python. A callback that
// raised ends it too.
StopCheck CheckOf(PythonFailure* failure) {
  return [failure]() -> absl::Status {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) return failure->Keep(py::error_already_set());
    if (failure->error) return absl::AbortedError("a Python callback raised");
    return absl::OkStatus();
  };
}

// A job's log from a Python function of a line, or None. The callbacks
// hold handles, not references: the options are copied and destroyed where
// the GIL is released, and the objects outlive the job (the caller's
// arguments).
std::function<void(const std::string&)> LogOf(const py::object& log, PythonFailure* failure) {
  if (log.is_none()) return nullptr;
  return [log = py::handle(log), failure](const std::string& line) {
    py::gil_scoped_acquire gil;
    try {
      log(line);
    } catch (py::error_already_set& e) {
      failure->Keep(std::move(e)).IgnoreError();
    }
  };
}

// The job's options from the keyword arguments both entry points share.
ResidentJobOptions JobOptions(int d, int k, int iterations, double center_tol, uint64_t seed,
                              const std::string& init, int kmeans_parallel_rounds,
                              double kmeans_parallel_oversampling,
                              const std::string& empty_clusters, int n_init,
                              const std::optional<py::array>& starts, bool labels, bool float64,
                              bool iteration_objectives, PythonFailure* failure,
                              const py::object& log, const py::object& on_iteration) {
  ResidentJobOptions options{.k = k,
                             .iterations = iterations,
                             .center_tol = center_tol,
                             .float64 = float64,
                             .seed = seed,
                             .seeding = SeedingNamed(init),
                             .kmeans_parallel_rounds = kmeans_parallel_rounds,
                             .kmeans_parallel_oversampling = kmeans_parallel_oversampling,
                             .n_init = n_init,
                             .labels = labels,
                             .iteration_objectives = iteration_objectives};
  absl::StatusOr<EmptyClusterPolicy> policy = ParseEmptyClusterPolicy(empty_clusters);
  if (!policy.ok()) throw py::value_error(std::string(policy.status().message()));
  options.empty_clusters = *policy;
  if (starts) {
    const auto take = [&](auto matrices) {
      for (auto& m : matrices) options.starts.emplace_back(std::move(m));
    };
    if (float64) {
      take(StartsOf<double>(*starts, d, k));
    } else {
      take(StartsOf<float>(*starts, d, k));
    }
  }
  options.check = CheckOf(failure);
  options.log = LogOf(log, failure);
  if (!on_iteration.is_none()) {
    options.on_iteration = [on_iteration = py::handle(on_iteration), failure](
                               int t, double objective, double shift, Convergence why) {
      py::gil_scoped_acquire gil;
      try {
        on_iteration(t, objective, shift, static_cast<int>(ConvergenceReasonOf(why)));
      } catch (py::error_already_set& e) {
        failure->Keep(std::move(e)).IgnoreError();
      }
    };
  }
  return options;
}

// A d x k matrix as a (k, d) array.
template <typename Scalar>
py::array_t<Scalar> RowsOf(const Matrix<Scalar>& m) {
  py::array_t<Scalar> out({m.cols(), m.rows()});
  std::memcpy(out.mutable_data(), m.data(), sizeof(Scalar) * m.size());
  return out;
}

py::dict ResultDict(ResidentJobResult&& result) {
  py::dict out;
  // In the job's precision: a float64 job's in double.
  out["centers"] =
      std::visit([](const auto& c) -> py::object { return RowsOf(c); }, result.centers);
  if (!result.labels.empty()) {
    py::array_t<int32_t> labels(static_cast<py::ssize_t>(result.labels.size()));
    std::memcpy(labels.mutable_data(), result.labels.data(),
                sizeof(int32_t) * result.labels.size());
    out["labels"] = labels;
  } else {
    out["labels"] = py::none();
  }
  out["counts"] =
      py::array_t<int64_t>(static_cast<py::ssize_t>(result.counts.size()), result.counts.data());
  out["objective"] = result.objective;
  out["initial_objective"] = result.initial_objective;
  out["objectives"] = result.objectives;
  out["iterations_run"] = result.iterations_run;
  out["convergence"] = static_cast<int>(ConvergenceReasonOf(result.convergence));
  out["labels_changed"] = result.labels_changed;
  out["relocations"] = result.relocations;
  out["restart_objectives"] = result.restart_objectives;
  out["best_restart"] = result.best_restart;
  out["shards"] = result.shards;
  out["shard_moves"] = result.shard_moves;
  out["init_rounds"] = result.init_rounds;
  out["init_candidates"] = result.init_candidates;
  out["load_seconds"] = result.load_seconds;
  out["init_seconds"] = result.init_seconds;
  out["labels_seconds"] = result.labels_seconds;
  out["iteration_seconds"] = result.iteration_seconds;
  return out;
}

// Shards a Python object holds: sizes() -> list of int, round(list of
// bytes or None) -> list of bytes, restart(), the attribute `moves`, and
// labels_stay() -> bool.
class PythonShards : public ShardSet {
 public:
  PythonShards(py::object shards, PythonFailure* failure)
      : shards_(std::move(shards)), failure_(failure) {
    sizes_ = shards_.attr("sizes")().cast<std::vector<int64_t>>();
    labels_stay_ = shards_.attr("labels_stay")().cast<bool>();
  }

  std::vector<int64_t> Sizes() const override { return sizes_; }
  bool labels_stay() const override { return labels_stay_; }

  absl::StatusOr<std::vector<v1::JobResponse>> Round(
      const std::vector<std::optional<v1::JobRequest>>& requests) override {
    py::gil_scoped_acquire gil;
    try {
      py::list asked;
      for (const std::optional<v1::JobRequest>& r : requests) {
        if (r) {
          asked.append(py::bytes(r->SerializeAsString()));
        } else {
          asked.append(py::none());
        }
      }
      const py::list answered = shards_.attr("round")(asked);
      if (answered.size() != requests.size()) {
        return absl::InternalError("the shards answered " + std::to_string(answered.size()) +
                                   " steps for " + std::to_string(requests.size()));
      }
      std::vector<v1::JobResponse> answers(requests.size());
      for (size_t s = 0; s < requests.size(); ++s) {
        const std::string bytes = answered[s].cast<std::string>();
        if (!answers[s].ParseFromString(bytes)) {
          return absl::InternalError("shard " + std::to_string(s) +
                                     " answered a step that is not a JobResponse");
        }
      }
      return answers;
    } catch (py::error_already_set& e) {
      return failure_->Keep(std::move(e));
    } catch (const std::exception& e) {
      // round() gave something other than a list of bytes.
      return absl::InternalError(std::string("the shards' round answered ") + e.what());
    }
  }

  absl::Status Restart() override {
    py::gil_scoped_acquire gil;
    try {
      shards_.attr("restart")();
      return absl::OkStatus();
    } catch (py::error_already_set& e) {
      return failure_->Keep(std::move(e));
    }
  }

  int moves() const override {
    py::gil_scoped_acquire gil;
    return shards_.attr("moves").cast<int>();
  }

 private:
  py::object shards_;
  PythonFailure* failure_;
  std::vector<int64_t> sizes_;
  bool labels_stay_ = false;
};

using Starts = std::optional<py::array>;

// rows(first, end): the points [first, end) as a C-ordered Scalar array of
// shape (end - first, d), read under the GIL by the loading threads.
template <typename Scalar>
std::function<absl::Status(int64_t, int64_t, Scalar*)> RowSource(const py::object& rows,
                                                                 PythonFailure& failure, int d) {
  return [&rows, &failure, d](int64_t first, int64_t count, Scalar* out) -> absl::Status {
    py::gil_scoped_acquire gil;
    try {
      const auto block = Array<Scalar>::ensure(rows(first, first + count));
      if (!block || block.size() != count * d) {
        return absl::InvalidArgumentError(
            "rows(" + std::to_string(first) + ", " + std::to_string(first + count) +
            ") did not give that many rows of d = " + std::to_string(d) + " values");
      }
      std::copy_n(block.data(), block.size(), out);
      return absl::OkStatus();
    } catch (py::error_already_set& e) {
      return failure.Keep(std::move(e));
    }
  };
}

// A sparse source over a CSR matrix's arrays (indptr, indices, data) as
// the Python caller holds them: n + 1 int64 offsets, int32 columns and
// Scalar values, read in place (`held` keeps them for the job) by the
// loading threads without the GIL, a chunk's rows copied at a time; so this
// process holds the matrix once, as the caller does, and a chunk.
template <typename Scalar>
CsrSource<Scalar> CsrSourceOf(const py::tuple& csr, int64_t n, std::vector<py::array>* held) {
  if (csr.size() != 3) throw py::value_error("csr must be (indptr, indices, data)");
  const auto indptr = Array<int64_t>::ensure(csr[0]);
  const auto indices = Array<int32_t>::ensure(csr[1]);
  const auto values = Array<Scalar>::ensure(csr[2]);
  if (!indptr || !indices || !values || indptr.ndim() != 1 || indices.ndim() != 1 ||
      values.ndim() != 1 || indptr.shape(0) != n + 1) {
    throw py::value_error("csr must be 1-d arrays (indptr, indices, data), indptr of n + 1 = " +
                          std::to_string(n + 1) + " offsets");
  }
  const int64_t* offsets = indptr.data();
  const int64_t nnz = offsets[n];
  if (offsets[0] != 0 || indices.shape(0) < nnz || values.shape(0) < nnz) {
    throw py::value_error("csr's indptr runs from " + std::to_string(offsets[0]) + " to " +
                          std::to_string(nnz) + " over " + std::to_string(indices.shape(0)) +
                          " indices and " + std::to_string(values.shape(0)) +
                          " values; expected from 0 to at most their lengths");
  }
  held->insert(held->end(), {indptr, indices, values});
  CsrSource<Scalar> source{.indptr = std::vector<int64_t>(offsets, offsets + n + 1)};
  source.rows = [offsets, columns = indices.data(), nonzeros = values.data()](
                    int64_t first, int64_t count, CsrRows<Scalar>* out) -> absl::Status {
    const int64_t begin = offsets[first], end = offsets[first + count];
    out->indptr.resize(count + 1);
    for (int64_t i = 0; i <= count; ++i) out->indptr[i] = offsets[first + i] - begin;
    out->indices.assign(columns + begin, columns + end);
    out->values.assign(nonzeros + begin, nonzeros + end);
    return absl::OkStatus();
  };
  return source;
}

// The points of a job or shard as the Python caller gives them: the CSR
// arrays `csr` if given (sparse shards), else rows(first, end); float64 or
// float32 values. `held` keeps the arrays for the job; `failure` a callback's
// exception.
ShardSource SourceOf(const py::object& rows, const std::optional<py::tuple>& csr, int64_t n, int d,
                     bool float64, PythonFailure& failure, std::vector<py::array>* held) {
  if (csr && float64) return CsrSourceOf<double>(*csr, n, held);
  if (csr) return CsrSourceOf<float>(*csr, n, held);
  if (float64) return PointSource64(RowSource<double>(rows, failure, d));
  return PointSource(RowSource<float>(rows, failure, d));
}

// A client's TLS settings as kmt.Client's arguments give them.
ChannelSecurity SecurityOf(bool tls, const std::string& ca, const std::string& cert,
                           const std::string& key, const std::string& server_name) {
  absl::StatusOr<ChannelSecurity> security = ClientSecurity({.enabled = tls,
                                                             .ca_file = ca,
                                                             .cert_file = cert,
                                                             .key_file = key,
                                                             .server_name = server_name});
  if (!security.ok()) Raise(security.status());
  return *std::move(security);
}

// The replicas' options both fits share: the servers, the weights (in the
// job's precision), the streams and their deadline, TLS, the log.
ReplicaShardOptions ReplicasOf(const std::vector<std::string>& servers, int64_t n,
                               const std::optional<py::array>& weights, bool float64,
                               int streams_per_server, int64_t chunk_bytes, int max_moves,
                               std::optional<double> timeout, ChannelSecurity security,
                               std::function<void(const std::string&)> log) {
  ReplicaShardOptions replicas{
      .servers = servers,
      .streams_per_server = streams_per_server,
      .chunk_bytes = chunk_bytes,
      .max_moves = max_moves,
      .stream_timeout = timeout ? absl::Seconds(*timeout) : absl::InfiniteDuration(),
      .security = std::move(security),
      .log = std::move(log)};
  if (weights) {
    replicas.weights = float64 ? PointWeights(WeightsOf<double>(*weights, n))
                               : PointWeights(WeightsOf<float>(*weights, n));
  }
  return replicas;
}

py::dict Fit(const std::vector<std::string>& servers, const py::object& rows, int64_t n, int d,
             int k, const std::optional<py::array>& weights, int iterations, double tol,
             double center_tol, uint64_t seed, const std::string& init, int kmeans_parallel_rounds,
             double kmeans_parallel_oversampling, const std::string& empty_clusters, int n_init,
             const Starts& starts, bool labels, bool float64, int streams_per_server,
             int64_t chunk_bytes, int max_moves, std::optional<double> timeout, bool tls,
             const std::string& ca, const std::string& cert, const std::string& key,
             const std::string& server_name, bool iteration_objectives, const py::object& log,
             const py::object& on_iteration, const std::string& points_type,
             const std::optional<py::array>& points_offset, const std::optional<py::tuple>& csr) {
  PythonFailure failure;
  ResidentJobOptions options =
      JobOptions(d, k, iterations, center_tol, seed, init, kmeans_parallel_rounds,
                 kmeans_parallel_oversampling, empty_clusters, n_init, starts, labels, float64,
                 iteration_objectives, &failure, log, on_iteration);
  ReplicaShardOptions replicas =
      ReplicasOf(servers, n, weights, float64, streams_per_server, chunk_bytes, max_moves, timeout,
                 SecurityOf(tls, ca, cert, key, server_name), options.log);
  if (points_type == "f16") {
    replicas.points_type = RawType::kFloat16;
  } else if (points_type == "bf16") {
    replicas.points_type = RawType::kBFloat16;
  } else if (points_type != "f32") {
    throw py::value_error("points_type '" + points_type + "': expected f32, f16 or bf16");
  }
  if (points_offset)
    replicas.points_offset = VectorOf<float>(*points_offset, d, "points_offset", "d");
  if (csr && (!replicas.points_offset.empty() || replicas.points_type != RawType::kFloat32)) {
    throw py::value_error("sparse points (csr) take no points_offset and no points_type");
  }
  std::vector<py::array> held;
  ShardSource source = SourceOf(rows, csr, n, d, float64, failure, &held);
  absl::StatusOr<ResidentJobResult> result;
  {
    py::gil_scoped_release released;
    result = RunResidentJobOnReplicas(std::move(replicas), std::move(options), tol, n, d,
                                      std::move(source));
  }
  failure.RaiseIfAny();
  if (!result.ok()) Raise(result.status());
  return ResultDict(*std::move(result));
}

// kmt.MiniBatchKMeans.fit's steps: the points loaded on the replicas, then
// the steps from `centers` (k, d) with the batches drawn from the MT19937
// state `key` (624 words) at `pos`, as numpy's RandomState.get_state()
// gives it (client/minibatch_job.h), on the shard itself where there is one
// and `steps_on_server`. The answer's key and pos are the stream's after
// the last draw.
py::dict MiniBatchFit(const std::vector<std::string>& servers, const py::object& rows, int64_t n,
                      int d, int k, const std::optional<py::array>& weights,
                      const py::array& centers, const std::vector<uint32_t>& key, int pos,
                      int64_t batch_size, int64_t steps, double center_tol,
                      int64_t max_no_improvement, double reassignment_ratio, bool steps_on_server,
                      bool labels, bool float64, int streams_per_server, int64_t chunk_bytes,
                      int max_moves, std::optional<double> timeout, bool tls, const std::string& ca,
                      const std::string& cert, const std::string& key_file,
                      const std::string& server_name, const py::object& log,
                      const std::optional<py::tuple>& csr) {
  PythonFailure failure;
  absl::StatusOr<NumpyRandomState> random = NumpyRandomState::FromState(key, pos);
  if (!random.ok()) throw py::value_error(std::string(random.status().message()));
  MiniBatchOptions options{.rules = {.k = k,
                                     .batch_size = batch_size,
                                     .steps = steps,
                                     .center_tol = center_tol,
                                     .max_no_improvement = max_no_improvement,
                                     .reassignment_ratio = reassignment_ratio,
                                     .log = LogOf(log, &failure)},
                           .random = *random,
                           .steps_on_server = steps_on_server,
                           .labels = labels,
                           .check = CheckOf(&failure)};
  const Array<double> start = Array<double>::ensure(centers);
  if (!start || start.ndim() != 2 || start.shape(0) != k || start.shape(1) != d) {
    throw py::value_error("centers must have shape (k, d) = (" + std::to_string(k) + ", " +
                          std::to_string(d) + ")");
  }
  // Row-major (k, d) is column-major d x k.
  options.centers = Eigen::Map<const Matrix<double>>(start.data(), d, k);
  ReplicaShardOptions replicas =
      ReplicasOf(servers, n, weights, float64, streams_per_server, chunk_bytes, max_moves, timeout,
                 SecurityOf(tls, ca, cert, key_file, server_name), options.rules.log);
  std::vector<py::array> held;
  ShardSource source = SourceOf(rows, csr, n, d, float64, failure, &held);
  absl::StatusOr<MiniBatchResult> result;
  {
    py::gil_scoped_release released;
    result =
        RunMiniBatchJobOnReplicas(std::move(replicas), std::move(options), n, d, std::move(source));
  }
  failure.RaiseIfAny();
  if (!result.ok()) Raise(result.status());
  py::dict out;
  const MiniBatchState& state = result->state;
  out["centers"] = RowsOf(state.centers);
  out["counts"] = state.counts;
  out["ewa_inertia"] = state.has_ewa ? py::object(py::float_(state.ewa_inertia)) : py::none();
  out["ewa_inertia_min"] = state.ewa_inertia_min;
  out["no_improvement"] = state.no_improvement;
  out["since_reassign"] = state.since_reassign;
  out["steps_run"] = state.steps_run;
  out["reassigned"] = state.reassigned;
  out["key"] = std::vector<uint32_t>(state.random.key().begin(), state.random.key().end());
  out["pos"] = state.random.pos();
  out["steps_on_server"] = result->steps_on_server;
  if (labels) {
    py::array_t<int32_t> assigned(static_cast<py::ssize_t>(result->labels.size()));
    std::memcpy(assigned.mutable_data(), result->labels.data(),
                sizeof(int32_t) * result->labels.size());
    out["labels"] = assigned;
  } else {
    out["labels"] = py::none();
  }
  out["objective"] = result->objective;
  out["load_seconds"] = result->load_seconds;
  out["steps_seconds"] = result->steps_seconds;
  out["labels_seconds"] = result->labels_seconds;
  return out;
}

// partial_fit's update of its centers (k, d) and counts (k,) by one batch's
// per-center weights (k,) and weighted sums (k, d), with
// MiniBatchUpdate's rules (core/minibatch.h): (centers, counts, the centers
// to reassign to points of the batch).
py::tuple MiniBatchUpdateOf(const py::array& centers, const std::vector<double>& counts,
                            const std::vector<double>& weights, const py::array& sums,
                            bool reassign, double reassignment_ratio, int64_t batch_size,
                            bool float64) {
  const Array<double> given = Array<double>::ensure(centers);
  const Array<double> batch_sums = Array<double>::ensure(sums);
  const py::ssize_t k = static_cast<py::ssize_t>(counts.size());
  if (!given || given.ndim() != 2 || given.shape(0) != k || !batch_sums || batch_sums.ndim() != 2 ||
      batch_sums.shape(0) != k || batch_sums.shape(1) != given.shape(1) ||
      static_cast<py::ssize_t>(weights.size()) != k) {
    throw py::value_error("centers and sums must have shape (k, d), counts and weights (k,)");
  }
  const int d = static_cast<int>(given.shape(1));
  MiniBatchState state;
  state.centers = Eigen::Map<const Matrix<double>>(given.data(), d, k);
  state.counts = counts;
  ClusterSums batch(d, static_cast<int>(k));
  batch.sums = Eigen::Map<const Matrix<double>>(batch_sums.data(), d, k);
  batch.weights = weights;
  const std::vector<int> moved =
      MiniBatchUpdate(batch, reassign, reassignment_ratio, batch_size, float64, &state);
  return py::make_tuple(RowsOf(state.centers), state.counts, moved);
}

py::dict Drive(const py::object& shards, int d, int k, const std::optional<py::array>& weights,
               bool weighted, int iterations, double center_tol, uint64_t seed,
               const std::string& init, int kmeans_parallel_rounds,
               double kmeans_parallel_oversampling, const std::string& empty_clusters, int n_init,
               const Starts& starts, bool labels, bool float64, bool iteration_objectives,
               const py::object& log, const py::object& on_iteration, bool sparse) {
  PythonFailure failure;
  ResidentJobOptions options =
      JobOptions(d, k, iterations, center_tol, seed, init, kmeans_parallel_rounds,
                 kmeans_parallel_oversampling, empty_clusters, n_init, starts, labels, float64,
                 iteration_objectives, &failure, log, on_iteration);
  options.weighted = weighted;
  options.sparse = sparse;
  options.sparse_sums = sparse;
  if (weights) {
    options.weights = float64 ? PointWeights(WeightsOf<double>(*weights, -1))
                              : PointWeights(WeightsOf<float>(*weights, -1));
  }
  PythonShards held(shards, &failure);
  absl::StatusOr<ResidentJobResult> result;
  {
    py::gil_scoped_release released;
    result = RunResidentJob(options, d, held);
  }
  failure.RaiseIfAny();
  if (!result.ok()) Raise(result.status());
  return ResultDict(*std::move(result));
}

// The GIL on one of gRPC's threads. The thread's Python state is made once
// and kept: pybind11 would otherwise make and delete one at every call,
// and Python maps and unmaps memory for each.
class GilOnGrpcThread {
 public:
  GilOnGrpcThread() {
    thread_local bool kept = false;
    if (!kept) {
      gil_.inc_ref();
      kept = true;
    }
  }

 private:
  py::gil_scoped_acquire gil_;
};

// A request as the package hands it over, (message, arrays): a serialized
// ClusterRequest and [(field number, bytes-like)] to set its bytes fields to,
// copied once.
void FillRequest(const py::tuple& next, v1::ClusterRequest* request) {
  if (next.size() != 2) throw py::value_error("a request is (message bytes, arrays)");
  const auto message = next[0].cast<std::string_view>();
  if (!request->ParseFromArray(message.data(), static_cast<int>(message.size()))) {
    throw py::value_error("a request's message bytes are not a ClusterRequest");
  }
  const google::protobuf::Reflection* reflection = request->GetReflection();
  for (const py::handle array : next[1].cast<py::list>()) {
    const auto [number, values] = array.cast<std::pair<int, py::buffer>>();
    const google::protobuf::FieldDescriptor* field =
        request->GetDescriptor()->FindFieldByNumber(number);
    if (field == nullptr || field->type() != google::protobuf::FieldDescriptor::TYPE_BYTES ||
        field->is_repeated()) {
      throw py::value_error("ClusterRequest has no bytes field " + std::to_string(number));
    }
    const py::buffer_info info = values.request();
    if (info.ndim != 1 || info.strides[0] != info.itemsize) {
      throw py::value_error("field " + std::to_string(number) + ": a contiguous buffer");
    }
    reflection->SetString(request, field,
                          std::string(static_cast<const char*>(info.ptr),
                                      static_cast<size_t>(info.size * info.itemsize)));
  }
}

// The C++ client (client/cluster_client.h) under kmt.Client.cluster_each:
// its Cluster streams run without the GIL, so that the Python process spends
// its time on the requests and results, not on gRPC's Python threads.
class CompiledClient {
 public:
  CompiledClient(const std::string& target, int max_message_bytes, int max_attempts,
                 int max_pushbacks, int window, int batches_per_stream,
                 std::optional<double> timeout, bool tls, const std::string& ca,
                 const std::string& cert, const std::string& key, const std::string& server_name) {
    ChannelSecurity security = SecurityOf(tls, ca, cert, key, server_name);
    // As in the server and the CLI (base/allocator.h): without it, each
    // batch's buffers in gRPC's threads fault in fresh pages.
    KeepBatchMemory();
    client_.emplace(ClientOptions{
        .target = target,
        .max_message_bytes = max_message_bytes,
        .max_attempts = max_attempts,
        .max_pushbacks = max_pushbacks,
        .window = window,
        .batches_per_stream = batches_per_stream,
        .stream_timeout = timeout ? absl::Seconds(*timeout) : absl::InfiniteDuration(),
        .security = std::move(security)});
  }

  // Streams the requests `next_request()` returns and hands each response,
  // serialized, to `on_response`, in request order. A request is (message,
  // arrays): a serialized ClusterRequest and [(field number, bytes-like)]
  // to set its bytes fields to, copied once; None once there are no more.
  // `next_request` is called on gRPC's threads, one call at a time, and
  // `on_response` on this thread, both with the GIL. The first exception
  // either raises stops the requests and is raised here once the stream has
  // ended; the batches sent before a failed request are still handed over,
  // none after a failed response.
  void Cluster(const py::object& next_request, const py::object& on_response) {
    PythonFailure failure;
    // A failed request stops the requests, a failed response the responses
    // as well (set on one thread, read on others).
    std::atomic<bool> requests_failed = false;
    std::atomic<bool> responses_failed = false;
    const auto source = [&](v1::ClusterRequest* request) {
      if (requests_failed || responses_failed) return false;
      GilOnGrpcThread gil;
      try {
        const py::object next = next_request();
        if (next.is_none()) return false;
        FillRequest(next.cast<py::tuple>(), request);
        return true;
      } catch (py::error_already_set& e) {
        (void)failure.Keep(std::move(e));
      } catch (const py::builtin_exception& e) {
        e.set_error();
        (void)failure.Keep(py::error_already_set());
      }
      requests_failed = true;
      return false;
    };
    const auto sink = [&](v1::ClusterResponse&& response) {
      if (responses_failed) return;
      const std::string serialized = response.SerializeAsString();
      py::gil_scoped_acquire gil;
      try {
        on_response(py::bytes(serialized));
      } catch (py::error_already_set& e) {
        (void)failure.Keep(std::move(e));
        responses_failed = true;
      }
    };
    absl::Status status;
    {
      py::gil_scoped_release released;
      status = client_->Cluster(source, sink);
    }
    failure.RaiseIfAny();
    if (!status.ok()) Raise(status);
  }

  int64_t resent() const { return client_->resent(); }

 private:
  friend class CompiledSession;
  std::optional<Client> client_;
};

// ClusterSession under kmt.Client.session(): requests sent one at a time on
// one stream, without the GIL while each waits for its answer (a lock keeps
// threads that share the session to one request at a time).
class CompiledSession {
 public:
  explicit CompiledSession(CompiledClient* client) : session_(&*client->client_) {}

  // The serialized response to one (message, arrays) request.
  py::bytes Send(const py::tuple& request) {
    v1::ClusterRequest message;
    FillRequest(request, &message);
    absl::StatusOr<v1::ClusterResponse> response;
    std::string serialized;
    {
      py::gil_scoped_release released;
      std::lock_guard<std::mutex> lock(mu_);
      response = session_.Send(message);
      if (response.ok()) serialized = response->SerializeAsString();
    }
    if (!response.ok()) Raise(response.status());
    return py::bytes(serialized);
  }

  void Close() {
    py::gil_scoped_release released;
    std::lock_guard<std::mutex> lock(mu_);
    (void)session_.End();
  }

 private:
  std::mutex mu_;
  ClusterSession session_;
};

// A stored value as Scalar: float16 bits (uint16_t) widened to float32 as
// the server widens points_f16, any other as it is.
template <typename Scalar, typename Stored>
Scalar Value(Stored v) {
  if constexpr (std::is_same_v<Stored, uint16_t>) {
    return WidenFloat16(v);
  } else {
    return v;
  }
}

// Per column of a C-contiguous n x d array (n >= 1), term(l, value) of each
// row's value added in row order in Scalar, starting from 0, then divided
// by n in Scalar: the passes numpy's mean and var make over axis 0. Runs
// without the GIL.
template <typename Scalar, typename Stored, typename Term>
py::array_t<Scalar> ColumnAverages(const py::array_t<Stored, py::array::c_style>& x, Term term) {
  const py::ssize_t n = x.shape(0), d = x.shape(1);
  py::array_t<Scalar> averages(d);
  const Stored* values = x.data();
  Scalar* out = averages.mutable_data();
  py::gil_scoped_release released;
  std::fill(out, out + d, Scalar(0));
  for (py::ssize_t i = 0; i < n; ++i) {
    const Stored* row = values + i * d;
    for (py::ssize_t l = 0; l < d; ++l) out[l] += term(l, Value<Scalar>(row[l]));
  }
  const Scalar count = static_cast<Scalar>(n);
  for (py::ssize_t l = 0; l < d; ++l) out[l] /= count;
  return averages;
}

// X.mean(axis=0) of a C-contiguous n x d array (n >= 1), to the bit, as
// numpy computes it: each column's values added in row order in the
// array's type, starting from 0 (so a column of -0 sums to +0), then
// divided by n in that type. numpy's pass pays a call per row, which at
// d = 32 costs as much as a small batch's other checks together. Stored
// uint16_t is a float16 array's bits, each widened to float32 as the server
// widens points_f16: the means of the float32 array of the same values,
// without making that array.
template <typename Stored, typename Scalar = Stored>
py::array_t<Scalar> ColumnMeans(const py::array_t<Stored, py::array::c_style>& x) {
  if (x.ndim() != 2 || x.shape(0) < 1) {
    throw py::value_error("column_means takes a 2-d array with at least one row");
  }
  return ColumnAverages<Scalar>(x, [](py::ssize_t, Scalar v) { return v; });
}

// np.var(X, axis=0) the same way, to the bit, for the estimators'
// tolerance: ColumnMeans, then each value's deviation from its column's
// mean squared and added in row order in the array's type (float32 for
// float16 bits), divided by n. numpy's pass makes an n x d array of the
// deviations; this one reads X twice and allocates only d values.
template <typename Stored, typename Scalar = Stored>
py::array_t<Scalar> ColumnVariances(const py::array_t<Stored, py::array::c_style>& x) {
  const py::array_t<Scalar> means = ColumnMeans<Stored, Scalar>(x);
  const Scalar* mean = means.data();
  return ColumnAverages<Scalar>(x, [mean](py::ssize_t l, Scalar v) {
    const Scalar deviation = v - mean[l];
    return deviation * deviation;
  });
}

// The arrays of a CSR matrix in scipy's canonical format (CanonicalRows,
// core/sparse.h: each row's columns sorted, a column's entries summed in
// their order), as new arrays, the rows taken by every core: scipy's
// sort_indices and sum_duplicates, a row at a time on one.
template <typename Scalar>
py::tuple CanonicalCsr(const py::array_t<int64_t, py::array::c_style>& indptr,
                       const py::array_t<int32_t, py::array::c_style>& indices,
                       const py::array_t<Scalar, py::array::c_style>& values) {
  if (indptr.ndim() != 1 || indices.ndim() != 1 || values.ndim() != 1 || indptr.size() < 1) {
    throw py::value_error("canonical_csr takes one-dimensional indptr, indices and values");
  }
  const int64_t n = indptr.size() - 1;
  const int64_t* offsets = indptr.data();
  bool ordered = offsets[0] == 0;
  for (int64_t i = 0; ordered && i < n; ++i) ordered = offsets[i] <= offsets[i + 1];
  if (!ordered || offsets[n] != indices.size() || offsets[n] != values.size()) {
    throw py::value_error(
        "canonical_csr: indptr must start at 0, never decrease and end at the number of "
        "indices and values");
  }
  py::array_t<int64_t> out_indptr(n + 1);
  py::array_t<int32_t> out_indices(offsets[n]);
  py::array_t<Scalar> out_values(offsets[n]);
  int64_t nnz = 0;
  {
    py::gil_scoped_release release;
    nnz = CanonicalRows(n, offsets, indices.data(), values.data(), out_indptr.mutable_data(),
                        out_indices.mutable_data(), out_values.mutable_data());
  }
  const py::slice kept(0, nnz, 1);
  return py::make_tuple(out_indptr, out_indices[kept], out_values[kept]);
}

// kmt.dask's workers' shards (client/shard_stream.h): a replica's channel
// (kmt._driver.Replica), kept by the worker for the fits that use it, and
// the shards it loads there (kmt._driver.Shard), each one Job stream held
// for the fit. A shard's calls take its lock after giving the GIL up.

// A shard's failure: kmt._driver.ReplicaFailed where the replica is gone,
// else kmt._driver.Error.
[[noreturn]] void RaiseShardFailure(const absl::Status& status) {
  Raise(status, ReplicaGone(status) ? replica_failed_type : error_type);
}

std::vector<v1::JobRequest> RequestsOf(const std::vector<py::bytes>& serialized) {
  std::vector<v1::JobRequest> requests(serialized.size());
  for (size_t i = 0; i < serialized.size(); ++i) {
    const auto bytes = serialized[i].cast<std::string_view>();
    if (!requests[i].ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      throw py::value_error("not a serialized JobRequest");
    }
  }
  return requests;
}

class CompiledShard {
 public:
  explicit CompiledShard(std::unique_ptr<ShardStream> stream)
      : chunks_(stream->chunks()),
        chunk_bytes_sent_(stream->chunk_bytes_sent()),
        largest_chunk_bytes_(stream->largest_chunk_bytes()),
        stream_(std::move(stream)) {}
  ~CompiledShard() { Close(); }

  void Send(const py::bytes& request) {
    const std::vector<v1::JobRequest> parsed = RequestsOf({request});
    absl::Status sent;
    {
      py::gil_scoped_release released;
      std::lock_guard<std::mutex> lock(mu_);
      sent = stream_ ? stream_->Send(parsed[0]) : absl::FailedPreconditionError("shard closed");
    }
    if (!sent.ok()) RaiseShardFailure(sent);
  }

  // The next response, serialized, its labels gathered.
  py::bytes Receive() {
    absl::StatusOr<v1::JobResponse> response;
    std::string serialized;
    {
      py::gil_scoped_release released;
      std::lock_guard<std::mutex> lock(mu_);
      response = stream_ ? stream_->Receive() : absl::FailedPreconditionError("shard closed");
      if (response.ok()) response->SerializeToString(&serialized);
    }
    if (!response.ok()) RaiseShardFailure(response.status());
    return py::bytes(serialized);
  }

  // What its load sent (ShardStream's).
  int64_t chunks() const { return chunks_; }
  int64_t chunk_bytes_sent() const { return chunk_bytes_sent_; }
  int64_t largest_chunk_bytes() const { return largest_chunk_bytes_; }

  void EndWrites() {
    py::gil_scoped_release released;
    std::lock_guard<std::mutex> lock(mu_);
    if (stream_) stream_->EndWrites();
  }

  // Ends the job on the replica: its shard is freed.
  void Close() {
    std::unique_ptr<ShardStream> closing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing = std::move(stream_);
    }
    if (closing == nullptr) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release released;
      closing.reset();
    }
  }

 private:
  const int64_t chunks_, chunk_bytes_sent_, largest_chunk_bytes_;
  std::mutex mu_;
  std::unique_ptr<ShardStream> stream_;
};

class CompiledReplica {
 public:
  CompiledReplica(const std::string& address, bool tls, const std::string& ca,
                  const std::string& cert, const std::string& key, const std::string& server_name)
      : address_(address),
        stub_(ReplicaStub(address, SecurityOf(tls, ca, cert, key, server_name))) {}

  // Loads n points in d dimensions, rows(first, end) (float32, or float64
  // if `float64`) or the CSR arrays `csr`, with their `weights` (n, or
  // None), as one shard; then replays `replays`, serialized JobRequests.
  std::unique_ptr<CompiledShard> Load(int64_t n, int d, const py::object& rows,
                                      const std::optional<py::tuple>& csr,
                                      const std::optional<py::array>& weights, bool float64,
                                      int64_t chunk_bytes, std::optional<double> timeout,
                                      const std::vector<py::bytes>& replays,
                                      const py::object& log) {
    if (n < 1 || d < 1) throw py::value_error("a shard takes n >= 1 points in d >= 1 dimensions");
    PythonFailure failure;
    ShardLoadOptions options{
        .d = d,
        .chunk_bytes = chunk_bytes,
        .stream_timeout = timeout ? absl::Seconds(*timeout) : absl::InfiniteDuration(),
        .log = LogOf(log, &failure)};
    if (weights) {
      options.weights = float64 ? PointWeights(WeightsOf<double>(*weights, n))
                                : PointWeights(WeightsOf<float>(*weights, n));
    }
    const std::vector<v1::JobRequest> replayed = RequestsOf(replays);
    std::vector<py::array> held;
    const ShardSource source = SourceOf(rows, csr, n, d, float64, failure, &held);
    absl::StatusOr<std::unique_ptr<ShardStream>> stream;
    {
      py::gil_scoped_release released;
      stream = ShardStream::Load(stub_.get(), address_, source, options,
                                 {.first = 0, .count = n, .replays = &replayed});
    }
    failure.RaiseIfAny();
    if (!stream.ok()) RaiseShardFailure(stream.status());
    return std::make_unique<CompiledShard>(*std::move(stream));
  }

 private:
  const std::string address_;
  std::unique_ptr<v1::KMeansTransformer::Stub> stub_;
};
}  // namespace
}  // namespace kmt

PYBIND11_MODULE(_driver, m) {
  m.doc() = "kmt's compiled driver and client (client/resident_job.h, client/cluster_client.h).";
  static py::exception<std::runtime_error> error(m, "Error");
  kmt::error_type = error.ptr();
  static py::exception<std::runtime_error> replica_failed(m, "ReplicaFailed", error.ptr());
  kmt::replica_failed_type = replica_failed.ptr();
  m.def("fit", &kmt::Fit, py::arg("servers"), py::arg("rows"), py::arg("n"), py::arg("d"),
        py::arg("k"), py::kw_only(), py::arg("weights") = py::none(), py::arg("iterations"),
        py::arg("tol"), py::arg("center_tol"), py::arg("seed"), py::arg("init"),
        py::arg("kmeans_parallel_rounds"), py::arg("kmeans_parallel_oversampling"),
        py::arg("empty_clusters"), py::arg("n_init"), py::arg("starts") = py::none(),
        py::arg("labels"), py::arg("float64") = false, py::arg("streams_per_server"),
        py::arg("chunk_bytes"), py::arg("max_moves"), py::arg("timeout") = py::none(),
        py::arg("tls") = false, py::arg("ca") = "", py::arg("cert") = "", py::arg("key") = "",
        py::arg("server_name") = "", py::arg("iteration_objectives") = true,
        py::arg("log") = py::none(), py::arg("on_iteration") = py::none(),
        py::arg("points_type") = "f32", py::arg("points_offset") = py::none(),
        py::arg("csr") = py::none());
  m.def("minibatch_fit", &kmt::MiniBatchFit, py::arg("servers"), py::arg("rows"), py::arg("n"),
        py::arg("d"), py::arg("k"), py::kw_only(), py::arg("weights") = py::none(),
        py::arg("centers"), py::arg("key"), py::arg("pos"), py::arg("batch_size"), py::arg("steps"),
        py::arg("center_tol"), py::arg("max_no_improvement"), py::arg("reassignment_ratio"),
        py::arg("steps_on_server") = true, py::arg("labels"), py::arg("float64") = false,
        py::arg("streams_per_server"), py::arg("chunk_bytes"), py::arg("max_moves"),
        py::arg("timeout") = py::none(), py::arg("tls") = false, py::arg("ca") = "",
        py::arg("cert") = "", py::arg("key_file") = "", py::arg("server_name") = "",
        py::arg("log") = py::none(), py::arg("csr") = py::none());
  m.def("minibatch_update", &kmt::MiniBatchUpdateOf, py::arg("centers"), py::arg("counts"),
        py::arg("weights"), py::arg("sums"), py::arg("reassign"), py::arg("reassignment_ratio"),
        py::arg("batch_size"), py::arg("float64"));
  m.def(
      "minibatch_reassigns",
      [](int k, int64_t batch_size, const std::vector<double>& counts, int64_t since_reassign) {
        kmt::MiniBatchState state{.counts = counts, .since_reassign = since_reassign};
        const bool reassign = kmt::MiniBatchReassigns(k, batch_size, &state);
        return py::make_tuple(reassign, state.since_reassign);
      },
      py::arg("k"), py::arg("batch_size"), py::arg("counts"), py::arg("since_reassign"));
  m.def("drive", &kmt::Drive, py::arg("shards"), py::arg("d"), py::arg("k"), py::kw_only(),
        py::arg("weights") = py::none(), py::arg("weighted"), py::arg("iterations"),
        py::arg("center_tol"), py::arg("seed"), py::arg("init"), py::arg("kmeans_parallel_rounds"),
        py::arg("kmeans_parallel_oversampling"), py::arg("empty_clusters"), py::arg("n_init"),
        py::arg("starts") = py::none(), py::arg("labels"), py::arg("float64") = false,
        py::arg("iteration_objectives") = true, py::arg("log") = py::none(),
        py::arg("on_iteration") = py::none(), py::arg("sparse") = false);
  py::class_<kmt::CompiledClient>(m, "Client")
      .def(py::init<const std::string&, int, int, int, int, int, std::optional<double>, bool,
                    const std::string&, const std::string&, const std::string&,
                    const std::string&>(),
           py::arg("target"), py::kw_only(), py::arg("max_message_bytes"), py::arg("max_attempts"),
           py::arg("max_pushbacks"), py::arg("window"), py::arg("batches_per_stream"),
           py::arg("timeout") = py::none(), py::arg("tls") = false, py::arg("ca") = "",
           py::arg("cert") = "", py::arg("key") = "", py::arg("server_name") = "")
      .def("cluster", &kmt::CompiledClient::Cluster, py::arg("next_request"),
           py::arg("on_response"))
      .def_property_readonly("resent", &kmt::CompiledClient::resent)
      .def(
          "session",
          [](kmt::CompiledClient* client) {
            return std::make_unique<kmt::CompiledSession>(client);
          },
          py::keep_alive<0, 1>());
  py::class_<kmt::CompiledSession>(m, "Session")
      .def("send", &kmt::CompiledSession::Send, py::arg("request"))
      .def("close", &kmt::CompiledSession::Close);
  m.def(
      "replica_addresses",
      [](const std::string& target) {
        absl::StatusOr<std::vector<std::string>> addresses = kmt::ReplicaAddresses(target);
        if (!addresses.ok()) kmt::Raise(addresses.status());
        return *addresses;
      },
      py::arg("target"));
  m.def("canonical_csr", &kmt::CanonicalCsr<float>, py::arg("indptr"), py::arg("indices"),
        py::arg("values"));
  m.def("canonical_csr", &kmt::CanonicalCsr<double>, py::arg("indptr"), py::arg("indices"),
        py::arg("values"));
  m.def("column_means", &kmt::ColumnMeans<float>, py::arg("x"));
  m.def("column_means", &kmt::ColumnMeans<double>, py::arg("x"));
  m.def("column_means_f16", &kmt::ColumnMeans<uint16_t, float>, py::arg("bits"));
  m.def("column_variances", &kmt::ColumnVariances<float>, py::arg("x"));
  m.def("column_variances", &kmt::ColumnVariances<double>, py::arg("x"));
  m.def("column_variances_f16", &kmt::ColumnVariances<uint16_t, float>, py::arg("bits"));
  py::class_<kmt::CompiledReplica>(m, "Replica")
      .def(py::init<const std::string&, bool, const std::string&, const std::string&,
                    const std::string&, const std::string&>(),
           py::arg("address"), py::kw_only(), py::arg("tls") = false, py::arg("ca") = "",
           py::arg("cert") = "", py::arg("key") = "", py::arg("server_name") = "")
      .def("load", &kmt::CompiledReplica::Load, py::arg("n"), py::arg("d"), py::kw_only(),
           py::arg("rows") = py::none(), py::arg("csr") = py::none(),
           py::arg("weights") = py::none(), py::arg("float64") = false, py::arg("chunk_bytes"),
           py::arg("timeout") = py::none(), py::arg("replays") = std::vector<py::bytes>(),
           py::arg("log") = py::none());
  py::class_<kmt::CompiledShard>(m, "Shard")
      .def("send", &kmt::CompiledShard::Send, py::arg("request"))
      .def("receive", &kmt::CompiledShard::Receive)
      .def_property_readonly("chunks", &kmt::CompiledShard::chunks)
      .def_property_readonly("chunk_bytes_sent", &kmt::CompiledShard::chunk_bytes_sent)
      .def_property_readonly("largest_chunk_bytes", &kmt::CompiledShard::largest_chunk_bytes)
      .def("end_writes", &kmt::CompiledShard::EndWrites)
      .def("close", &kmt::CompiledShard::Close);
  m.def(
      "replays_of",
      [](const py::bytes& request) {
        std::vector<kmt::v1::JobRequest> replays;
        kmt::KeepForReplay(kmt::RequestsOf({request})[0], &replays);
        std::vector<py::bytes> serialized;
        for (const kmt::v1::JobRequest& replay : replays) {
          serialized.emplace_back(replay.SerializeAsString());
        }
        return serialized;
      },
      py::arg("request"));
  m.attr("MAX_MOVES") = kmt::ReplicaShardOptions{}.max_moves;
  m.attr("KMEANS_PARALLEL_ROUNDS") = kmt::ResidentJobOptions{}.kmeans_parallel_rounds;
  m.attr("KMEANS_PARALLEL_OVERSAMPLING") = kmt::ResidentJobOptions{}.kmeans_parallel_oversampling;
}
