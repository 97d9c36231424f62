// The exact cluster sums against sums added in binary128 and rounded once
// (ReferenceRoundedSums, exact on these data): from scratch and after the
// points move, with weights, far from the origin, on enough points to run
// on several threads, at each SIMD level; and where the fixed point does not
// fit, no sums.
#include "core/exact_sums.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/random.h"
#include "reference/lloyd.h"
#include "tests/support/simd_levels.h"

namespace kmt {
namespace {

// Coordinates of both signs spread over `decades` decades up to 10^3,
// around `offset`.
template <typename Scalar>
Matrix<Scalar> SpreadPoints(int d, int n, double offset, uint64_t seed, int decades = 9) {
  Rng rng(seed);
  Matrix<Scalar> points(d, n);
  for (Eigen::Index i = 0; i < points.size(); ++i) {
    const double magnitude = std::pow(10.0, 3 - decades + decades * rng.Uniform());
    points.data()[i] = static_cast<Scalar>(offset + (rng.Uniform() < 0.5 ? -magnitude : magnitude));
  }
  return points;
}

Labels RandomLabels(Eigen::Index n, int k, Rng* rng) {
  Labels labels(n);
  for (int& label : labels) label = static_cast<int>(rng->Below(k));
  return labels;
}

template <typename Scalar>
ClusterSums Read(const ExactClusterSums<Scalar>& exact, int d, int k) {
  ClusterSums sums(d, k);
  exact.AddTo(&sums);
  return sums;
}

void ExpectSameBits(const ClusterSums& got, const ClusterSums& want) {
  EXPECT_EQ(got.sums, want.sums);
  EXPECT_EQ(got.counts, want.counts);
  EXPECT_EQ(got.weights, want.weights);
}

template <typename Scalar>
class ExactSumsTest : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ExactSumsTest, Scalars);

TYPED_TEST(ExactSumsTest, SumsAreTheExactSumsRoundedOnceFromScratchAndAfterMoves) {
  using S = TypeParam;
  constexpr int kD = 5, kK = 7;
  int runs[5] = {};  // runs whose terms were cut into 1, 2, 3, 4 pieces
  // At each SIMD level the sums group has (its additions are a kernel).
  AtEachSimdLevel([&] {
    // Nine decades near the origin, nine 10^5 from it, fifteen near it.
    for (const auto& [offset, decades] : {std::pair{0.0, 9}, {1e5, 9}, {0.0, 15}}) {
      // 40,000 points: the sums are split over threads.
      for (const int n : {300, 40000}) {
        // Weighted double terms are not doubles: only float takes weights.
        for (const bool weighted : {false, true}) {
          if (weighted && std::is_same_v<S, double>) continue;
          SCOPED_TRACE(testing::Message() << "offset " << offset << ", decades " << decades
                                          << ", n " << n << ", weighted " << weighted);
          const Matrix<S> points = SpreadPoints<S>(kD, n, offset, 7, decades);
          Vector<S> weights(n);
          Rng rng(8);
          for (Eigen::Index i = 0; i < n; ++i) {
            weights[i] = i % 9 == 0 ? S(0) : static_cast<S>(0.1 + 5 * rng.Uniform());
          }
          const Vector<S>* w = weighted ? &weights : nullptr;
          std::unique_ptr<ExactClusterSums<S>> exact = ExactClusterSums<S>::Make(points, w, kK);
          ASSERT_NE(exact, nullptr);
          ++runs[exact->pieces()];
          Labels labels = RandomLabels(n, kK, &rng);
          exact->Recompute(labels);
          ExpectSameBits(Read(*exact, kD, kK), ReferenceRoundedSums(points, labels, kK, w));
          // Three rounds of moves: a few points, then most of them.
          for (const double share : {0.01, 0.2, 0.9}) {
            std::vector<typename ExactClusterSums<S>::Move> moves;
            for (Eigen::Index i = 0; i < n; ++i) {
              if (rng.Uniform() >= share) continue;
              const int to = static_cast<int>(rng.Below(kK));
              if (to == labels[i]) continue;
              moves.push_back({i, labels[i], to});
              labels[i] = to;
            }
            exact->Apply(moves);
            const ClusterSums moved = Read(*exact, kD, kK);
            ExpectSameBits(moved, ReferenceRoundedSums(points, labels, kK, w));
            std::unique_ptr<ExactClusterSums<S>> fresh = ExactClusterSums<S>::Make(points, w, kK);
            fresh->Recompute(labels);
            ExpectSameBits(moved, Read(*fresh, kD, kK));
          }
        }
      }
    }
  });
  // Terms spanning up to 39 bits (float 10^5 from the origin), up to 78
  // (nine decades near it) and more (fifteen decades, double or weighted):
  // one, two and three pieces.
  if (std::is_same_v<S, float>) {
    EXPECT_GT(runs[1], 0);
  }
  EXPECT_GT(runs[2], 0);
  EXPECT_GT(runs[3], 0);
}

// A double sum of the same terms rounds at its additions (these terms span
// about 75 bits with their count): it differs from the exact one, which
// says the comparisons above can fail.
TEST(ExactSums, DoubleAdditionsInPointOrderDifferFromTheExactSums) {
  const Matrix<float> points = SpreadPoints<float>(5, 40000, 0, 7);
  Rng rng(9);
  const Labels labels = RandomLabels(points.cols(), 7, &rng);
  ClusterSums added(5, 7);
  AccumulateClusterSums(points, labels, &added);
  const ClusterSums exact = ReferenceRoundedSums(points, labels, 7);
  EXPECT_NE(added.sums, exact.sums);
  EXPECT_LE((added.sums - exact.sums).cwiseAbs().maxCoeff(),
            1e-6 * exact.sums.cwiseAbs().maxCoeff());
}

// Double terms from 2^-112 to 2^10 (123 bits, three points' count within
// the 126): four pieces, and sums that no double addition gets right.
TEST(ExactSums, TermsSpanningAlmostTheWholeFixedPointTakeFourPieces) {
  const double tiny = std::ldexp(1.0, -60) + std::ldexp(1.0, -112);
  Matrix<double> points(1, 3);
  points << 1024.0, tiny, -1024.0;
  std::unique_ptr<ExactClusterSums<double>> exact =
      ExactClusterSums<double>::Make(points, nullptr, 2);
  ASSERT_NE(exact, nullptr);
  EXPECT_EQ(exact->pieces(), 4);
  AtEachSimdLevel([&] {
    exact->Recompute({0, 0, 0});
    EXPECT_EQ(Read(*exact, 1, 2).sums(0, 0), tiny);
    // The first point to cluster 1: cluster 0 holds tiny - 1024, which
    // rounds to -1024.
    exact->Apply({{0, 0, 1}});
    const ClusterSums moved = Read(*exact, 1, 2);
    EXPECT_EQ(moved.sums(0, 0), -1024.0);
    EXPECT_EQ(moved.sums(0, 1), 1024.0);
    exact->Apply({{0, 1, 0}});
    EXPECT_EQ(Read(*exact, 1, 2).sums(0, 0), tiny);
  });
}

TEST(ExactSums, PointsWhoseTermsSpanTooManyBitsHaveNone) {
  // 1e-30 and 1e30 in one coordinate: about 200 bits.
  Matrix<float> wide(2, 3);
  wide << 1e-30f, 1.0f, 1e30f, 1.0f, 2.0f, 3.0f;
  EXPECT_EQ(ExactClusterSums<float>::Make(wide, nullptr, 2), nullptr);
  // A weighted double point's terms are not doubles.
  const Matrix<double> narrow = Matrix<double>::Ones(2, 3);
  const Vector<double> weights = Vector<double>::Ones(3);
  EXPECT_EQ(ExactClusterSums<double>::Make(narrow, &weights, 2), nullptr);
  EXPECT_NE(ExactClusterSums<double>::Make(narrow, nullptr, 2), nullptr);
  // A coordinate of zeros fits, and sums to zero.
  Matrix<float> zeros = Matrix<float>::Zero(2, 3);
  zeros.row(1) << 1.5f, -2.0f, 4.0f;
  std::unique_ptr<ExactClusterSums<float>> exact = ExactClusterSums<float>::Make(zeros, nullptr, 2);
  ASSERT_NE(exact, nullptr);
  exact->Recompute({0, 0, 1});
  const ClusterSums sums = Read(*exact, 2, 2);
  EXPECT_EQ(sums.sums(0, 0), 0.0);
  EXPECT_EQ(sums.sums(1, 0), -0.5);
  EXPECT_EQ(sums.sums(1, 1), 4.0);
  EXPECT_EQ(sums.counts, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(sums.weights, (std::vector<double>{2, 1}));
}

}  // namespace
}  // namespace kmt
