#include "core/lloyd_steps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/cluster_sums.h"
#include "reference/lloyd.h"
#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

// The assignment as a plain caller makes it: the reference's labels and
// objective (direct loops), the core's sums under them, and how many labels
// changed since the assignment before.
struct PlainAssign {
  const Matrix<double>& points;
  Labels previous;
  int calls = 0;
  std::vector<Matrix<double>> seen;  // the centers of each call

  absl::StatusOr<LloydAssignment> operator()(const Matrix<double>& centers, bool, bool) {
    LloydAssignment step{
        .sums = ClusterSums(static_cast<int>(points.rows()), static_cast<int>(centers.cols()))};
    seen.push_back(centers);
    const Labels labels = ReferenceLabels(points, centers);
    AccumulateClusterSums(points, labels, &step.sums);
    step.objective = ReferenceObjective(points, centers);
    step.compared = calls > 0;
    for (size_t i = 0; step.compared && i < labels.size(); ++i) {
      step.changed += labels[i] != previous[i];
    }
    previous = labels;
    ++calls;
    return step;
  }
};

absl::StatusOr<int64_t> NoRelocation(const Matrix<double>&, ClusterSums*) { return 0; }

// Iteration by iteration, the loop's labels and centers are the plain
// reference's (ReferenceLloyd: the nearest center, ties to the lowest index;
// the mean of each cluster, an empty one keeping its center), and its
// objectives after each update the reference objective of those centers.
TEST(LloydSteps, FollowReferenceLloydStepByStep) {
  const Matrix<double> points = GaussianClusters<double>({.n = 400, .d = 5, .k = 6}, 3).points;
  const Matrix<double> start = points.leftCols(6);
  const int iterations = 5;  // before the labels stop changing (at 7)
  const std::vector<LloydIteration<double>> reference = ReferenceLloyd(points, start, iterations);
  PlainAssign plain{points};
  LloydTrajectory<double> trajectory;
  trajectory.centers = start;
  std::vector<Labels> labels;
  LloydWatch watch;
  watch.assigned = [&](int, bool, const LloydAssignment&) { labels.push_back(plain.previous); };
  const LloydRules rules{.iterations = iterations, .center_tol = -1};
  ASSERT_TRUE(RunLloydSteps<double>(rules, std::ref(plain), NoRelocation, watch, &trajectory).ok());
  ASSERT_EQ(trajectory.iterations_run, iterations);
  ASSERT_EQ(trajectory.objectives.size(), static_cast<size_t>(iterations));
  for (int t = 0; t < iterations; ++t) {
    SCOPED_TRACE(t);
    EXPECT_EQ(labels[t], reference[t].labels);
    // The centers the next assignment was asked under: this update's.
    EXPECT_LE((plain.seen[t + 1] - reference[t].centers).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_NEAR(trajectory.objectives[t], reference[t].objective, 1e-12 * reference[t].objective);
  }
  EXPECT_LE((trajectory.centers - reference.back().centers).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_EQ(trajectory.initial_objective, ReferenceObjective(points, start));
  EXPECT_EQ(trajectory.objective, trajectory.objectives.back());
  EXPECT_EQ(trajectory.convergence, Convergence::kNone);
  EXPECT_EQ(plain.calls, iterations + 1);  // the last assignment gives the labels
}

// Scikit-learn's stopping rules, in its order: an assignment that changed
// no label, then a shift within the tolerance; the labels' assignment
// follows the update that stops.
TEST(LloydSteps, StopAsScikitLearnStops) {
  const Matrix<double> points = GaussianClusters<double>({.n = 300, .d = 4, .k = 3}, 9).points;
  const Matrix<double> start = points.leftCols(3);
  {
    PlainAssign plain{points};
    LloydTrajectory<double> trajectory;
    trajectory.centers = start;
    const LloydRules rules{.iterations = 100, .center_tol = -1};
    ASSERT_TRUE(RunLloydSteps<double>(rules, std::ref(plain), NoRelocation, {}, &trajectory).ok());
    EXPECT_EQ(trajectory.convergence, Convergence::kLabelsUnchanged);
    EXPECT_LT(trajectory.iterations_run, 100);
    EXPECT_EQ(trajectory.labels_changed.back(), 0);
    EXPECT_EQ(plain.calls, trajectory.iterations_run + 1);
  }
  {
    // A tolerance above the first update's shift stops after it.
    PlainAssign plain{points};
    LloydTrajectory<double> trajectory;
    trajectory.centers = start;
    double first_shift = -1;
    LloydWatch watch;
    watch.updated = [&](int t, double, double shift, Convergence) {
      if (t == 0) first_shift = shift;
    };
    const LloydRules rules{.iterations = 100, .center_tol = 1e300};
    ASSERT_TRUE(
        RunLloydSteps<double>(rules, std::ref(plain), NoRelocation, watch, &trajectory).ok());
    EXPECT_GT(first_shift, 0);
    EXPECT_EQ(trajectory.convergence, Convergence::kTolerance);
    EXPECT_EQ(trajectory.iterations_run, 1);
    EXPECT_EQ(plain.calls, 2);
  }
}

// Without iteration objectives the assignments between the first and the
// last are not asked for theirs, and the trajectory holds NaN there; the
// relocations the caller's function makes are counted; an assignment's
// error ends the loop with it.
TEST(LloydSteps, ObjectivesRelocationsAndErrorsAreTheCallersAnswers) {
  const Matrix<double> points = GaussianClusters<double>({.n = 200, .d = 3, .k = 4}, 5).points;
  PlainAssign plain{points};
  std::vector<bool> asked;
  const LloydAssign<double> assign = [&](const Matrix<double>& centers, bool last, bool objective) {
    asked.push_back(objective);
    return plain(centers, last, objective);
  };
  int relocations = 0;
  const LloydRelocate<double> relocate = [&](const Matrix<double>&,
                                             ClusterSums*) -> absl::StatusOr<int64_t> {
    ++relocations;
    return 2;
  };
  LloydTrajectory<double> trajectory;
  trajectory.centers = points.leftCols(4);
  const LloydRules rules{
      .iterations = 3, .center_tol = -1, .relocate = true, .iteration_objectives = false};
  ASSERT_TRUE(RunLloydSteps<double>(rules, assign, relocate, {}, &trajectory).ok());
  ASSERT_EQ(trajectory.iterations_run, 3);
  EXPECT_EQ(asked, (std::vector<bool>{true, false, false, true}));
  EXPECT_TRUE(std::isnan(trajectory.objectives[0]));
  EXPECT_TRUE(std::isnan(trajectory.objectives[1]));
  EXPECT_FALSE(std::isnan(trajectory.objectives[2]));
  EXPECT_EQ(relocations, 3);
  EXPECT_EQ(trajectory.relocations, 6);

  int calls = 0;
  const LloydAssign<double> failing = [&](const Matrix<double>& centers, bool last,
                                          bool objective) -> absl::StatusOr<LloydAssignment> {
    if (++calls == 2) return absl::UnavailableError("the shard went away");
    return plain(centers, last, objective);
  };
  LloydTrajectory<double> failed;
  failed.centers = points.leftCols(4);
  const absl::Status status =
      RunLloydSteps<double>({.iterations = 5}, failing, NoRelocation, {}, &failed);
  EXPECT_EQ(status, absl::UnavailableError("the shard went away"));
}

}  // namespace
}  // namespace kmt
