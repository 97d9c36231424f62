// The bound-based assignment in the fast path against the products it
// replaces: at every layer the same labels, centers, objective, cluster sums
// and empty-cluster counts to the last bit, on problems built to make bounds
// fail (centers that jump, duplicates, exact ties, large coordinates,
// weights, empty clusters under each policy), and the labels against plain
// reference Lloyd's. In float and double.
#include "core/bounds.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/algorithm.h"
#include "core/assign.h"
#include "core/random.h"
#include "core/transformer.h"
#include "core/unit_norm.h"
#include "reference/lloyd.h"
#include "tests/support/gaussian_clusters.h"
#include "tests/support/simd_levels.h"

namespace kmt {
namespace {

template <typename Scalar>
struct Problem {
  std::string name;
  Matrix<Scalar> points, centers;
  Vector<Scalar> weights;  // empty: 1 each
  EmptyClusterPolicy empty_clusters = EmptyClusterPolicy::kKeep;
  const Algorithm* algorithm = &LloydAlgorithm();
  int layers = 12;
};

template <typename Scalar>
Matrix<Scalar> Blobs(int n, int d, int k, uint64_t seed, double scale = 0.05) {
  return GaussianClusters<Scalar>({.n = n, .d = d, .k = k, .scale = scale}, seed).points;
}

template <typename Scalar>
std::vector<Problem<Scalar>> Problems() {
  std::vector<Problem<Scalar>> problems;
  const auto add = [&](std::string name, Matrix<Scalar> points, int k) {
    Problem<Scalar> p{.name = std::move(name), .points = std::move(points)};
    p.centers = p.points.leftCols(k);
    problems.push_back(std::move(p));
    return &problems.back();
  };
  add("blobs", Blobs<Scalar>(3000, 8, 10, 1), 10);
  add("blobs-many-centers", Blobs<Scalar>(4000, 3, 64, 2), 64);
  add("one-center", Blobs<Scalar>(500, 4, 3, 3), 1);
  // Duplicates and exact ties: an integer grid, repeated points, centers on
  // the grid (several of them equal).
  {
    Rng rng(4);
    Matrix<Scalar> grid(3, 2000);
    for (Eigen::Index i = 0; i < grid.size(); ++i) {
      grid.data()[i] = static_cast<Scalar>(rng.Below(4));
    }
    grid.rightCols(500) = grid.leftCols(500);
    add("grid-ties", grid, 12);
  }
  // Large coordinates: blobs far from the origin, where the products'
  // round-off is large against the distances.
  for (const double offset : {1e4, 1e5, 1e6}) {
    Matrix<Scalar> points = Blobs<Scalar>(2000, 4, 6, 5, 0.1);
    points = (points.array() * Scalar(100) + static_cast<Scalar>(offset)).matrix();
    add("offset-" + std::to_string(static_cast<int>(offset)), points, 6);
  }
  // Centers that jump: a far center whose cluster empties, under each
  // policy (relocation and splitting move centers across the data).
  for (const EmptyClusterPolicy policy :
       {EmptyClusterPolicy::kKeep, EmptyClusterPolicy::kRelocateFarthest,
        EmptyClusterPolicy::kSplitLargest}) {
    Problem<Scalar>* p = add(std::string("empty-") + std::string(EmptyClusterPolicyName(policy)),
                             Blobs<Scalar>(2500, 5, 8, 6), 8);
    p->centers.col(3).setConstant(Scalar(40));
    p->centers.col(6).setConstant(Scalar(-40));
    p->empty_clusters = policy;
  }
  // Many centers, so that the bounds come in groups: far centers whose
  // clusters empty and jump under each policy (with weights under
  // relocation), duplicate points and centers on a grid, large coordinates.
  for (const EmptyClusterPolicy policy :
       {EmptyClusterPolicy::kKeep, EmptyClusterPolicy::kRelocateFarthest,
        EmptyClusterPolicy::kSplitLargest}) {
    Problem<Scalar>* p =
        add(std::string("groups-empty-") + std::string(EmptyClusterPolicyName(policy)),
            Blobs<Scalar>(5000, 6, 30, 13), 48);
    for (int j = 40; j < 48; ++j) p->centers.col(j).setConstant(Scalar(j % 2 == 0 ? 30 : -30));
    p->empty_clusters = policy;
    p->layers = 20;
    if (policy == EmptyClusterPolicy::kRelocateFarthest) {
      Rng rng(13);
      p->weights.resize(p->points.cols());
      for (Eigen::Index i = 0; i < p->weights.size(); ++i) {
        p->weights[i] = i % 5 == 0 ? Scalar(0) : static_cast<Scalar>(0.5 + rng.Uniform());
      }
    }
  }
  {
    Rng rng(14);
    Matrix<Scalar> grid(4, 4000);
    for (Eigen::Index i = 0; i < grid.size(); ++i) {
      grid.data()[i] = static_cast<Scalar>(rng.Below(5));
    }
    grid.rightCols(1000) = grid.leftCols(1000);
    Problem<Scalar>* p = add("groups-grid-ties", grid, 40);
    p->centers.rightCols(10) = p->centers.leftCols(10);
  }
  {
    Matrix<Scalar> points = Blobs<Scalar>(4000, 5, 32, 15, 0.1);
    points = (points.array() * Scalar(100) + Scalar(1e5)).matrix();
    add("groups-offset-100000", points, 32);
  }
  // Many coordinates, where the assignment filters its scores in low
  // precision (core/simd.h) where the CPU has the filter: groups whose
  // bounds come from the scan's scores.
  add("wide-groups", Blobs<Scalar>(6000, 128, 40, 16), 64);
  // All centers at one point: every cluster but the first starts empty.
  {
    Problem<Scalar>* p = add("equal-centers-split", Blobs<Scalar>(1500, 2, 5, 7), 5);
    for (int j = 1; j < 5; ++j) p->centers.col(j) = p->centers.col(0);
    p->empty_clusters = EmptyClusterPolicy::kSplitLargest;
  }
  // Weights, some 0.
  {
    Problem<Scalar>* p = add("weights", Blobs<Scalar>(3000, 6, 9, 8), 9);
    Rng rng(8);
    p->weights.resize(p->points.cols());
    for (Eigen::Index i = 0; i < p->weights.size(); ++i) {
      p->weights[i] = i % 7 == 0 ? Scalar(0) : static_cast<Scalar>(0.25 + 3 * rng.Uniform());
    }
    p->empty_clusters = EmptyClusterPolicy::kRelocateFarthest;
  }
  // Spherical k-means: unit points and centers, the sums normalized.
  {
    Matrix<Scalar> points = Blobs<Scalar>(2000, 6, 7, 9);
    points.array() -= Scalar(0.5);
    ScaleToUnitNorm<Scalar>(points);
    Problem<Scalar>* p = add("spherical", points, 7);
    p->algorithm = FindAlgorithm("spherical-kmeans");
  }
  return problems;
}

// Every layer recorded, with its objective; without `every_layer`, the last
// layer's objective alone (the bound path need not read the points its
// upper bounds settle), run to `shift_tolerance` if given.
template <typename Scalar>
RunResult<Scalar> Run(const Problem<Scalar>& p, AssignmentPath assignment,
                      SumsPath sums = SumsPath::kAuto, bool every_layer = true,
                      std::optional<double> shift_tolerance = std::nullopt) {
  const InputMap<Scalar> identity(InputScaling::kNone, p.points);
  const ParameterValues parameters;
  absl::StatusOr<RunResult<Scalar>> run =
      Evaluate<Scalar>({.k = static_cast<int>(p.centers.cols()),
                        .algorithm = p.algorithm,
                        .parameters = &parameters,
                        .point_weights = p.weights.size() > 0 ? &p.weights : nullptr},
                       p.points, p.points, identity, p.centers,
                       {.layers = p.layers,
                        .record_trajectory = every_layer,
                        .layer_objectives = every_layer,
                        .cluster_sums = true,
                        .shift_tolerance = shift_tolerance,
                        .empty_clusters = p.empty_clusters,
                        .assignment = assignment,
                        .sums = sums});
  EXPECT_TRUE(run.ok()) << run.status();
  return *std::move(run);
}

// The last layer's objective alone, with exact sums.
template <typename Scalar>
RunResult<Scalar> RunForTheAnswer(const Problem<Scalar>& p, AssignmentPath assignment,
                                  std::optional<double> shift_tolerance = std::nullopt) {
  return Run(p, assignment, SumsPath::kExact, false, shift_tolerance);
}

// The run's end alike: labels, centers, objective, layers, why it stopped,
// empty clusters and sums.
template <typename Scalar>
void ExpectSameEnd(const RunResult<Scalar>& got, const RunResult<Scalar>& want) {
  EXPECT_EQ(got.labels, want.labels);
  EXPECT_EQ(got.centers, want.centers);
  EXPECT_EQ(got.objective, want.objective);
  EXPECT_EQ(got.layers_run, want.layers_run);
  EXPECT_EQ(got.convergence, want.convergence);
  EXPECT_EQ(got.empty_cluster_events, want.empty_cluster_events);
  ASSERT_TRUE(got.cluster_sums.has_value() && want.cluster_sums.has_value());
  EXPECT_EQ(got.cluster_sums->sums, want.cluster_sums->sums);
  EXPECT_EQ(got.cluster_sums->counts, want.cluster_sums->counts);
  EXPECT_EQ(got.cluster_sums->weights, want.cluster_sums->weights);
}

// The end alike; of the layers' objectives only the last, the others NaN.
template <typename Scalar>
void ExpectSameAnswer(const RunResult<Scalar>& got, const RunResult<Scalar>& want) {
  ExpectSameEnd(got, want);
  ASSERT_EQ(got.layer_objectives.size(), want.layer_objectives.size());
  ASSERT_FALSE(got.layer_objectives.empty());
  for (size_t t = 0; t + 1 < got.layer_objectives.size(); ++t) {
    EXPECT_TRUE(std::isnan(got.layer_objectives[t])) << "layer " << t;
  }
  EXPECT_EQ(got.layer_objectives.back(), want.layer_objectives.back());
}

// Bit for bit, every layer.
template <typename Scalar>
void ExpectIdentical(const RunResult<Scalar>& got, const RunResult<Scalar>& want) {
  ASSERT_EQ(got.trajectory.size(), want.trajectory.size());
  for (size_t t = 0; t < want.trajectory.size(); ++t) {
    SCOPED_TRACE(testing::Message() << "layer " << t);
    ASSERT_EQ(got.trajectory[t].labels, want.trajectory[t].labels);
    ASSERT_EQ(got.trajectory[t].centers, want.trajectory[t].centers);
    EXPECT_EQ(got.trajectory[t].objective, want.trajectory[t].objective);
    EXPECT_EQ(got.trajectory[t].empty_clusters, want.trajectory[t].empty_clusters);
  }
  EXPECT_EQ(got.layer_objectives, want.layer_objectives);
  ExpectSameEnd(got, want);
}

template <typename Scalar>
class BoundsTest : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BoundsTest, Scalars);

TYPED_TEST(BoundsTest, BoundsGiveTheProductsResultsToTheLastBit) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    for (const Problem<S>& p : Problems<S>()) {
      SCOPED_TRACE(p.name);
      const RunResult<S> products = Run(p, AssignmentPath::kProducts);
      EXPECT_TRUE(products.assignments.empty());
      const RunResult<S> bounds = Run(p, AssignmentPath::kBounds);
      ExpectIdentical(bounds, products);
      ExpectIdentical(Run(p, AssignmentPath::kAuto), products);
      // Every assignment after the first went through the bounds.
      ASSERT_EQ(bounds.assignments.size(), static_cast<size_t>(p.layers + 1));
      EXPECT_FALSE(bounds.assignments[0].bounded);
      for (size_t a = 1; a < bounds.assignments.size(); ++a) {
        EXPECT_TRUE(bounds.assignments[a].bounded);
      }
      // Each assignment counted the labels it changed (the first: all).
      EXPECT_EQ(bounds.assignments[0].changed, p.points.cols());
      for (size_t a = 1; a < bounds.assignments.size(); ++a) {
        const Labels& before = bounds.trajectory[a - 1].labels;
        const Labels& after =
            a < bounds.trajectory.size() ? bounds.trajectory[a].labels : bounds.labels;
        int64_t changed = 0;
        for (size_t i = 0; i < after.size(); ++i) changed += before[i] != after[i];
        EXPECT_EQ(bounds.assignments[a].changed, changed) << "assignment " << a;
      }
    }
  });
}

