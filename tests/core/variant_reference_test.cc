// The plain references of Lloyd's variants: a hand-worked run of each, and the
// limits and invariants that tie each variant to Lloyd's, in float and double.
#include "reference/variant_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "core/random.h"
#include "reference/lloyd.h"
#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

template <typename Scalar>
class VariantReferenceTest : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(VariantReferenceTest, Scalars);

// A tolerance for values of order one: the first in double, the second in float.
template <typename S>
double Tolerance(double in_double, double in_float) {
  return sizeof(S) == 8 ? in_double : in_float;
}

// Three clusters of 20 points in boxes [-1, 1]^2 around (0, 0), (10, 0) and
// (0, 10): every point is at least 56 nearer (squared) its own cluster's
// center than any other. Point i is in cluster i % 3, so the first three
// points seed one center per cluster.
template <typename S>
Matrix<S> SeparatedPoints(uint64_t seed) {
  Rng rng(seed);
  Matrix<S> points(2, 60);
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    points(0, i) = static_cast<S>((i % 3 == 1 ? 10 : 0) + 2 * rng.Uniform() - 1);
    points(1, i) = static_cast<S>((i % 3 == 2 ? 10 : 0) + 2 * rng.Uniform() - 1);
  }
  return points;
}

// Overlapping clusters from the training task generator, where ties and
// near ties between clusters do happen.
template <typename S>
Matrix<S> MixturePoints(uint64_t seed) {
  return GaussianClusters<S>({.n = 300, .d = 4, .k = 6}, seed).points;
}

// The points of each cluster, in increasing index.
std::vector<std::vector<Eigen::Index>> ClustersOf(const Labels& labels, Eigen::Index k) {
  std::vector<std::vector<Eigen::Index>> clusters(k);
  for (size_t i = 0; i < labels.size(); ++i) clusters[labels[i]].push_back(i);
  return clusters;
}

// The centers an iteration started from.
template <typename S>
const Matrix<S>& CentersBefore(const std::vector<LloydIteration<S>>& history, size_t t,
                               const Matrix<S>& init) {
  return t == 0 ? init : history[t - 1].centers;
}

// A variant's run has Lloyd's labels and empty clusters from the same initial
// centers, and centers within tol of Lloyd's, iteration by iteration.
template <typename S>
void ExpectTracksLloyd(const std::vector<LloydIteration<S>>& history, const Matrix<S>& points,
                       const Matrix<S>& init, double tol) {
  const auto lloyd = ReferenceLloyd(points, init, static_cast<int>(history.size()));
  for (size_t t = 0; t < lloyd.size(); ++t) {
    SCOPED_TRACE(testing::Message() << "iteration " << t);
    EXPECT_EQ(history[t].labels, lloyd[t].labels);
    EXPECT_EQ(history[t].empty_clusters, lloyd[t].empty_clusters);
    EXPECT_LE((history[t].centers - lloyd[t].centers).cwiseAbs().maxCoeff(), tol);
  }
}

TYPED_TEST(VariantReferenceTest, SoftKMeansWorkedExample) {
  using S = TypeParam;
  Matrix<S> points(1, 3);
  points << 0, 1, 2;
  Matrix<S> init(1, 2);
  init << 0, 2;
  // beta = ln 2 makes the weights powers of two: point 0 has distances (0, 4)
  // so r = (16/17, 1/17); point 1 is halfway, r = (1/2, 1/2). The masses are
  // 3/2 each and the new centers 7/17 and 27/17.
  const auto history = ReferenceSoftKMeans(points, init, std::log(2.0), 1);
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].labels, (Labels{0, 0, 1}));
  const double tol = Tolerance<S>(1e-12, 1e-6);
  EXPECT_NEAR(history[0].centers(0, 0), 7.0 / 17, tol);
  EXPECT_NEAR(history[0].centers(0, 1), 27.0 / 17, tol);
  EXPECT_NEAR(history[0].objective, (49.0 + 100.0 + 49.0) / 289, tol);
  EXPECT_EQ(history[0].empty_clusters, 0);
}

