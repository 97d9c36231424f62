// What a k-means user passes (scikit-learn's KMeans semantics) against plain
// references written here loop by loop: per-point weights (integer weights
// as repeated points, zero weights as removed points), scikit-learn's
// convergence rule, restarts, the empty-cluster policies and the distances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/engine.h"
#include "core/random.h"

namespace kmt {
namespace {

const ServedModel<double>& Model(const std::string& name) {
  static const std::vector<ServedModel<double>> models = ExactModels<double>();
  for (const ServedModel<double>& m : models) {
    if (m.name() == name) return m;
  }
  std::abort();
}

RunResult<double> RunModel(const std::string& model, BatchSpec<double> spec) {
  absl::StatusOr<Batch<double>> batch = Batch<double>::Validate(std::move(spec));
  EXPECT_TRUE(batch.ok()) << batch.status();
  absl::StatusOr<RunResult<double>> run = Cluster(Model(model), *batch);
  EXPECT_TRUE(run.ok()) << run.status();
  return *std::move(run);
}

std::string Refusal(const std::string& model, BatchSpec<double> spec) {
  absl::StatusOr<Batch<double>> batch = Batch<double>::Validate(std::move(spec));
  if (!batch.ok()) return std::string(batch.status().message());
  return std::string(Cluster(Model(model), *batch).status().message());
}

// n points around k Gaussian means in d dimensions; with `grid`, rounded to
// multiples of 1/8 so that every sum of a few thousand of them is exact in
// double.
Matrix<double> Blobs(int n, int d, int k, uint64_t seed, bool grid = false) {
  Rng rng(seed);
  Matrix<double> means(d, k), points(d, n);
  for (double& v : means.reshaped()) v = 10 * rng.Uniform();
  for (int i = 0; i < n; ++i) {
    for (int l = 0; l < d; ++l) {
      double v = means(l, i % k) + rng.Normal();
      if (grid) v = std::round(8 * v) / 8;
      points(l, i) = v;
    }
  }
  return points;
}

Vector<double> RandomWeights(int n, uint64_t seed) {
  Rng rng(seed);
  Vector<double> w(n);
  for (double& v : w) v = 0.1 + 3 * rng.Uniform();
  return w;
}

// scikit-learn's _kmeans_single_lloyd written plainly: per iteration, label
// each point by its nearest center (ties to the lowest index) by direct
// loops, the weighted means, relocation of empty clusters if asked; stop
// when the labels equal the previous iteration's or the total squared shift
// is within tol times the mean variance.
struct ReferenceRun {
  std::vector<Matrix<double>> centers;  // after each iteration
  std::vector<Labels> labels;           // of each iteration's assignment
  int iterations = 0;
  Convergence convergence = Convergence::kNone;
};

Labels NearestByLoops(const Matrix<double>& points, const Matrix<double>& centers) {
  Labels labels(points.cols());
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    double best = INFINITY;
    for (Eigen::Index j = 0; j < centers.cols(); ++j) {
      double s = 0;
      for (Eigen::Index l = 0; l < points.rows(); ++l) {
        s += (points(l, i) - centers(l, j)) * (points(l, i) - centers(l, j));
      }
      if (s < best) {
        best = s;
        labels[i] = static_cast<int>(j);
      }
    }
  }
  return labels;
}

ReferenceRun ReferenceLloyd(const Matrix<double>& points, const Vector<double>& weights,
                            Matrix<double> centers, int iterations, std::optional<double> tol,
                            bool relocate) {
  const Eigen::Index d = points.rows(), n = points.cols(), k = centers.cols();
  double tolerance = 0;
  if (tol) {
    double variance = 0;
    for (Eigen::Index l = 0; l < d; ++l) {
      double mean = 0, sq = 0;
      for (Eigen::Index i = 0; i < n; ++i) mean += points(l, i);
      mean /= static_cast<double>(n);
      for (Eigen::Index i = 0; i < n; ++i) sq += (points(l, i) - mean) * (points(l, i) - mean);
      variance += sq / static_cast<double>(n);
    }
    tolerance = *tol * variance / static_cast<double>(d);
  }
  ReferenceRun out;
  for (int t = 0; t < iterations; ++t) {
    const Labels labels = NearestByLoops(points, centers);
    Matrix<double> sums = Matrix<double>::Zero(d, k);
    Vector<double> mass = Vector<double>::Zero(k);
    for (Eigen::Index i = 0; i < n; ++i) {
      sums.col(labels[i]) += weights[i] * points.col(i);
      mass[labels[i]] += weights[i];
    }
    if (relocate) {
      std::vector<Eigen::Index> empty;
      for (Eigen::Index j = 0; j < k; ++j) {
        if (mass[j] == 0) empty.push_back(j);
      }
      std::vector<std::pair<double, Eigen::Index>> far;
      for (Eigen::Index i = 0; i < n; ++i) {
        if (weights[i] > 0) {
          far.push_back({-(points.col(i) - centers.col(labels[i])).squaredNorm(), i});
        }
      }
      std::sort(far.begin(), far.end());
      for (size_t e = 0; e < empty.size() && e < far.size(); ++e) {
        const Eigen::Index i = far[e].second;
        sums.col(labels[i]) -= weights[i] * points.col(i);
        mass[labels[i]] -= weights[i];
        sums.col(empty[e]) = weights[i] * points.col(i);
        mass[empty[e]] = weights[i];
      }
    }
    Matrix<double> next = centers;
    for (Eigen::Index j = 0; j < k; ++j) {
      if (mass[j] > 0) next.col(j) = sums.col(j) / mass[j];
    }
    const double shift = (next - centers).squaredNorm();
    centers = next;
    out.centers.push_back(centers);
    out.labels.push_back(labels);
    out.iterations = t + 1;
    if (!tol) continue;
    if (t > 0 && labels == out.labels[t - 1]) {
      out.convergence = Convergence::kLabelsUnchanged;
      break;
    }
    if (shift <= tolerance) {
      out.convergence = Convergence::kTolerance;
      break;
    }
  }
  return out;
}

TEST(Weights, WeightedLloydEqualsTheReferenceAtEveryLayer) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    const Matrix<double> points = Blobs(900, 3, 5, seed);
    const Vector<double> weights = RandomWeights(900, seed);
    const Matrix<double> init = points.leftCols(5);
    const RunResult<double> run = RunModel("lloyd-onehot", {.points = points,
                                                            .k = 5,
                                                            .layers = 8,
                                                            .given_centers = init,
                                                            .record_trajectory = true,
                                                            .weights = weights});
    const ReferenceRun reference = ReferenceLloyd(points, weights, init, 8, std::nullopt, false);
    ASSERT_EQ(run.trajectory.size(), 8u);
    for (int t = 0; t < 8; ++t) {
      SCOPED_TRACE(t);
      EXPECT_EQ(run.trajectory[t].labels, reference.labels[t]);
      EXPECT_LT((run.trajectory[t].centers - reference.centers[t]).cwiseAbs().maxCoeff(), 1e-12);
    }
    double objective = 0;
    const Labels last = NearestByLoops(points, run.centers);
    for (Eigen::Index i = 0; i < points.cols(); ++i) {
      objective += weights[i] * (points.col(i) - run.centers.col(last[i])).squaredNorm();
    }
    EXPECT_NEAR(run.objective, objective, 1e-12 * objective);
  }
}