// With and without each low-precision filter the CPU has, every path gives
// the same bits: the filter's labels, distances and gaps are the float32
// scan's, and a call that reads the scan's scores does not filter.
TYPED_TEST(BoundsTest, TheLowPrecisionFilterChangesNoBit) {
  if (CpuLowPrecisionFilters().empty()) GTEST_SKIP() << "this CPU has no low-precision filter";
  using S = TypeParam;
  for (const Problem<S>& p : Problems<S>()) {
    if (p.points.rows() < 64) continue;
    SCOPED_TRACE(p.name);
    for (const AssignmentPath path :
         {AssignmentPath::kProducts, AssignmentPath::kBounds, AssignmentPath::kAuto}) {
      ASSERT_TRUE(UseLowPrecisionFilter("off").ok());
      const RunResult<S> plain = Run(p, path);
      for (LowPrecisionFilter kind : CpuLowPrecisionFilters()) {
        SCOPED_TRACE(LowPrecisionFilterName(kind));
        ASSERT_TRUE(UseLowPrecisionFilter(LowPrecisionFilterName(kind)).ok());
        ExpectIdentical(Run(p, path), plain);
      }
      ASSERT_TRUE(UseLowPrecisionFilter("auto").ok());
      ExpectIdentical(Run(p, path), plain);
    }
  }
}

