// The matrix-product assignment against a plain argmin, near ties included.
#include "core/assign.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <tuple>
#include <vector>

#include "core/cluster_sums.h"
#include "core/random.h"
#include "reference/lloyd.h"
#include "tests/support/simd_levels.h"

namespace kmt {
namespace {

template <typename Scalar>
Labels PlainArgmin(const Matrix<Scalar>& points, const Matrix<Scalar>& centers) {
  Labels labels(points.cols());
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    Scalar best = INFINITY;
    for (Eigen::Index j = 0; j < centers.cols(); ++j) {
      Scalar s = 0;
      for (Eigen::Index l = 0; l < points.rows(); ++l) {
        const Scalar diff = points(l, i) - centers(l, j);
        s += diff * diff;
      }
      if (s < best) {
        best = s;
        labels[i] = static_cast<int>(j);
      }
    }
  }
  return labels;
}

template <typename Scalar>
class AssignTest : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AssignTest, Scalars);

TYPED_TEST(AssignTest, EqualsPlainArgminWithExactAndNearTies) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(42);
    for (int trial = 0; trial < 20; ++trial) {
      const int d = 1 + static_cast<int>(rng.Below(40));
      const int k = 1 + static_cast<int>(rng.Below(70));
      const int n = 1 + static_cast<int>(rng.Below(20000));
      SCOPED_TRACE(testing::Message() << "n=" << n << " d=" << d << " k=" << k);
      // Far from the origin on a coarse grid plus a tiny jitter: many exact
      // ties and many near ties that the product form alone gets wrong.
      Matrix<S> points(d, n), centers(d, k);
      for (Eigen::Index i = 0; i < points.size(); ++i) {
        points.data()[i] =
            static_cast<S>(100 + rng.Below(3) + (trial % 2 ? 1e-6 * rng.Uniform() : 0));
      }
      for (Eigen::Index i = 0; i < centers.size(); ++i) {
        centers.data()[i] = static_cast<S>(100 + rng.Below(3));
      }
      Labels labels;
      Vector<S> sq_dist;
      AssignNearest(points, centers, &labels, &sq_dist);
      ASSERT_EQ(labels, PlainArgmin(points, centers));
      for (int i = 0; i < n; i += 97) {
        EXPECT_NEAR(sq_dist[i], (points.col(i) - centers.col(labels[i])).squaredNorm(), 1e-5);
      }
    }
  });
}

// Both ways of computing the scores, on each side of the register kernel's
// limits (fewer coordinates than a packet, more center bytes than it takes),
// with center counts that leave part of its last group of centers empty and
// point counts that leave part of its last packet empty; k = 1, 8, 13, 16
// and 29 are within two packets of centers at AVX2 or AVX-512, whose
// distances are then computed across the packet's points.
TYPED_TEST(AssignTest, BothScoreKernelsEqualPlainArgmin) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(11);
    bool kernel_seen = false, product_seen = false;
    for (const auto& [n, d, k] :
         {std::tuple{1001, 8, 16}, std::tuple{4099, 32, 13}, std::tuple{515, 16, 1},
          std::tuple{3000, 3, 16}, std::tuple{2051, 32, 64}, std::tuple{700, 64, 130},
          std::tuple{9000, 12, 33}, std::tuple{4099, 35, 16}, std::tuple{3001, 16, 8},
          std::tuple{2050, 32, 29}}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " d=" << d << " k=" << k);
      Matrix<S> points(d, n), centers(d, k);
      for (Eigen::Index i = 0; i < points.size(); ++i) {
        points.data()[i] = static_cast<S>(50 + rng.Below(3) + 1e-6 * rng.Uniform());
      }
      for (Eigen::Index i = 0; i < centers.size(); ++i) {
        centers.data()[i] = static_cast<S>(50 + rng.Below(3));
      }
      const NearestCenterScan<S> scan(centers);
      (scan.register_kernel() ? kernel_seen : product_seen) = true;
      Labels labels;
      Vector<S> sq_dist;
      AssignNearest(points, centers, &labels, &sq_dist);
      ASSERT_EQ(labels, PlainArgmin(points, centers));
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(sq_dist[i],
                  AssignedSquaredDistance(points.col(i).data(), centers.col(labels[i]).data(), d));
      }
    }
    EXPECT_TRUE(kernel_seen);
    EXPECT_TRUE(product_seen);
  });
}