TEST(Weights, IntegerWeightsGiveTheResultOfRepeatedPoints) {
  for (const char* model : {"lloyd-onehot", "lloyd-binary", "spherical-kmeans"}) {
    SCOPED_TRACE(model);
    const Matrix<double> points = Blobs(600, 4, 4, 7, /*grid=*/true).array() + 0.5;
    Vector<double> weights(600);
    Rng rng(3);
    for (double& w : weights) w = static_cast<double>(rng.Below(4));  // 0, 1, 2 or 3
    std::vector<Eigen::Index> repeated;
    for (Eigen::Index i = 0; i < 600; ++i) {
      for (int r = 0; r < weights[i]; ++r) repeated.push_back(i);
    }
    Matrix<double> expanded(4, static_cast<Eigen::Index>(repeated.size()));
    for (size_t c = 0; c < repeated.size(); ++c) expanded.col(c) = points.col(repeated[c]);
    const Matrix<double> init = points.leftCols(4);
    const RunResult<double> weighted = RunModel(
        model, {.points = points, .k = 4, .layers = 6, .given_centers = init, .weights = weights});
    const RunResult<double> copies =
        RunModel(model, {.points = expanded, .k = 4, .layers = 6, .given_centers = init});
    // The grid's sums are exact in double, so the means are the same numbers;
    // spherical k-means sums unit points, which are not on the grid. The
    // objective adds w times a distance once rather than the distance w
    // times: equal to round-off.
    if (std::string(model) == "spherical-kmeans") {
      EXPECT_LT((weighted.centers - copies.centers).cwiseAbs().maxCoeff(), 1e-12);
    } else {
      EXPECT_EQ(weighted.centers, copies.centers);
    }
    EXPECT_NEAR(weighted.objective, copies.objective, 1e-12 * copies.objective);
    for (int t = 0; t < 6; ++t) {
      EXPECT_NEAR(weighted.layer_objectives[t], copies.layer_objectives[t],
                  1e-12 * copies.layer_objectives[t]);
    }
    for (size_t c = 0; c < repeated.size(); ++c) {
      ASSERT_EQ(weighted.labels[repeated[c]], copies.labels[c]);
    }
  }
}