TYPED_TEST(VariantReferenceTest, SoftKMeansApproachesLloydAsBetaGrows) {
  using S = TypeParam;
  const Matrix<S> points = SeparatedPoints<S>(3);
  const Matrix<S> init = points.leftCols(3);
  ExpectTracksLloyd(ReferenceSoftKMeans(points, init, 1e6, 5), points, init,
                    Tolerance<S>(1e-9, 1e-5));
}

TYPED_TEST(VariantReferenceTest, TrimmedKMeansWorkedExample) {
  using S = TypeParam;
  Matrix<S> points(1, 5);
  points << 0, 1, 2, 6, 20;
  Matrix<S> init(1, 2);
  init << 2, 20;
  const auto history = ReferenceTrimmedKMeans(points, init, 4.0, 2);
  ASSERT_EQ(history.size(), 2u);
  // Iteration 1: cluster {0, 1, 2, 6} scored against 2 and sorted: 2, 1, 0,
  // 6 with scores 0, -1, -4, -16; (prefix - tau) / r = -4, -2.5, -3, -6.25,
  // so r = 2 and the center is the mean of 2 and 1.
  EXPECT_EQ(history[0].labels, (Labels{0, 0, 0, 0, 1}));
  EXPECT_EQ(history[0].centers(0, 0), 1.5);
  EXPECT_EQ(history[0].centers(0, 1), 20);
  EXPECT_EQ(history[0].objective, 2.25 + 0.25 + 0.25 + 20.25 + 0);
  // Iteration 2: against 1.5 the order is 1, 2 (a tie, lower index first),
  // 0, 6 with scores -0.25, -0.25, -2.25, -20.25; r = 2 and r = 3 both give
  // -2.25 and the smallest wins, so the center stays 1.5 (r = 3 gives 1).
  EXPECT_EQ(history[1].labels, (Labels{0, 0, 0, 0, 1}));
  EXPECT_EQ(history[1].centers(0, 0), 1.5);
  EXPECT_EQ(history[1].centers(0, 1), 20);
}

TYPED_TEST(VariantReferenceTest, TrimmedKMeansWithHugeTauIsLloyd) {
  using S = TypeParam;
  const Matrix<S> points = MixturePoints<S>(8);
  const Matrix<S> init = points.leftCols(6);
  // Both sum in increasing index, in double; Lloyd's float sums are float.
  ExpectTracksLloyd(ReferenceTrimmedKMeans(points, init, 1e9, 5), points, init,
                    Tolerance<S>(0, 1e-5));
}

TYPED_TEST(VariantReferenceTest, TrimmedKMeansWithZeroTauMovesToTheNearestPoint) {
  using S = TypeParam;
  const Matrix<S> points = MixturePoints<S>(9);
  const Matrix<S> init = points.leftCols(6);
  const auto history = ReferenceTrimmedKMeans(points, init, 0.0, 4);
  for (size_t t = 0; t < history.size(); ++t) {
    const Matrix<S>& before = CentersBefore(history, t, init);
    const auto clusters = ClustersOf(history[t].labels, 6);
    for (Eigen::Index j = 0; j < 6; ++j) {
      SCOPED_TRACE(testing::Message() << "iteration " << t << " cluster " << j);
      ASSERT_FALSE(clusters[j].empty());
      Eigen::Index nearest = clusters[j][0];
      for (Eigen::Index i : clusters[j]) {
        if (ReferenceSquaredDistance(points, i, before, j) <
            ReferenceSquaredDistance(points, nearest, before, j)) {
          nearest = i;
        }
      }
      EXPECT_EQ(history[t].centers.col(j), points.col(nearest));
    }
  }
}

