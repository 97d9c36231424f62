// Runs a k-means transformer for T layers on points from initial centers.
// Two evaluators: the dense one executes any weights block by block
// (O(n^2) per layer through theta2), the fast one runs models whose weights are
// exactly a Lloyd construction in O(n k d) per layer, using what the
// construction provably computes: theta1 the nearest center's code, theta2 and
// theta4 the removal of the old value, theta3 the mean of each cluster.
//
// A model with an input scaling sees the points mapped (input_scaling.h); the
// results are reported in the caller's units. RunTransformer and RunLloyd
// check their inputs; the engine (engine.h), whose batches are validated
// once, calls Evaluate directly.
#ifndef KMT_CORE_TRANSFORMER_H_
#define KMT_CORE_TRANSFORMER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/algorithm.h"
#include "core/bounds.h"
#include "core/cluster_sums.h"
#include "core/constructions.h"
#include "core/empty_clusters.h"
#include "core/input_scaling.h"
#include "core/model.h"

namespace kmt {

enum class Path {
  kAuto,   ///< fast when the weights are an exact Lloyd construction, else dense
  kFast,   ///< the O(n k d) path; an error for other weights
  kDense,  ///< the general evaluator
};

// The most clusters whose assignments the bounds may take on their own
// (AssignmentPath::kAuto): their half separations hold a k x k matrix of
// doubles (core/bounds.cc), 512 MiB at 8,192. Past it the products alone
// assign, in a run and in a resident shard's steps.
inline constexpr int kMostBoundedClusters = 8192;

struct RunOptions {
  int layers = 10;                 ///< T, the number of layers (iterations)
  Path path = Path::kAuto;         ///< which evaluator
  bool record_trajectory = false;  ///< keep labels, registers and centers of every layer
  /// Fast path: the objective of every layer (layer_objectives); false: of
  /// the last layer alone (the others NaN), so that the bound-based
  /// assignment need not read the points it settles (bounds.h). A recorded
  /// trajectory has every layer's.
  bool layer_objectives = true;
  uint64_t seed = 0;          ///< keys the draws of sampling (Gumbel) blocks, with the layer
  bool cluster_sums = false;  ///< keep the final labels' counts and sums (RunResult)
  /// Called before each layer with its index; a non-OK status stops the run
  /// and is returned (deadlines, cancellation).
  std::function<absl::Status(int layer)> before_layer;
  /// Fast path: stop after the layer whose total squared center shift (in
  /// the model's units) is at most this, or whose assignment left every
  /// label as the layer before's (scikit-learn's rule; `tol` times the
  /// points' mean variance). Unset: every layer runs.
  std::optional<double> shift_tolerance;
  /// Fast path, algorithms whose update is from the sums: what an empty
  /// cluster's center becomes.
  EmptyClusterPolicy empty_clusters = EmptyClusterPolicy::kKeep;
  /// Fast path: how each assignment after the first finds the nearest
  /// centers (bounds.h); every choice gives the same results to the last bit.
  AssignmentPath assignment = AssignmentPath::kAuto;
  /// Fast path: how the cluster sums of the update are kept (bounds.h).
  SumsPath sums = SumsPath::kAuto;
};

// Why a run stopped before its last layer.
enum class Convergence {
  kNone,             ///< it ran every layer
  kTolerance,        ///< the centers moved less than the tolerance
  kLabelsUnchanged,  ///< an assignment changed no label
};

template <typename Scalar>
struct LayerRecord {
  Labels labels;             ///< per point, the code its registers hold after the layer
  Matrix<Scalar> registers;  ///< m x n point registers after the layer
  Matrix<Scalar> centers;    ///< d x k centers after the layer, caller's units
  double objective = 0;      ///< k-means objective of these centers
  int empty_clusters = 0;    ///< centers kept because no point carried their code
};

template <typename Scalar>
struct RunResult {
  Matrix<Scalar> centers;                ///< d x k final centers, caller's units
  Labels labels;                         ///< nearest final center per point (ties: lowest index)
  double objective = 0;                  ///< sum_i min_j ||x_i - c_j||^2 for the final centers
  std::vector<double> layer_objectives;  ///< objective after each layer
  int layers_run = 0;
  Convergence convergence = Convergence::kNone;  ///< why it stopped early, if it did
  int64_t empty_cluster_events = 0;              ///< (layer, cluster) pairs that were empty
  Path path = Path::kAuto;                       ///< the evaluator that ran
  /// A guarded model (Model::guard): of its own layers, those that kept the
  /// learned step and those that kept the Lloyd's step instead.
  int guard_learned_layers = 0;
  int guard_lloyd_layers = 0;
  /// A guarded run of a served model (core/engine.h): whether exact Lloyd's
  /// from the same initial centers, for the same layers, answered because
  /// it ended lower than the learned trajectory.
  bool guard_lloyd_answered = false;
  std::vector<LayerRecord<Scalar>> trajectory;  ///< if record_trajectory
  /// Fast path: each assignment's way (the first, of the initial centers,
  /// first), when the bounds could take part.
  std::vector<AssignmentStats> assignments;
  /// Per center, count and coordinate sum of the points under the final
  /// labels, if RunOptions::cluster_sums asked for them.
  std::optional<ClusterSums> cluster_sums;
  /// Squared distances of the points to the final centers, if the batch
  /// asked (DistanceOutput): 1 x n to each point's own, or k x n to each.
  Matrix<Scalar> distances;
  /// With restarts: each restart's final objective, and the one returned.
  std::vector<double> restart_objectives;
  int best_restart = 0;
};

// points: d x n, initial_centers: d x k (the model's d and k), both in the
// caller's units.
template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> RunTransformer(const Model<Scalar>& model,
                                                 const Matrix<Scalar>& points,
                                                 const Matrix<Scalar>& initial_centers,
                                                 const RunOptions& options);

// Runs the Lloyd construction with these options. When the fast path
// applies (hardmax assignment, path not kDense) the weights are never built,
// so any d and k cost O(n k d) per layer and no O((d+k)^2) memory.
template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> RunLloyd(const LloydOptions& lloyd, const Matrix<Scalar>& points,
                                           const Matrix<Scalar>& initial_centers,
                                           const RunOptions& options);

// What Evaluate runs: the dense evaluator on `weights` (for its first
// `lloyd_after` layers when that is set, the fast path's Lloyd's steps after
// them), or, when `weights` is null, the fast path: Lloyd's assignment and
// the algorithm's center update (algorithm.h), with registers laid out by
// `embedding`.
template <typename Scalar>
struct Evaluator {
  const Model<Scalar>* weights = nullptr;          ///< dense: these weights
  Embedding embedding = Embedding::kOneHot;        ///< fast: the registers' layout
  int k = 0;                                       ///< clusters
  const Algorithm* algorithm = &LloydAlgorithm();  ///< fast: the center update
  const ParameterValues* parameters = nullptr;     ///< fast: its resolved parameters
  const Vector<Scalar>* point_weights = nullptr;   ///< n point weights; null: 1 each
  /// Dense, points zero-padded to the weights' d (padding.h): the batch's own
  /// dimensions, whose complement the centers are held at zero in; 0: the
  /// weights' d, no padding. The weights may also run fewer centers than
  /// their k (k above), as their first clusters.
  int data_dims = 0;
};

// The evaluators without input checks, for inputs already validated:
// `points` in the caller's units (labels and objectives are reported against
// them), `model_points` = map.ToModel(points) (the same object when `map` is
// the identity), `initial_centers` in the model's units.
template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Evaluate(const Evaluator<Scalar>& evaluator,
                                           const Matrix<Scalar>& points,
                                           const Matrix<Scalar>& model_points,
                                           const InputMap<Scalar>& map,
                                           const Matrix<Scalar>& initial_centers,
                                           const RunOptions& options);

}  // namespace kmt

#endif  // KMT_CORE_TRANSFORMER_H_