TEST(Weights, ZeroWeightsGiveTheResultOfRemovedPoints) {
  const Matrix<double> points = Blobs(500, 2, 3, 11, /*grid=*/true);
  Vector<double> weights = Vector<double>::Ones(500);
  std::vector<Eigen::Index> kept;
  for (Eigen::Index i = 0; i < 500; ++i) {
    if (i % 3 == 1) {
      weights[i] = 0;
    } else {
      kept.push_back(i);
    }
  }
  Matrix<double> remaining(2, static_cast<Eigen::Index>(kept.size()));
  for (size_t c = 0; c < kept.size(); ++c) remaining.col(c) = points.col(kept[c]);
  const Matrix<double> init = remaining.leftCols(3);
  const RunResult<double> weighted =
      RunModel("lloyd-onehot",
               {.points = points, .k = 3, .layers = 6, .given_centers = init, .weights = weights});
  const RunResult<double> removed =
      RunModel("lloyd-onehot", {.points = remaining, .k = 3, .layers = 6, .given_centers = init});
  EXPECT_EQ(weighted.centers, removed.centers);
  EXPECT_NEAR(weighted.objective, removed.objective, 1e-12 * removed.objective);
  for (size_t c = 0; c < kept.size(); ++c) ASSERT_EQ(weighted.labels[kept[c]], removed.labels[c]);
}

TEST(Weights, KMeansPlusPlusNeverChoosesAPointOfWeightZero) {
  const Matrix<double> points = Blobs(300, 2, 6, 5);
  Vector<double> weights = Vector<double>::Zero(300);
  for (Eigen::Index i = 0; i < 300; i += 10) weights[i] = 1;  // 30 points count
  for (const InitMethod init :
       {InitMethod::kKMeansPlusPlus, InitMethod::kPlainKMeansPlusPlus, InitMethod::kRandomSubset}) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const RunResult<double> run =
          RunModel("lloyd-onehot",
                   {.points = points, .k = 6, .init = init, .seed = seed, .weights = weights});
      for (Eigen::Index j = 0; j < 6; ++j) {
        bool found = false;
        for (Eigen::Index i = 0; i < 300; i += 10) found |= run.centers.col(j) == points.col(i);
        ASSERT_TRUE(found) << InitMethodName(init) << " seed " << seed << " center " << j;
      }
    }
  }
  Vector<double> few = Vector<double>::Zero(300);
  few.head(5).setOnes();
  EXPECT_EQ(Refusal("lloyd-onehot", {.points = points, .k = 6, .weights = few}),
            "only 5 points have a positive weight, fewer than k = 6");
}