TYPED_TEST(VariantReferenceTest, RobustKMeansWorkedExample) {
  using S = TypeParam;
  Matrix<S> points(1, 4);
  points << 0, 1, 3, 10;
  Matrix<S> init(1, 2);
  init << 1, 10;
  const auto history = ReferenceRobustKMeans(points, init, 0.5, 2);
  ASSERT_EQ(history.size(), 2u);
  // Iteration 1: z = -0.5, 0, -2 for 0, 1, 3; the support is {1, 0} with
  // t = (0 - 0.5 - 1) / 2 = -0.75, so w = 0.25, 0.75, 0: center 0.75.
  EXPECT_EQ(history[0].labels, (Labels{0, 0, 0, 1}));
  EXPECT_EQ(history[0].centers(0, 0), 0.75);
  EXPECT_EQ(history[0].centers(0, 1), 10);
  EXPECT_EQ(history[0].objective, 0.5625 + 0.0625 + 5.0625 + 0);
  // Iteration 2: z = -0.28125, -0.03125, -2.53125; t = -0.65625, so
  // w = 0.375, 0.625, 0: center 0.625.
  EXPECT_EQ(history[1].labels, (Labels{0, 0, 0, 1}));
  EXPECT_EQ(history[1].centers(0, 0), 0.625);
  EXPECT_EQ(history[1].centers(0, 1), 10);
}

TYPED_TEST(VariantReferenceTest, RobustKMeansGivesAFarOutlierNoWeight) {
  using S = TypeParam;
  Rng rng(17);
  Matrix<S> points(2, 31);
  for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] = rng.Normal();
  points.col(30) << 100, 100;
  const Matrix<S> init = points.leftCols(1);
  const auto with = ReferenceRobustKMeans(points, init, 1.0, 3);
  const auto without = ReferenceRobustKMeans(Matrix<S>(points.leftCols(30)), init, 1.0, 3);
  for (size_t t = 0; t < with.size(); ++t) {
    SCOPED_TRACE(testing::Message() << "iteration " << t);
    EXPECT_EQ(with[t].centers, without[t].centers);
  }
}

TYPED_TEST(VariantReferenceTest, RobustKMeansWithTinyBetaApproachesTheMean) {
  using S = TypeParam;
  const Matrix<S> points = SeparatedPoints<S>(5);
  const Matrix<S> init = points.leftCols(3);
  ExpectTracksLloyd(ReferenceRobustKMeans(points, init, 1e-12, 3), points, init,
                    Tolerance<S>(1e-6, 1e-4));
}

TYPED_TEST(VariantReferenceTest, KMedoidsWorkedExample) {
  using S = TypeParam;
  Matrix<S> points(1, 5);
  points << 0, 1, 5, 20, 21;
  Matrix<S> init(1, 2);
  init << 0, 20;
  const auto history = ReferenceKMedoids(points, init, 0.0, 1, 2);
  ASSERT_EQ(history.size(), 2u);
  // Means 2 and 20.5: the nearest points are 1, and 20 and 21 at a tie that
  // goes to the lower index, 20.
  EXPECT_EQ(history[0].labels, (Labels{0, 0, 0, 1, 1}));
  EXPECT_EQ(history[0].centers(0, 0), 1);
  EXPECT_EQ(history[0].centers(0, 1), 20);
  EXPECT_EQ(history[0].objective, 1 + 0 + 16 + 0 + 1);
  EXPECT_EQ(history[1].centers, history[0].centers);
}

TYPED_TEST(VariantReferenceTest, KMedoidsCentersAreDataPoints) {
  using S = TypeParam;
  const Matrix<S> points = MixturePoints<S>(10);
  const auto history = ReferenceKMedoids(points, Matrix<S>(points.leftCols(6)), 1.0, 5, 6);
  for (size_t t = 0; t < history.size(); ++t) {
    for (Eigen::Index j = 0; j < 6; ++j) {
      SCOPED_TRACE(testing::Message() << "iteration " << t << " cluster " << j);
      bool found = false;
      for (Eigen::Index i = 0; i < points.cols() && !found; ++i) {
        found = history[t].centers.col(j) == points.col(i);
      }
      EXPECT_TRUE(found);
    }
  }
}