// More centers than a scan holds at once (taken a tile at a time, several
// blocks of points a scan, the near ties scored again against every
// center): the labels of a plain argmin on a grid with exact and near ties,
// AssignedSquaredDistance's distances, and the sums of the labels.
TYPED_TEST(AssignTest, ManyCentersTakenATileAtATime) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(21);
    for (const auto& [n, d, k] : {std::tuple{3001, 8, 2500}, std::tuple{5000, 5, 1100}}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " d=" << d << " k=" << k);
      Matrix<S> points(d, n), centers(d, k);
      for (Eigen::Index i = 0; i < points.size(); ++i) {
        points.data()[i] = static_cast<S>(20 + rng.Below(4) + (i % 3 == 0 ? 1e-6 : 0));
      }
      for (Eigen::Index i = 0; i < centers.size(); ++i) {
        centers.data()[i] = static_cast<S>(20 + rng.Below(4) + 0.5 * rng.Uniform());
      }
      const NearestCenterScan<S> scan(centers);
      EXPECT_GT(scan.span(), scan.block());
      Labels labels;
      Vector<S> sq_dist;
      ClusterSums sums(d, k), expected(d, k);
      AssignNearest(points, centers, &labels, &sq_dist, &sums);
      ASSERT_EQ(labels, PlainArgmin(points, centers));
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(sq_dist[i],
                  AssignedSquaredDistance(points.col(i).data(), centers.col(labels[i]).data(), d));
      }
      AccumulateClusterSums(points, labels, &expected);
      EXPECT_EQ(sums.counts, expected.counts);
      EXPECT_LE((sums.sums - expected.sums).norm(), 1e-6 * expected.sums.norm());
    }
  });
}

// Points transposed once into lanes give the same labels, distances,
// objective and sums, to the bit, as the points transposed by each
// assignment, and the distances are AssignedSquaredDistance's to the bit
// (computed across a packet of points where k fits one packet); lanes are
// made only where the kernel takes d and k, and are ignored for points of
// another shape.
TYPED_TEST(AssignTest, PointLanesGiveTheSameAssignment) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(13);
    for (const auto& [n, d, k] :
         {std::tuple{4099, 32, 16}, std::tuple{1001, 8, 13}, std::tuple{70000, 12, 5},
          std::tuple{33, 16, 1}, std::tuple{5000, 32, 27}, std::tuple{3000, 24, 12}}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " d=" << d << " k=" << k);
      Matrix<S> points(d, n), centers(d, k);
      for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] = rng.Normal();
      for (Eigen::Index i = 0; i < centers.size(); ++i) centers.data()[i] = rng.Normal();
      // The kernel takes d from one SIMD packet of coordinates on (8 floats
      // with AVX2, 16 with AVX-512): below, no lanes, and the same results.
      const PointLanes<S> lanes(points, k);
      ASSERT_EQ(lanes.empty(), d < lanes.packet());
      ASSERT_EQ(lanes.fits(points), !lanes.empty());
      Vector<S> weights(n);
      for (Eigen::Index i = 0; i < n; ++i) weights[i] = static_cast<S>(rng.Uniform());
      const Vector<S>* const choices[] = {nullptr, &weights};
      for (const Vector<S>* w : choices) {
        Labels want_labels, got_labels;
        Vector<S> want_sq, got_sq;
        ClusterSums want_sums(d, k), got_sums(d, k);
        const double want = AssignNearest(points, centers, &want_labels, &want_sq, &want_sums, w);
        const double got =
            AssignNearest(points, centers, &got_labels, &got_sq, &got_sums, w, &lanes);
        EXPECT_EQ(got, want);
        EXPECT_EQ(got_labels, want_labels);
        EXPECT_EQ(got_sq, want_sq);
        EXPECT_EQ(got_sums.sums, want_sums.sums);
        EXPECT_EQ(got_sums.counts, want_sums.counts);
        EXPECT_EQ(got_sums.weights, want_sums.weights);
        EXPECT_EQ(got_labels, PlainArgmin(points, centers));
        for (Eigen::Index i = 0; i < n; ++i) {
          ASSERT_EQ(got_sq[i], AssignedSquaredDistance(points.col(i).data(),
                                                       centers.col(got_labels[i]).data(), d));
        }
      }
    }
    // Too many centers for the kernel, or too few coordinates: no lanes.
    Matrix<S> wide(32, 100), narrow(1, 100);
    wide.setOnes();
    narrow.setOnes();
    EXPECT_TRUE(PointLanes<S>(wide, 1000).empty());
    EXPECT_TRUE(PointLanes<S>(narrow, 4).empty());
    // Lanes of other points are not taken for these.
    const PointLanes<S> of_wide(wide, 4);
    EXPECT_FALSE(of_wide.fits(Matrix<S>(Matrix<S>::Ones(32, 101))));
    EXPECT_FALSE(of_wide.fits(Matrix<S>(Matrix<S>::Ones(16, 200))));
  });
}