TEST(Weights, AFirstCenterIsDrawnInProportionToWeight) {
  // Point 0 weighs 9 of the 10 units: over many seeds it is the first center
  // of plain k-means++ (k = 1) about 90% of the time.
  Matrix<double> points(1, 2);
  points << 0, 1;
  Vector<double> weights(2);
  weights << 9, 1;
  int first = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    first += RunModel("lloyd-onehot", {.points = points,
                                       .k = 1,
                                       .init = InitMethod::kPlainKMeansPlusPlus,
                                       .seed = seed,
                                       .weights = weights})
                 .centers(0, 0) == 0;
  }
  EXPECT_NEAR(first / 2000.0, 0.9, 0.03);
}

TEST(Weights, BadWeightsAndModelsWithoutAWeightedFormAreRefusedByName) {
  const Matrix<double> points = Blobs(20, 2, 2, 1);
  Vector<double> w = Vector<double>::Ones(20);
  EXPECT_EQ(Refusal("lloyd-onehot", {.points = points, .k = 2, .weights = w.head(19)}),
            "weights has 19 values, expected n = 20");
  w[4] = -1;
  EXPECT_EQ(Refusal("lloyd-onehot", {.points = points, .k = 2, .weights = w}),
            "weight 4 = -1, must be finite and at least 0");
  w[4] = NAN;
  EXPECT_EQ(Refusal("lloyd-onehot", {.points = points, .k = 2, .weights = w}),
            "weight 4 = nan, must be finite and at least 0");
  EXPECT_EQ(
      Refusal("lloyd-onehot", {.points = points, .k = 2, .weights = Vector<double>::Zero(20)}),
      "weights are all 0: no point would count");
  EXPECT_EQ(
      Refusal("trimmed-kmeans", {.points = points, .k = 2, .weights = Vector<double>::Ones(20)}),
      "model trimmed-kmeans takes no weights: trimmed-kmeans has no standard weighted form "
      "(ListModels says which models accept weights)");
  EXPECT_TRUE(
      RunModel("soft-kmeans", {.points = points, .k = 2, .weights = Vector<double>::Ones(20)})
          .objective > 0);
}

TEST(Weights, SoftKMeansWithIntegerWeightsEqualsRepeatedPoints) {
  const Matrix<double> points = Blobs(200, 2, 3, 9, /*grid=*/true);
  Vector<double> weights = Vector<double>::Ones(200);
  weights.head(50).setConstant(2);
  Matrix<double> expanded(2, 250);
  expanded << points, points.leftCols(50);
  const Matrix<double> init = points.leftCols(3);
  const RunResult<double> weighted = RunModel("soft-kmeans", {.points = points,
                                                              .k = 3,
                                                              .layers = 4,
                                                              .given_centers = init,
                                                              .parameters = {{"beta", 2}},
                                                              .weights = weights});
  const RunResult<double> copies = RunModel("soft-kmeans", {.points = expanded,
                                                            .k = 3,
                                                            .layers = 4,
                                                            .given_centers = init,
                                                            .parameters = {{"beta", 2}}});
  EXPECT_LT((weighted.centers - copies.centers).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_NEAR(weighted.objective, copies.objective, 1e-12 * copies.objective);
}

TEST(Convergence, StopsAtTheIterationScikitLearnsRuleSays) {
  int early = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    for (const double tol : {0.0, 1e-4, 1e-2}) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << ", tol " << tol);
      const Matrix<double> points = Blobs(1200, 3, 6, seed);
      const Vector<double> weights = seed % 2 ? RandomWeights(1200, seed) : Vector<double>();
      const Matrix<double> init = points.leftCols(6);
      const RunResult<double> run = RunModel("lloyd-onehot", {.points = points,
                                                              .k = 6,
                                                              .layers = 100,
                                                              .given_centers = init,
                                                              .weights = weights,
                                                              .tol = tol});
      const ReferenceRun reference = ReferenceLloyd(
          points, weights.size() ? weights : Vector<double>::Ones(1200), init, 100, tol, false);
      EXPECT_EQ(run.layers_run, reference.iterations);
      EXPECT_EQ(run.convergence, reference.convergence);
      EXPECT_LT((run.centers - reference.centers.back()).cwiseAbs().maxCoeff(), 1e-12);
      EXPECT_EQ(run.labels, NearestByLoops(points, run.centers));
      early += run.layers_run < 100;
    }
  }
  EXPECT_GT(early, 0);  // the rule did stop runs
}

