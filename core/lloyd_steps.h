// Lloyd's iterations over points held elsewhere, with scikit-learn's rules:
// an assignment under the centers, the empty clusters relocated to the
// farthest points if asked, the means, and the stop after an assignment
// that changed no label or a total squared shift within the tolerance; the
// last assignment, under the final centers, gives the labels. The points
// and how a step reaches them are the caller's: a resident job's driver
// asks its shards (client/resident_job.h), a job's only shard runs the
// steps where it is (server/resident_shard.h). Both run this loop, so both
// give the same iterations, trajectory and centers from the same answers.
#ifndef KMT_CORE_LLOYD_STEPS_H_
#define KMT_CORE_LLOYD_STEPS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cluster_sums.h"
#include "core/transformer.h"
#include "core/types.h"

namespace kmt {

struct LloydRules {
  int iterations = 0;  ///< most updates
  /// Stop once an update's total squared shift (in double) is at most this:
  /// scikit-learn's tol times the points' mean per-dimension variance.
  double center_tol = 0;
  bool relocate = false;  ///< scikit-learn's relocation of empty clusters
  /// Every assignment's objective, or only the first's and the last's (the
  /// others NaN, which lets an assignment skip what only the objective needs).
  bool iteration_objectives = true;
};

// One assignment over all the points.
struct LloydAssignment {
  ClusterSums sums;
  double objective = std::numeric_limits<double>::quiet_NaN();
  /// Whether `changed` counts the labels that differ from the assignment
  /// before (false where that is not known).
  bool compared = false;
  int64_t changed = 0;
};

// The assignment under `centers`; `last`: the labels' step, after the final
// update; `objective`: whether it must compute the objective.
template <typename Scalar>
using LloydAssign = std::function<absl::StatusOr<LloydAssignment>(const Matrix<Scalar>& centers,
                                                                  bool last, bool objective)>;
// Relocation's moves into `sums`, the assignment's under `centers`: returns
// how many empty clusters took a point.
template <typename Scalar>
using LloydRelocate =
    std::function<absl::StatusOr<int64_t>(const Matrix<Scalar>& centers, ClusterSums* sums)>;

template <typename Scalar>
struct LloydTrajectory {
  Matrix<Scalar> centers;  ///< d x k: the start, then the final centers
  double initial_objective = 0;
  double objective = 0;            ///< of the final centers
  std::vector<double> objectives;  ///< after each update
  /// For each assignment after the first, the labels it changed; -1 where
  /// they were not compared.
  std::vector<int64_t> labels_changed;
  std::vector<int64_t> counts;  ///< k: the points of each final center
  int iterations_run = 0;
  Convergence convergence = Convergence::kNone;
  int64_t empty_cluster_events = 0;  ///< (update, cluster) pairs without weight
  int64_t relocations = 0;           ///< empty clusters moved to far points
  std::vector<double> iteration_seconds;
  double labels_seconds = 0;
};

// What a caller may watch: each assignment as it is answered (`t`: the
// updates before it), each relocation that moved points, and each update
// with its shift and, where the loop stops after it, why.
struct LloydWatch {
  std::function<void(int t, bool last, const LloydAssignment& step)> assigned;
  std::function<void(int64_t moved)> relocated;
  std::function<void(int t, double objective, double shift, Convergence why)> updated;
};

// Lloyd's iterations from trajectory->centers under `rules`, filling the
// trajectory. An error of `assign` or `relocate` is returned as it is.
template <typename Scalar>
absl::Status RunLloydSteps(const LloydRules& rules, const LloydAssign<Scalar>& assign,
                           const LloydRelocate<Scalar>& relocate, const LloydWatch& watch,
                           LloydTrajectory<Scalar>* trajectory);

}  // namespace kmt

#endif  // KMT_CORE_LLOYD_STEPS_H_
