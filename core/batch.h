// A batch as the engine takes it: the points, what to compute and from where
// to start, checked once. A Batch exists only validated, so nothing after
// Batch::Validate checks the points again.
#ifndef KMT_CORE_BATCH_H_
#define KMT_CORE_BATCH_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "core/empty_clusters.h"
#include "core/init.h"
#include "core/parameters.h"
#include "core/types.h"

namespace kmt {

// Which squared distances to the final centers a run returns.
enum class DistanceOutput {
  kNone,
  kNearest,  ///< each point's to its own (nearest) center: 1 x n
  kAll,      ///< each point's to every center: k x n
};

// The most restarts one batch may ask for (scikit-learn's default is 1 to
// 10); each is a whole run.
inline constexpr int kMaxRestarts = 1000;

template <typename Scalar>
struct BatchSpec {
  Matrix<Scalar> points;  ///< d x n, in the caller's units
  int k = 0;              ///< clusters
  int layers = 0;         ///< T, layers (iterations) to run; 0 only assigns
  /// d x k initial centers in the caller's units; empty: chosen by `init`.
  Matrix<Scalar> given_centers;
  /// How to choose centers when none are given; unset: the model's default
  /// (ServedModel::default_init).
  std::optional<InitMethod> init;
  uint64_t seed = 0;  ///< seed of that choice
  /// The algorithm's parameters by name; a name left out takes the model's
  /// default (ServedModel::parameters gives names, defaults and ranges).
  ParameterValues parameters;
  bool record_trajectory = false;  ///< keep every layer's labels, registers and centers
  /// Every layer's objective (RunResult::layer_objectives); false: the
  /// last layer's alone, the others NaN (RunOptions::layer_objectives).
  bool layer_objectives = true;
  bool cluster_sums = false;  ///< per center, count, weight and coordinate sum of its points
  /// n per-point weights (scikit-learn's sample_weight): finite, >= 0, not
  /// all 0; empty: every point weighs 1.
  Vector<Scalar> weights;
  /// Convergence (scikit-learn's rule): stop after the layer whose total
  /// squared center shift is at most tol times the points' mean
  /// per-dimension variance, or whose assignment changed no label. Unset:
  /// exactly `layers` layers.
  std::optional<double> tol;
  /// Restarts from seeds seed, seed + 1, ...; the lowest objective wins. Only
  /// for centers the run chooses.
  int n_init = 1;
  EmptyClusterPolicy empty_clusters = EmptyClusterPolicy::kKeep;  ///< what an empty cluster does
  DistanceOutput distances = DistanceOutput::kNone;               ///< per-point distances to return
  /// Learned models: run their guarded form (Model::guard), each layer the
  /// learned step or an exact Lloyd's step, whichever is better, and answer
  /// exact Lloyd's result from the same initial centers where it ends lower
  /// (core/engine.h).
  bool guard = false;
};

template <typename Scalar>
class Batch {
 public:
  // Checks, each once, that the points are d x n with d, n >= 1 and finite,
  // 1 <= k <= n, given centers are d x k and finite, layers >= 0, every
  // parameter a number (its range is the model's), weights n finite
  // non-negative values not all 0, tol finite and >= 0, n_init >= 1 (1 with
  // given centers). The one validation of a batch: a reader of the wire
  // (proto/request.h) checks only what reading needs, the counts of values.
  static absl::StatusOr<Batch> Validate(BatchSpec<Scalar> spec);

  const BatchSpec<Scalar>& spec() const { return spec_; }
  const Matrix<Scalar>& points() const { return spec_.points; }
  int d() const { return static_cast<int>(spec_.points.rows()); }
  int64_t n() const { return spec_.points.cols(); }
  int k() const { return spec_.k; }

 private:
  explicit Batch(BatchSpec<Scalar> spec) : spec_(std::move(spec)) {}

  BatchSpec<Scalar> spec_;
};

}  // namespace kmt

#endif  // KMT_CORE_BATCH_H_