TEST(Convergence, WithoutAToleranceEveryLayerRuns) {
  const Matrix<double> points = Blobs(300, 2, 3, 4);
  const RunResult<double> run =
      RunModel("lloyd-onehot",
               {.points = points, .k = 3, .layers = 40, .given_centers = points.leftCols(3)});
  EXPECT_EQ(run.layers_run, 40);
  EXPECT_EQ(run.convergence, Convergence::kNone);
  EXPECT_EQ(Refusal("lloyd-onehot", {.points = points, .k = 3, .tol = -1.0}),
            "tol = -1, must be finite and at least 0");
}

TEST(Restarts, TheBestOfNIsTheBestOfNSeparateRuns) {
  const Matrix<double> points = Blobs(800, 2, 8, 21);
  for (const InitMethod init : {InitMethod::kKMeansPlusPlus, InitMethod::kRandomSubset}) {
    SCOPED_TRACE(InitMethodName(init));
    const RunResult<double> best =
        RunModel("lloyd-onehot",
                 {.points = points, .k = 8, .layers = 5, .init = init, .seed = 40, .n_init = 5});
    ASSERT_EQ(best.restart_objectives.size(), 5u);
    double lowest = INFINITY;
    int which = -1;
    for (int r = 0; r < 5; ++r) {
      const RunResult<double> alone =
          RunModel("lloyd-onehot", {.points = points,
                                    .k = 8,
                                    .layers = 5,
                                    .init = init,
                                    .seed = static_cast<uint64_t>(40 + r)});
      EXPECT_EQ(best.restart_objectives[r], alone.objective);
      if (alone.objective < lowest) {
        lowest = alone.objective;
        which = r;
        EXPECT_FALSE(alone.centers.size() == 0);
      }
    }
    EXPECT_EQ(best.best_restart, which);
    EXPECT_EQ(best.objective, lowest);
  }
  EXPECT_EQ(Refusal("lloyd-onehot",
                    {.points = points, .k = 8, .given_centers = points.leftCols(8), .n_init = 2}),
            "n_init = 2 with given centers: every restart would start from them");
  EXPECT_EQ(Refusal("lloyd-onehot", {.points = points, .k = 8, .n_init = 1001}),
            "n_init = 1001, must be between 1 and 1000");
}

// Two tight groups and a third center far from every point: its cluster is
// empty after the first assignment.
struct EmptyProblem {
  Matrix<double> points, init;
};
EmptyProblem WithAnEmptyCluster() {
  EmptyProblem p{Blobs(400, 2, 2, 13), Matrix<double>(2, 3)};
  p.init << p.points.col(0), p.points.col(1), Vector<double>::Constant(2, 1e3);
  return p;
}

TEST(EmptyClusters, KeepLeavesTheCenterWhereItWas) {
  const EmptyProblem p = WithAnEmptyCluster();
  const RunResult<double> run =
      RunModel("lloyd-onehot", {.points = p.points, .k = 3, .layers = 3, .given_centers = p.init});
  EXPECT_EQ(run.centers.col(2), p.init.col(2));
  EXPECT_EQ(run.empty_cluster_events, 3);
}

TEST(EmptyClusters, RelocationEqualsScikitLearnsRuleAtEveryLayer) {
  const EmptyProblem p = WithAnEmptyCluster();
  for (const bool weighted : {false, true}) {
    SCOPED_TRACE(weighted);
    const Vector<double> weights = weighted ? RandomWeights(400, 2) : Vector<double>();
    const RunResult<double> run =
        RunModel("lloyd-onehot", {.points = p.points,
                                  .k = 3,
                                  .layers = 5,
                                  .given_centers = p.init,
                                  .record_trajectory = true,
                                  .weights = weights,
                                  .empty_clusters = EmptyClusterPolicy::kRelocateFarthest});
    const ReferenceRun reference = ReferenceLloyd(
        p.points, weighted ? weights : Vector<double>::Ones(400), p.init, 5, std::nullopt, true);
    for (int t = 0; t < 5; ++t) {
      SCOPED_TRACE(t);
      EXPECT_EQ(run.trajectory[t].labels, reference.labels[t]);
      EXPECT_LT((run.trajectory[t].centers - reference.centers[t]).cwiseAbs().maxCoeff(), 1e-12);
    }
    EXPECT_GE(run.empty_cluster_events, 1);
    // The relocated center took a data point and keeps a cluster from then on.
    EXPECT_LT(run.centers.col(2).norm(), 100);
  }
}