// Not a vacuous comparison: on separated blobs the bounds settle most points
// once the centers settle, and on every problem some.
TYPED_TEST(BoundsTest, BoundsSettleMostPointsOnSeparatedBlobs) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    for (const Problem<S>& p : Problems<S>()) {
      SCOPED_TRACE(p.name);
      const RunResult<S> run = Run(p, AssignmentPath::kBounds);
      const int64_t n = p.points.cols();
      EXPECT_GT(run.assignments.back().settled, 0);
      if (p.name == "blobs" || p.name == "one-center") {
        EXPECT_GT(run.assignments.back().settled, n * 9 / 10);
      }
    }
  });
}

// With many centers the bounds come in groups, and the group filter decides
// some of the points the global test leaves open, by the distances to the
// centers of the groups it does not exclude alone.
TYPED_TEST(BoundsTest, GroupFilterDecidesPointsTheGlobalTestLeavesOpen) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    for (const Problem<S>& p : Problems<S>()) {
      if (p.centers.cols() < 20) continue;
      SCOPED_TRACE(p.name);
      const RunResult<S> run = Run(p, AssignmentPath::kBounds);
      int64_t grouped = 0;
      for (const AssignmentStats& a : run.assignments) grouped += a.grouped;
      EXPECT_GT(grouped, 0);
    }
  });
}