TYPED_TEST(VariantReferenceTest, KMedoidsSameSeedSameResultOtherSeedsDiffer) {
  using S = TypeParam;
  const Matrix<S> points = MixturePoints<S>(11);
  const Matrix<S> init = points.leftCols(6);
  const auto first = ReferenceKMedoids(points, init, 1.0, 7, 4);
  const auto again = ReferenceKMedoids(points, init, 1.0, 7, 4);
  for (size_t t = 0; t < first.size(); ++t) {
    EXPECT_EQ(first[t].labels, again[t].labels);
    EXPECT_EQ(first[t].centers, again[t].centers);
  }
  int differing = 0;
  for (uint64_t seed = 100; seed < 110; ++seed) {
    if (ReferenceKMedoids(points, init, 1.0, seed, 4).back().centers != first.back().centers) {
      ++differing;
    }
  }
  EXPECT_GT(differing, 0);
}

TYPED_TEST(VariantReferenceTest, KMedoidsDrawsFromCountersKeyedByIterationClusterAndPoint) {
  using S = TypeParam;
  const Matrix<S> points = MixturePoints<S>(12);
  const Matrix<S> init = points.leftCols(6);
  // A gamma this small leaves the Gumbel noise alone to decide.
  const uint64_t seed = 21;
  const auto history = ReferenceKMedoids(points, init, 1e-300, seed, 3);
  for (size_t t = 0; t < history.size(); ++t) {
    const auto clusters = ClustersOf(history[t].labels, 6);
    for (Eigen::Index j = 0; j < 6; ++j) {
      SCOPED_TRACE(testing::Message() << "iteration " << t << " cluster " << j);
      ASSERT_FALSE(clusters[j].empty());
      Eigen::Index drawn = clusters[j][0];
      for (Eigen::Index i : clusters[j]) {
        if (CounterGumbel(seed, t, j, i) > CounterGumbel(seed, t, j, drawn)) drawn = i;
      }
      EXPECT_EQ(history[t].centers.col(j), points.col(drawn));
    }
  }
}

TYPED_TEST(VariantReferenceTest, KMedoidsWithInfiniteGammaTakesThePointNearestTheMean) {
  using S = TypeParam;
  const Matrix<S> points = MixturePoints<S>(13);
  const Matrix<S> init = points.leftCols(6);
  const auto history = ReferenceKMedoids(points, init, 0.0, 3, 4);
  for (size_t t = 0; t < history.size(); ++t) {
    const auto clusters = ClustersOf(history[t].labels, 6);
    for (Eigen::Index j = 0; j < 6; ++j) {
      SCOPED_TRACE(testing::Message() << "iteration " << t << " cluster " << j);
      ASSERT_FALSE(clusters[j].empty());
      Vector<double> mean = Vector<double>::Zero(points.rows());
      for (Eigen::Index i : clusters[j]) mean += points.col(i).template cast<double>();
      mean /= static_cast<double>(clusters[j].size());
      Eigen::Index nearest = clusters[j][0];
      for (Eigen::Index i : clusters[j]) {
        if ((points.col(i).template cast<double>() - mean).squaredNorm() <
            (points.col(nearest).template cast<double>() - mean).squaredNorm()) {
          nearest = i;
        }
      }
      EXPECT_EQ(history[t].centers.col(j), points.col(nearest));
    }
  }
}

TYPED_TEST(VariantReferenceTest, SphericalKMeansWorkedExample) {
  using S = TypeParam;
  Matrix<S> points(2, 3);
  points << 2, 0, 1,  //
      0, 3, 1;
  Matrix<S> init(2, 2);
  init << 3, 0,  //
      0, 0.5;
  const auto history = ReferenceSphericalKMeans(points, init, 2);
  ASSERT_EQ(history.size(), 2u);
  // Unit points (1, 0), (0, 1), (1, 1)/sqrt(2) against (1, 0) and (0, 1); the
  // diagonal one is at a tie and goes to center 0, whose new direction is
  // halfway between 0 and 45 degrees. Each point is pi/8 or 0 from its center.
  const double tol = Tolerance<S>(1e-12, 1e-6);
  for (size_t t = 0; t < history.size(); ++t) {
    SCOPED_TRACE(testing::Message() << "iteration " << t);
    EXPECT_EQ(history[t].labels, (Labels{0, 1, 0}));
    EXPECT_NEAR(history[t].centers(0, 0), std::cos(M_PI / 8), tol);
    EXPECT_NEAR(history[t].centers(1, 0), std::sin(M_PI / 8), tol);
    EXPECT_EQ(history[t].centers(0, 1), 0);
    EXPECT_EQ(history[t].centers(1, 1), 1);
    EXPECT_NEAR(history[t].objective, 2 * (2 - 2 * std::cos(M_PI / 8)), tol);
  }
}