// An assignment that asks for neither the objective nor the distances
// (PointLanes' norms bound the points' norms in its near-tie test) gives
// the labels and sums of one that asks, to the bit, and a plain argmin's
// labels, on points far from the origin with exact and near ties, at every
// lane count around a packet's and one or two packets of centers.
TYPED_TEST(AssignTest, LabelsAloneEqualTheFullAssignment) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(17);
    for (const auto& [n, d, k] :
         {std::tuple{4099, 32, 16}, std::tuple{1001, 16, 13}, std::tuple{3001, 35, 5},
          std::tuple{33, 16, 1}, std::tuple{5000, 32, 29}, std::tuple{2000, 24, 40}}) {
      for (const bool jitter : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "n=" << n << " d=" << d << " k=" << k << " jitter=" << jitter);
        Matrix<S> points(d, n), centers(d, k);
        for (Eigen::Index i = 0; i < points.size(); ++i) {
          points.data()[i] =
              static_cast<S>(100 + rng.Below(3) + (jitter ? 1e-3 * rng.Uniform() : 0));
        }
        for (Eigen::Index i = 0; i < centers.size(); ++i) {
          centers.data()[i] = static_cast<S>(100 + rng.Below(3));
        }
        const PointLanes<S> lanes(points, k);
        Vector<S> weights(n);
        for (Eigen::Index i = 0; i < n; ++i) weights[i] = static_cast<S>(rng.Uniform());
        const Vector<S>* const choices[] = {nullptr, &weights};
        for (const Vector<S>* w : choices) {
          Labels want_labels, got_labels;
          ClusterSums want_sums(d, k), got_sums(d, k);
          AssignNearest(points, centers, &want_labels, nullptr, &want_sums, w, &lanes);
          EXPECT_TRUE(std::isnan(AssignNearest(points, centers, &got_labels, nullptr, &got_sums, w,
                                               &lanes, /*objective=*/false)));
          ASSERT_EQ(got_labels, PlainArgmin(points, centers));
          EXPECT_EQ(got_labels, want_labels);
          EXPECT_EQ(got_sums.sums, want_sums.sums);
          EXPECT_EQ(got_sums.counts, want_sums.counts);
          EXPECT_EQ(got_sums.weights, want_sums.weights);
          // Without lanes or sums, the same labels.
          Labels plain;
          AssignNearest<S>(points, centers, &plain, nullptr, nullptr, w, nullptr, false);
          EXPECT_EQ(plain, want_labels);
        }
      }
    }
  });
}

TYPED_TEST(AssignTest, ObjectiveMatchesTheReference) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(7);
    Matrix<S> points(8, 5000), centers(8, 12);
    for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] = rng.Normal();
    for (Eigen::Index i = 0; i < centers.size(); ++i) centers.data()[i] = rng.Normal();
    const double want = ReferenceObjective(points, centers);
    EXPECT_NEAR(Objective(points, centers), want, want * (sizeof(S) == 8 ? 1e-12 : 1e-5));
  });
}