// Layer by layer on the assignment alone: one center at a time jumps to a
// point of an integer grid, where exact ties with lower-index centers
// abound, and every call's labels, objective and sums equal AssignNearest's
// on the same centers, bounds forced and automatic.
TYPED_TEST(BoundsTest, CentersJumpingOntoTiesGiveTheProductsResultsAtEveryCall) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(21);
    Matrix<S> points(3, 3000), start(3, 40);
    for (Eigen::Index i = 0; i < points.size(); ++i)
      points.data()[i] = static_cast<S>(rng.Below(6));
    for (Eigen::Index i = 0; i < start.size(); ++i) start.data()[i] = static_cast<S>(rng.Below(6));
    for (const AssignmentPath path : {AssignmentPath::kBounds, AssignmentPath::kAuto}) {
      BoundedAssignment<S> bounded(points, nullptr, path);
      Matrix<S> centers = start;
      int64_t grouped = 0;
      for (int call = 0; call < 40; ++call) {
        SCOPED_TRACE(testing::Message() << "call " << call);
        if (call > 0) {
          const Eigen::Index j = static_cast<Eigen::Index>(rng.Below(40));
          for (Eigen::Index l = 0; l < 3; ++l) centers(l, j) = static_cast<S>(rng.Below(6));
        }
        Labels got, want;
        ClusterSums got_sums(3, 40), want_sums(3, 40);
        const double got_objective = bounded.Assign(centers, &got, &got_sums);
        const double want_objective = AssignNearest(points, centers, &want, nullptr, &want_sums);
        ASSERT_EQ(got, want);
        EXPECT_EQ(got_objective, want_objective);
        EXPECT_EQ(got_sums.sums, want_sums.sums);
        EXPECT_EQ(got_sums.counts, want_sums.counts);
        grouped += bounded.stats().back().grouped;
      }
      // The group filter took part, where it is forced.
      if (path == AssignmentPath::kBounds) {
        EXPECT_GT(grouped, 0);
      }
    }
  });
}

