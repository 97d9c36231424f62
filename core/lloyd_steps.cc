#include "core/lloyd_steps.h"

#include <chrono>
#include <utility>

namespace kmt {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

template <typename Scalar>
absl::Status RunLloydSteps(const LloydRules& rules, const LloydAssign<Scalar>& assign,
                           const LloydRelocate<Scalar>& relocate, const LloydWatch& watch,
                           LloydTrajectory<Scalar>* out) {
  Matrix<Scalar>& centers = out->centers;
  // Step t assigns under the centers after t updates; the last one (after
  // `iterations`, or once converged) gives the labels.
  for (int t = 0;; ++t) {
    const bool last = t == rules.iterations;
    const auto start = Clock::now();
    const bool with_objective = t == 0 || last || rules.iteration_objectives;
    absl::StatusOr<LloydAssignment> step = assign(centers, last, with_objective);
    if (!step.ok()) return step.status();
    // Whatever an assignment answers where it was not asked.
    if (!with_objective) step->objective = std::numeric_limits<double>::quiet_NaN();
    if (t == 0) out->initial_objective = step->objective;
    if (t > 0) {
      out->objectives.push_back(step->objective);
      out->labels_changed.push_back(step->compared ? step->changed : -1);
    }
    if (watch.assigned) watch.assigned(t, last, *step);
    if (last) {
      out->objective = step->objective;
      out->counts = step->sums.counts;
      out->labels_seconds += SecondsSince(start);
      return absl::OkStatus();
    }
    if (rules.relocate) {
      absl::StatusOr<int64_t> moved = relocate(centers, &step->sums);
      if (!moved.ok()) return moved.status();
      out->relocations += *moved;
      if (*moved > 0 && watch.relocated) watch.relocated(*moved);
    }
    Matrix<Scalar> next = centers;
    out->empty_cluster_events += ApplyMeans(step->sums, &next);
    const double shift =
        (next.template cast<double>() - centers.template cast<double>()).squaredNorm();
    // Scikit-learn's order: an unchanged assignment first, then the shift.
    // Where the assignments cannot compare labels, centers that did not
    // move stop the run too (the next assignment would be this one); a
    // shift above 0 says some did, without comparing them.
    if (t > 0 && step->compared && step->changed == 0) {
      out->convergence = Convergence::kLabelsUnchanged;
    } else if (shift <= rules.center_tol) {
      out->convergence = Convergence::kTolerance;
    } else if (!(shift > 0) && next == centers) {
      out->convergence = Convergence::kLabelsUnchanged;
    }
    if (watch.updated) watch.updated(t, step->objective, shift, out->convergence);
    centers = std::move(next);
    out->iterations_run = t + 1;
    out->iteration_seconds.push_back(SecondsSince(start));
    if (out->convergence != Convergence::kNone) t = rules.iterations - 1;  // the labels step
  }
}

template absl::Status RunLloydSteps<float>(const LloydRules&, const LloydAssign<float>&,
                                           const LloydRelocate<float>&, const LloydWatch&,
                                           LloydTrajectory<float>*);
template absl::Status RunLloydSteps<double>(const LloydRules&, const LloydAssign<double>&,
                                            const LloydRelocate<double>&, const LloydWatch&,
                                            LloydTrajectory<double>*);

}  // namespace kmt