// The sums added in the assignment's pass equal the points summed under the
// labels it returns, the objective equals its distances summed, and neither
// depends on the thread count (bit for bit).
TYPED_TEST(AssignTest, SumsInThePassEqualSumsUnderTheLabels) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(5);
    for (const auto& [n, d, k] : {std::tuple{100000, 32, 64}, std::tuple{77, 3, 5},
                                  std::tuple{30001, 5, 1000}, std::tuple{4100, 17, 2}}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " d=" << d << " k=" << k);
      Matrix<S> points(d, n), centers(d, k);
      for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] = rng.Normal();
      for (Eigen::Index i = 0; i < centers.size(); ++i) centers.data()[i] = rng.Normal();
      Labels labels;
      Vector<S> sq_dist;
      ClusterSums fused(d, k);
      const double objective = AssignNearest(points, centers, &labels, &sq_dist, &fused);
      ASSERT_EQ(labels, PlainArgmin(points, centers));
      ClusterSums after(d, k);
      AccumulateClusterSums(points, labels, &after);
      EXPECT_EQ(fused.counts, after.counts);
      EXPECT_LE((fused.sums - after.sums).cwiseAbs().maxCoeff(),
                1e-12 * (1 + after.sums.cwiseAbs().maxCoeff()));
      EXPECT_NEAR(objective, sq_dist.template cast<double>().sum(), 1e-12 * objective);

      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
      Labels one_labels;
      ClusterSums one(d, k);
      const double one_objective = AssignNearest(points, centers, &one_labels, nullptr, &one);
      omp_set_num_threads(threads);
      EXPECT_EQ(one_labels, labels);
      EXPECT_EQ(one.counts, fused.counts);
      EXPECT_EQ(one.sums, fused.sums);
      EXPECT_EQ(one_objective, objective);
    }
  });
}

// A mini-batch's rows (drawn with repeats) assigned where they are: the
// labels and objective of AssignNearest on the gathered rows, and the sums
// of AccumulateClusterSums on them, to the bit, on one thread and on
// several; weighted with weights of 24 bits, whose sums round, so that
// their order shows. At d = 2,100 the rows are gathered in several spans.
TYPED_TEST(AssignTest, RowsAssignedWhereTheyAreAreTheGatheredRowsAssignment) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(9);
    for (const auto& [n, d, k, m] :
         {std::tuple{20000, 32, 16, 4096}, std::tuple{2000, 300, 70, 3000},
          std::tuple{1000, 2100, 40, 2500}, std::tuple{50, 3, 1, 7}, std::tuple{10, 4, 3, 0}}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " d=" << d << " k=" << k << " m=" << m);
      Matrix<S> points(d, n);
      for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] = rng.Normal();
      const Matrix<S> centers = points.leftCols(k);
      Vector<S> weights(n);
      for (Eigen::Index i = 0; i < n; ++i) weights[i] = static_cast<S>(0.1 + rng.Uniform());
      std::vector<int64_t> rows(m);
      for (int64_t& row : rows) row = static_cast<int64_t>(rng.Below(n));
      Matrix<S> batch(d, m);
      Vector<S> batch_weights(m);
      for (int i = 0; i < m; ++i) {
        batch.col(i) = points.col(rows[i]);
        batch_weights[i] = weights[rows[i]];
      }
      for (const bool weighted : {false, true}) {
        SCOPED_TRACE(weighted);
        Labels expected;
        const double objective = AssignNearest(batch, centers, &expected, nullptr, nullptr,
                                               weighted ? &batch_weights : nullptr);
        ClusterSums sums(d, k);
        AccumulateClusterSums(batch, expected, &sums, weighted ? &batch_weights : nullptr);
        const int threads = omp_get_max_threads();
        for (const int t : {1, 2}) {
          SCOPED_TRACE(t);
          omp_set_num_threads(t);
          Labels labels;
          ClusterSums got(d, k);
          const double got_objective = AssignRows(points, centers, rows.data(), m, &labels, &got,
                                                  weighted ? &weights : nullptr);
          omp_set_num_threads(threads);
          EXPECT_EQ(labels, expected);
          EXPECT_EQ(got.counts, sums.counts);
          EXPECT_EQ(got.weights, sums.weights);
          EXPECT_EQ(got.sums, sums.sums);
          EXPECT_NEAR(got_objective, objective, 1e-12 * objective);
        }
      }
    }
  });
}