// The labels of every layer against plain Lloyd's assignment (direct
// distances, ties to the lowest index) to the centers that layer assigned
// to, on every problem; and, in double, whole runs against reference
// Lloyd's where it runs the same rule (unweighted, empty clusters kept). In
// float the reference's own float sums drift from the engine's double ones
// on the far-off problems, which says nothing of the assignment.
TYPED_TEST(BoundsTest, LabelsEqualReferenceLloydAtEveryLayer) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    for (const Problem<S>& p : Problems<S>()) {
      SCOPED_TRACE(p.name);
      const RunResult<S> run = Run(p, AssignmentPath::kBounds);
      for (size_t t = 0; t < run.trajectory.size(); ++t) {
        SCOPED_TRACE(testing::Message() << "layer " << t);
        const Matrix<S>& centers = t == 0 ? p.centers : run.trajectory[t - 1].centers;
        ASSERT_EQ(run.trajectory[t].labels, ReferenceLabels(p.points, centers));
      }
      EXPECT_EQ(run.labels, ReferenceLabels(p.points, run.centers));
      if (!std::is_same_v<S, double> || p.weights.size() > 0 ||
          p.empty_clusters != EmptyClusterPolicy::kKeep || p.algorithm != &LloydAlgorithm()) {
        continue;
      }
      const auto reference = ReferenceLloyd(p.points, p.centers, p.layers);
      ASSERT_EQ(run.trajectory.size(), reference.size());
      for (size_t t = 0; t < reference.size(); ++t) {
        ASSERT_EQ(run.trajectory[t].labels, reference[t].labels) << "layer " << t;
      }
    }
  });
}