TYPED_TEST(VariantReferenceTest, SphericalKMeansKeepsCentersAtUnitNormAndIgnoresNorms) {
  using S = TypeParam;
  Rng rng(23);
  Matrix<S> points(3, 200);
  for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] = rng.Normal();
  Matrix<S> rescaled = points;
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    rescaled.col(i) *= static_cast<S>(0.1 + 10 * rng.Uniform());
  }
  const Matrix<S> init = points.leftCols(5);
  const auto history = ReferenceSphericalKMeans(points, init, 6);
  const auto same = ReferenceSphericalKMeans(rescaled, Matrix<S>(3 * init), 6);
  const double tol = Tolerance<S>(1e-12, 1e-5);
  for (size_t t = 0; t < history.size(); ++t) {
    SCOPED_TRACE(testing::Message() << "iteration " << t);
    for (Eigen::Index j = 0; j < 5; ++j) {
      EXPECT_NEAR(history[t].centers.col(j).template cast<double>().norm(), 1, tol);
    }
    EXPECT_EQ(same[t].labels, history[t].labels);
    EXPECT_LE((same[t].centers - history[t].centers).cwiseAbs().maxCoeff(), tol);
  }
}

TYPED_TEST(VariantReferenceTest, SphericalKMeansKeepsACenterWhosePointsSumToZero) {
  using S = TypeParam;
  Matrix<S> points(2, 2);
  points << 1, -1,  //
      0, 0;
  Matrix<S> init(2, 2);
  init << 0, 0,  //
      1, -1;
  // Both points are at a tie and go to center 0; their sum is zero.
  const auto history = ReferenceSphericalKMeans(points, init, 1);
  EXPECT_EQ(history[0].labels, (Labels{0, 0}));
  EXPECT_EQ(history[0].centers, init);
  EXPECT_EQ(history[0].empty_clusters, 2);
}

TYPED_TEST(VariantReferenceTest, EmptyClusterKeepsItsCenterInEveryVariant) {
  using S = TypeParam;
  using History = std::vector<LloydIteration<S>>;
  Matrix<S> points(2, 3);
  points << 1, 2, 3,  //
      0, 0.5, -0.5;
  // No point is nearer (-100, 0), nor, once normalised, nearer (-1, 0); its
  // softmax weights underflow to 0 too.
  Matrix<S> init(2, 2);
  init << 2, -100,  //
      0, 0;
  const std::vector<std::pair<std::string, std::function<History(const Matrix<S>&)>>> variants = {
      {"soft", [&](const Matrix<S>& c) { return ReferenceSoftKMeans(points, c, 1.0, 3); }},
      {"trimmed", [&](const Matrix<S>& c) { return ReferenceTrimmedKMeans(points, c, 1.0, 3); }},
      {"robust", [&](const Matrix<S>& c) { return ReferenceRobustKMeans(points, c, 1.0, 3); }},
      {"kmedoids", [&](const Matrix<S>& c) { return ReferenceKMedoids(points, c, 0.5, 3, 3); }},
      {"spherical", [&](const Matrix<S>& c) { return ReferenceSphericalKMeans(points, c, 3); }},
  };
  for (const auto& [name, run] : variants) {
    const History history = run(init);
    const Vector<S> kept = name == "spherical" ? Vector<S>(init.col(1) / 100) : init.col(1);
    for (size_t t = 0; t < history.size(); ++t) {
      SCOPED_TRACE(testing::Message() << name << " iteration " << t);
      EXPECT_EQ(history[t].labels, (Labels{0, 0, 0}));
      EXPECT_EQ(history[t].centers.col(1), kept);
      EXPECT_EQ(history[t].empty_clusters, 1);
    }
  }
}

}  // namespace
}  // namespace kmt