// The sums are each part's points added under their labels one by one in
// index order, the parts merged in order: whether a block's points are
// added one at a time or a cluster at a time (blocks with a few points per
// cluster), weighted or not, with d a whole number of the grouped
// additions' chunks of coordinates or not, to the bit.
TYPED_TEST(AssignTest, SumsAreEachPartsPointsAddedInIndexOrder) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(17);
    for (const auto& [n, d, k] :
         {std::tuple{20000, 32, 16}, std::tuple{9000, 40, 7}, std::tuple{5000, 5, 3},
          std::tuple{3000, 64, 700}, std::tuple{70000, 16, 64}}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " d=" << d << " k=" << k);
      Matrix<S> points(d, n), centers(d, k);
      // Far from the origin, where the order of double additions shows.
      for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] = 1e3 + rng.Normal();
      for (Eigen::Index i = 0; i < centers.size(); ++i) centers.data()[i] = 1e3 + rng.Normal();
      Vector<S> weights(n);
      for (Eigen::Index i = 0; i < n; ++i) weights[i] = static_cast<S>(rng.Uniform());
      const Vector<S>* const choices[] = {nullptr, &weights};
      for (const Vector<S>* w : choices) {
        Labels labels;
        ClusterSums got(d, k);
        AssignNearest(points, centers, &labels, nullptr, &got, w);
        const Eigen::Index part_size = AssignmentPartSize<S>(n, d, k);
        ClusterSums want(d, k);
        for (Eigen::Index first = 0; first < n; first += part_size) {
          ClusterSums part(d, k);
          for (Eigen::Index i = first; i < std::min<Eigen::Index>(n, first + part_size); ++i) {
            const int j = labels[i];
            const double weight = w != nullptr ? static_cast<double>((*w)[i]) : 1.0;
            for (int l = 0; l < d; ++l) {
              part.sums(l, j) += w != nullptr ? weight * static_cast<double>(points(l, i))
                                              : static_cast<double>(points(l, i));
            }
            ++part.counts[j];
            part.weights[j] += weight;
          }
          want.Add(part);
        }
        ASSERT_EQ(got.counts, want.counts);
        ASSERT_EQ(got.weights, want.weights);
        ASSERT_EQ(got.sums, want.sums);
      }
    }
  });
}

// Embedding-like points: unit vectors scattered around `clusters` random
// directions, with the spread a share of their norm.
Matrix<float> Embeddings(Rng& rng, int n, int d, int clusters, double spread) {
  Matrix<float> directions(d, clusters), points(d, n);
  for (Eigen::Index i = 0; i < directions.size(); ++i) directions.data()[i] = rng.Normal();
  for (int i = 0; i < n; ++i) {
    Vector<float> x = directions.col(static_cast<Eigen::Index>(rng.Below(clusters)));
    for (int l = 0; l < d; ++l) x[l] += static_cast<float>(spread * rng.Normal());
    points.col(i) = x / x.norm();
  }
  return points;
}