// Exact sums, updated by the points that moved: the products, the bounds
// and the automatic choice give the same bits at every layer, on every
// problem (relocation and splitting included), and the final sums are the
// exact sums rounded once (binary128 sums in the reference). Weighted double
// points have no exact sums (their products are not doubles): those runs
// keep double sums, alike on every path.
TYPED_TEST(BoundsTest, ExactSumsGiveTheSameBitsOnEveryPathAndAreTheExactSumsRounded) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    int64_t from_moves = 0;
    for (const Problem<S>& p : Problems<S>()) {
      SCOPED_TRACE(p.name);
      const RunResult<S> products = Run(p, AssignmentPath::kProducts, SumsPath::kExact);
      const RunResult<S> bounds = Run(p, AssignmentPath::kBounds, SumsPath::kExact);
      ExpectIdentical(bounds, products);
      ExpectIdentical(Run(p, AssignmentPath::kAuto, SumsPath::kExact), products);
      const Vector<S>* weights = p.weights.size() > 0 ? &p.weights : nullptr;
      if (std::is_same_v<S, double> && weights != nullptr) continue;
      const ClusterSums want = ReferenceRoundedSums(p.points, products.labels,
                                                    static_cast<int>(p.centers.cols()), weights);
      EXPECT_EQ(products.cluster_sums->sums, want.sums);
      EXPECT_EQ(products.cluster_sums->counts, want.counts);
      EXPECT_EQ(products.cluster_sums->weights, want.weights);
      for (const RunResult<S>* run : {&products, &bounds}) {
        for (const AssignmentStats& a : run->assignments) from_moves += a.sums_from_moves;
      }
    }
    // The sums followed the moved points, not only sums from scratch.
    EXPECT_GT(from_moves, 0);
  });
}

// Where the bounds may pay, the sums are exact by default, on each path
// alike, and once the centers settle they follow the few points that move.
TYPED_TEST(BoundsTest, LargeRunsKeepExactSumsUpdatedByTheMovedPoints) {
  using S = TypeParam;
  Problem<S> blobs{.name = "blobs", .points = Blobs<S>(20000, 8, 40, 16)};
  blobs.centers = blobs.points.leftCols(40);
  blobs.layers = 15;
  blobs.empty_clusters = EmptyClusterPolicy::kRelocateFarthest;
  const RunResult<S> run = Run(blobs, AssignmentPath::kAuto);
  ExpectIdentical(run, Run(blobs, AssignmentPath::kProducts));
  ExpectIdentical(run, Run(blobs, AssignmentPath::kBounds, SumsPath::kExact));
  const ClusterSums want = ReferenceRoundedSums(blobs.points, run.labels, 40);
  EXPECT_EQ(run.cluster_sums->sums, want.sums);
  ASSERT_EQ(run.assignments.size(), 16u);
  EXPECT_FALSE(run.assignments[0].sums_from_moves);
  EXPECT_TRUE(run.assignments.back().sums_from_moves);
  EXPECT_LT(run.assignments.back().moved, 20000 / 100);
}

// Without the layers' objectives, the bound path keeps Hamerly's upper
// bound on each point's distance to its own center and does not read a
// point that bound settles: the answer is the products' all the same, on
// every problem, forced bounds and automatic, and to convergence on blobs
// large enough for the automatic choice.
TYPED_TEST(BoundsTest, RunsWithoutLayerObjectivesSkipSettledPointsAndAnswerAlike) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    int64_t unread = 0;
    for (const Problem<S>& p : Problems<S>()) {
      SCOPED_TRACE(p.name);
      const RunResult<S> want = Run(p, AssignmentPath::kProducts, SumsPath::kExact);
      for (const AssignmentPath path : {AssignmentPath::kBounds, AssignmentPath::kAuto}) {
        const RunResult<S> got = RunForTheAnswer(p, path);
        ExpectSameAnswer(got, want);
        for (const AssignmentStats& a : got.assignments) unread += a.unread;
      }
    }
    EXPECT_GT(unread, 0);
    Problem<S> blobs{.name = "blobs", .points = Blobs<S>(20000, 8, 40, 17)};
    blobs.centers = blobs.points.leftCols(40);
    blobs.layers = 100;
    const RunResult<S> want = RunForTheAnswer(blobs, AssignmentPath::kProducts, 0.0);
    const RunResult<S> got = RunForTheAnswer(blobs, AssignmentPath::kAuto, 0.0);
    EXPECT_NE(want.convergence, Convergence::kNone);
    ExpectSameAnswer(got, want);
    int64_t blob_unread = 0;
    for (const AssignmentStats& a : got.assignments) blob_unread += a.unread;
    EXPECT_GT(blob_unread, 0);
  });
}