TEST(EmptyClusters, SplittingCopiesTheHeaviestClusterWithAPerturbation) {
  const EmptyProblem p = WithAnEmptyCluster();
  const RunResult<double> run =
      RunModel("lloyd-onehot", {.points = p.points,
                                .k = 3,
                                .layers = 1,
                                .given_centers = p.init,
                                .cluster_sums = true,
                                .empty_clusters = EmptyClusterPolicy::kSplitLargest});
  // After one layer: the means of the two groups, then the empty cluster a
  // copy of the heavier one's mean scaled by 1 +- 1/1024 alternately.
  const Labels first = NearestByLoops(p.points, p.init);
  Matrix<double> means = Matrix<double>::Zero(2, 2);
  Vector<double> counts = Vector<double>::Zero(2);
  for (Eigen::Index i = 0; i < 400; ++i) {
    means.col(first[i]) += p.points.col(i);
    ++counts[first[i]];
  }
  const int donor = counts[1] > counts[0] ? 1 : 0;
  const Vector<double> mean = means.col(donor) / counts[donor];
  const double e = 1.0 / 1024;
  EXPECT_NEAR(run.centers(0, 2), mean[0] * (1 + e), 1e-12);
  EXPECT_NEAR(run.centers(1, 2), mean[1] * (1 - e), 1e-12);
  EXPECT_NEAR(run.centers(0, donor), mean[0] * (1 - e), 1e-12);
  EXPECT_NEAR(run.centers(1, donor), mean[1] * (1 + e), 1e-12);
  EXPECT_EQ(run.empty_cluster_events, 1);
}

TEST(EmptyClusters, PoliciesApplyToMeansOnly) {
  const EmptyProblem p = WithAnEmptyCluster();
  EXPECT_EQ(Refusal("kmedoids", {.points = p.points,
                                 .k = 3,
                                 .empty_clusters = EmptyClusterPolicy::kRelocateFarthest}),
            "empty_clusters = relocate-farthest applies to models whose centers are their "
            "clusters' means (Lloyd's, spherical k-means); kmedoids keeps an empty cluster's "
            "center");
  EXPECT_TRUE(
      RunModel("spherical-kmeans", {.points = p.points.array() + 1.0,
                                    .k = 3,
                                    .layers = 3,
                                    .empty_clusters = EmptyClusterPolicy::kRelocateFarthest})
          .objective >= 0);
}

TEST(Distances, NearestAndAllAreTheSquaredDistancesToTheFinalCenters) {
  const Matrix<double> points = Blobs(300, 3, 4, 8);
  const RunResult<double> nearest =
      RunModel("lloyd-onehot",
               {.points = points, .k = 4, .layers = 3, .distances = DistanceOutput::kNearest});
  ASSERT_EQ(nearest.distances.rows(), 1);
  ASSERT_EQ(nearest.distances.cols(), 300);
  EXPECT_NEAR(nearest.distances.sum(), nearest.objective, 1e-12 * nearest.objective);
  const RunResult<double> all = RunModel(
      "lloyd-onehot", {.points = points, .k = 4, .layers = 3, .distances = DistanceOutput::kAll});
  ASSERT_EQ(all.distances.rows(), 4);
  ASSERT_EQ(all.distances.cols(), 300);
  for (Eigen::Index i = 0; i < 300; ++i) {
    for (Eigen::Index j = 0; j < 4; ++j) {
      const double direct = (points.col(i) - all.centers.col(j)).squaredNorm();
      ASSERT_NEAR(all.distances(j, i), direct, 1e-9 * (1 + direct));
    }
    EXPECT_NEAR(all.distances.col(i).minCoeff(), nearest.distances(0, i),
                1e-9 * (1 + nearest.distances(0, i)));
  }
}

}  // namespace
}  // namespace kmt