// The float32 assignment and its low-precision filter give the same labels,
// distances, objective and sums, to the bit, and the labels a plain argmin
// gives: on embeddings (where the filter decides most points), on a grid
// with exact and near ties (where it must leave them to the float32 scan),
// on points halfway between two centers, and on shapes that leave part of
// the filter's last group of points, centers, coordinates or tile of
// centers empty. Each filter the CPU has runs (AMX's tiles, AVX512-BF16's
// dot products), whichever auto takes, at the level its kernels are
// compiled at.
TEST(LowPrecisionFilter, GivesTheFloat32AssignmentsBits) {
  if (CpuLowPrecisionFilters().empty()) {
    GTEST_SKIP() << "this CPU has no low-precision filter";
  }
  if (!UseSimdLevel("v4").ok()) GTEST_SKIP() << "the filter's kernels, v4's, are not in this build";
  Rng rng(5);
  struct Case {
    const char* name;
    Matrix<float> points, centers;
    bool mostly_decided;  // whether the filter must decide most points
  };
  std::vector<Case> cases;
  {
    Matrix<float> points = Embeddings(rng, 20000, 128, 300, 0.05);
    Matrix<float> centers = points.leftCols(256);
    cases.push_back({"embeddings d=128 k=256", points, centers, true});
  }
  {
    Matrix<float> points = Embeddings(rng, 3001, 100, 40, 0.2);
    Matrix<float> centers = points.rightCols(1500);
    cases.push_back({"embeddings d=100 k=1500", points, centers, true});
  }
  {
    // More centers than the filter's tile: candidates kept tile by tile.
    Matrix<float> points = Embeddings(rng, 6000, 64, 3000, 0.1);
    Matrix<float> centers = points.leftCols(5000);
    cases.push_back({"embeddings d=64 k=5000", points, centers, false});
  }
  {
    // Exact ties across the filter's tiles: centers 0-499 repeated as
    // 4,000-4,499 (the tiles part at 4,096), points close to them.
    const int d = 64, k = 4500, n = 3000;
    Matrix<float> centers(d, k), points(d, n);
    for (Eigen::Index i = 0; i < centers.size(); ++i) centers.data()[i] = rng.Normal();
    centers.rightCols(500) = centers.leftCols(500);
    for (int i = 0; i < n; ++i) {
      points.col(i) = centers.col(static_cast<Eigen::Index>(rng.Below(500)));
      for (int l = 0; l < d; ++l) points(l, i) += static_cast<float>(1e-3 * rng.Normal());
    }
    cases.push_back({"duplicates across tiles d=64 k=4500", points, centers, false});
  }
  {
    const int d = 96, k = 70, n = 5003;
    Matrix<float> points(d, n), centers(d, k);
    for (Eigen::Index i = 0; i < points.size(); ++i) {
      points.data()[i] = static_cast<float>(100 + rng.Below(3) + 1e-6 * rng.Uniform());
    }
    for (Eigen::Index i = 0; i < centers.size(); ++i) {
      centers.data()[i] = static_cast<float>(100 + rng.Below(3));
    }
    cases.push_back({"grid ties d=96 k=70", points, centers, false});
  }
  {
    const int d = 128, k = 40, n = 4000;
    Matrix<float> centers(d, k), points(d, n);
    for (Eigen::Index i = 0; i < centers.size(); ++i) centers.data()[i] = rng.Normal();
    for (int i = 0; i < n; ++i) {
      const Eigen::Index a = rng.Below(k), b = rng.Below(k);
      points.col(i) = (centers.col(a) + centers.col(b)) / 2;
    }
    cases.push_back({"midpoints d=128 k=40", points, centers, false});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Eigen::Index d = c.points.rows(), k = c.centers.cols();
    struct Answer {
      Labels labels;
      Vector<float> sq;
      ClusterSums sums;
      double objective;
    };
    auto assign = [&](const char* filter) {
      EXPECT_TRUE(UseLowPrecisionFilter(filter).ok());
      Answer a{{}, {}, ClusterSums(static_cast<int>(d), static_cast<int>(k)), 0};
      a.objective = AssignNearest(c.points, c.centers, &a.labels, &a.sq, &a.sums);
      return a;
    };
    const Answer plain = assign("off");
    // Each filter this CPU has: AMX's tiles and AVX512-BF16's dot products.
    for (LowPrecisionFilter kind : CpuLowPrecisionFilters()) {
      const std::string name = LowPrecisionFilterName(kind);
      SCOPED_TRACE(name);
      const Answer filtered = assign(name.c_str());
      EXPECT_EQ(filtered.labels, plain.labels);
      EXPECT_EQ(filtered.labels, PlainArgmin(c.points, c.centers));
      EXPECT_EQ(std::memcmp(filtered.sq.data(), plain.sq.data(), sizeof(float) * plain.sq.size()),
                0);
      EXPECT_EQ(filtered.objective, plain.objective);
      EXPECT_EQ(filtered.sums.counts, plain.sums.counts);
      EXPECT_EQ(filtered.sums.sums, plain.sums.sums);
      // The filter took every point, and decided most of the embeddings'.
      ASSERT_TRUE(UseLowPrecisionFilter(name).ok());
      const NearestCenterScan<float> scan(c.centers);
      ASSERT_TRUE(scan.filtered());
      typename NearestCenterScan<float>::Scratch scratch;
      Labels labels(c.points.cols());
      Vector<float> sq(c.points.cols());
      for (Eigen::Index first = 0; first < c.points.cols(); first += scan.block()) {
        const Eigen::Index rows = std::min(scan.block(), c.points.cols() - first);
        scan.Scan(c.points.middleCols(first, rows), &scratch, labels.data() + first,
                  sq.data() + first);
      }
      EXPECT_EQ(labels, plain.labels);
      EXPECT_EQ(scratch.filtered, c.points.cols());
      if (c.mostly_decided) {
        EXPECT_LT(scratch.reopened, c.points.cols() / 2);
      } else {
        EXPECT_GT(scratch.reopened, 0);
      }
      std::cout << c.name << ", " << name << ": " << scratch.reopened << " of " << scratch.filtered
                << " open, " << scratch.full << " through every center\n";
    }
  }
  ASSERT_TRUE(UseLowPrecisionFilter("auto").ok());
  ASSERT_TRUE(UseSimdLevel("auto").ok());
}