// Without every layer's objective, the products path assigns the layers
// before the last for their labels alone (AssignNearest without the
// objective, the near-tie test from the points' norms): the same end, to
// the bit, as a run that reports every layer, on every problem and on
// problems whose d and k take the register kernel's lanes, far from the
// origin with exact and near ties.
TYPED_TEST(BoundsTest, ProductsWithoutLayerObjectivesAnswerAlike) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    std::vector<Problem<S>> problems = Problems<S>();
    Rng rng(23);
    for (const auto& [d, k] : {std::pair{32, 16}, std::pair{35, 29}, std::pair{16, 5}}) {
      Matrix<S> points(d, 3001);
      for (Eigen::Index i = 0; i < points.size(); ++i) {
        points.data()[i] = static_cast<S>(100 + rng.Below(3) + 1e-3 * rng.Uniform());
      }
      Problem<S> p{.name = "lanes-" + std::to_string(d) + "-" + std::to_string(k),
                   .points = points};
      p.centers = p.points.leftCols(k);
      problems.push_back(std::move(p));
    }
    for (const Problem<S>& p : problems) {
      SCOPED_TRACE(p.name);
      ExpectSameAnswer(Run(p, AssignmentPath::kProducts, SumsPath::kDouble, false),
                       Run(p, AssignmentPath::kProducts, SumsPath::kDouble, true));
    }
  });
}

// The automatic choice takes the products where the bounds settle few
// points (uniform data, many centers, the first layers) or few centers or
// few points make the products cheap, and the bounds where they settle many.
TYPED_TEST(BoundsTest, AutomaticChoiceFollowsTheSettledFraction) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    const int n = 20000;
    Problem<S> blobs{.name = "blobs", .points = Blobs<S>(n, 8, 32, 11)};
    blobs.centers = blobs.points.leftCols(32);
    blobs.layers = 15;
    const RunResult<S> run = Run(blobs, AssignmentPath::kAuto);
    EXPECT_FALSE(run.assignments[0].bounded);
    EXPECT_TRUE(run.assignments.back().bounded);
    // The second assignment tries the bounds; each later one follows the
    // fraction of the one before: max(0.1, min(0.5, 8 / 32)).
    EXPECT_TRUE(run.assignments[1].bounded);
    for (size_t a = 2; a < run.assignments.size(); ++a) {
      const bool enough = run.assignments[a - 1].settled >= n / 4;
      EXPECT_EQ(run.assignments[a].bounded, enough) << "assignment " << a;
    }

    // Few centers, or few points, keep to the products.
    Problem<S> few = blobs;
    few.centers = blobs.points.leftCols(16);
    EXPECT_TRUE(Run(few, AssignmentPath::kAuto).assignments.empty());
    Problem<S> small = blobs;
    small.points = blobs.points.leftCols(16383);
    EXPECT_TRUE(Run(small, AssignmentPath::kAuto).assignments.empty());

    Rng rng(12);
    Problem<S> uniform{.name = "uniform", .points = Matrix<S>(16, n)};
    for (Eigen::Index i = 0; i < uniform.points.size(); ++i) {
      uniform.points.data()[i] = static_cast<S>(rng.Uniform());
    }
    uniform.centers = uniform.points.leftCols(100);
    uniform.layers = 3;
    const RunResult<S> early = Run(uniform, AssignmentPath::kAuto);
    ASSERT_EQ(early.assignments.size(), 4u);
    EXPECT_LT(early.assignments[1].settled, n / 10);
    EXPECT_FALSE(early.assignments[2].bounded);
    EXPECT_FALSE(early.assignments[3].bounded);
  });
}

}  // namespace
}  // namespace kmt