TEST(LowPrecisionFilter, SettingIsAutoOffOrAFilterOfTheCpus) {
  EXPECT_TRUE(UseLowPrecisionFilter("off").ok());
  EXPECT_EQ(ActiveLowPrecisionFilter(), LowPrecisionFilter::kNone);
  EXPECT_TRUE(UseLowPrecisionFilter("auto").ok());
  EXPECT_EQ(ActiveLowPrecisionFilter(), CpuLowPrecisionFilter());
  std::string allowed = "auto, off";
  for (LowPrecisionFilter kind : CpuLowPrecisionFilters()) {
    EXPECT_TRUE(UseLowPrecisionFilter(LowPrecisionFilterName(kind)).ok());
    EXPECT_EQ(ActiveLowPrecisionFilter(), kind);
    allowed += ", " + LowPrecisionFilterName(kind);
  }
  for (const char* bad_name : {"bf16", "amx-bf16", "avx512-bf16"}) {
    const std::vector<LowPrecisionFilter> cpu = CpuLowPrecisionFilters();
    if (std::any_of(cpu.begin(), cpu.end(),
                    [&](LowPrecisionFilter f) { return LowPrecisionFilterName(f) == bad_name; })) {
      continue;
    }
    const absl::Status bad = UseLowPrecisionFilter(bad_name);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.message(), "low-precision filter \"" + std::string(bad_name) +
                                 "\": this CPU takes " + allowed +
                                 " (amx-bf16 and avx512-bf16 where it has them)");
  }
  EXPECT_TRUE(UseLowPrecisionFilter("auto").ok());
}

TEST(ClusterSums, AddUpAcrossBatches) {
  AtEachSimdLevel([&] {
    Rng rng(11);
    Matrix<double> points(3, 50000);
    for (Eigen::Index i = 0; i < points.size(); ++i) points.data()[i] = rng.Uniform();
    Labels labels(points.cols());
    for (int& l : labels) l = static_cast<int>(rng.Below(4));
    ClusterSums whole(3, 5), split(3, 5);
    AccumulateClusterSums(points, labels, &whole);
    const Labels first(labels.begin(), labels.begin() + 20000);
    const Labels rest(labels.begin() + 20000, labels.end());
    AccumulateClusterSums(Matrix<double>(points.leftCols(20000)), first, &split);
    AccumulateClusterSums(Matrix<double>(points.rightCols(30000)), rest, &split);
    EXPECT_EQ(whole.counts, split.counts);
    EXPECT_LE((whole.sums - split.sums).norm(), 1e-9);
    EXPECT_EQ(whole.counts[4], 0);
    Matrix<double> centers = Matrix<double>::Constant(3, 5, 7);
    EXPECT_EQ(ApplyMeans(whole, &centers), 1);
    EXPECT_EQ(centers.col(4), Vector<double>::Constant(3, 7));
    EXPECT_NEAR(centers(0, 0), 0.5, 0.01);
  });
}

}  // namespace
}  // namespace kmt
