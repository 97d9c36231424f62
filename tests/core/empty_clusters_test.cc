#include "core/empty_clusters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/random.h"
#include "core/sparse.h"
#include "tests/support/sparse_documents.h"

namespace kmt {
namespace {

// Points on a small integer grid, so that every squared distance is exact
// and many are equal: the ties decide the order.
Matrix<float> GridPoints(int d, int n, uint64_t seed) {
  Rng rng(seed);
  Matrix<float> points(d, n);
  for (int i = 0; i < n; ++i) {
    for (int l = 0; l < d; ++l) points(l, i) = static_cast<float>(rng.Below(7));
  }
  return points;
}

TEST(EmptyClusters, FarthestPointsAreTheFarthestFromTheirCentersTiesToTheLowerIndex) {
  const int d = 3, n = 400, k = 5;
  const Matrix<float> points = GridPoints(d, n, 3);
  const Matrix<float> centers = GridPoints(d, k, 4);
  Labels labels(n);
  Vector<float> weights(n);
  Rng rng(5);
  for (int i = 0; i < n; ++i) {
    labels[i] = static_cast<int>(rng.Below(k));
    weights[i] = i % 3 == 0 ? 0.0f : 1.5f;
  }
  // The straightforward order: all points of positive weight sorted by
  // distance, farthest first, then by index.
  std::vector<int64_t> want;
  std::vector<double> distance(n);
  for (int i = 0; i < n; ++i) {
    distance[i] = (points.col(i) - centers.col(labels[i])).cast<double>().squaredNorm();
    if (weights[i] > 0) want.push_back(i);
  }
  std::stable_sort(want.begin(), want.end(),
                   [&](int64_t a, int64_t b) { return distance[a] > distance[b]; });
  for (const int64_t m : {0, 1, 7, 50}) {
    std::vector<float> got_distances;
    const std::vector<int64_t> got =
        FarthestPoints(points, &weights, labels, centers, m, &got_distances);
    EXPECT_EQ(got, std::vector<int64_t>(want.begin(), want.begin() + m)) << "m = " << m;
    for (size_t r = 0; r < got.size(); ++r) EXPECT_EQ(got_distances[r], distance[got[r]]);
  }
  // More than there are: every point of positive weight.
  EXPECT_EQ(FarthestPoints(points, &weights, labels, centers, n).size(), want.size());
  // Unweighted: every point is a candidate.
  EXPECT_EQ(FarthestPoints<float>(points, nullptr, labels, centers, n).size(),
            static_cast<size_t>(n));
}

// FarthestPoints on the points as sparse rows against the dense form:
// the same points and distances, to the bit, weighted (every third point
// of weight 0) and not, for several m.
template <typename Scalar>
void ExpectSparseFarthestAsDense(const Matrix<Scalar>& points, const Matrix<Scalar>& centers,
                                 const Labels& labels) {
  const CsrMatrix<Scalar> sparse = CsrMatrix<Scalar>::FromDense(points);
  const int64_t n = points.cols();
  Vector<Scalar> weights(n);
  for (int64_t i = 0; i < n; ++i) weights[i] = i % 3 == 0 ? 0 : Scalar(0.5) + (i % 5);
  for (const Vector<Scalar>* w : std::vector<const Vector<Scalar>*>{nullptr, &weights}) {
    SCOPED_TRACE(w == nullptr ? "unweighted" : "weighted");
    for (const int64_t m : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{50}, n}) {
      SCOPED_TRACE(m);
      std::vector<Scalar> dense_distances, sparse_distances = {Scalar(-1)};
      const std::vector<int64_t> dense =
          FarthestPoints(points, w, labels, centers, m, &dense_distances);
      EXPECT_EQ(FarthestPoints(sparse, w, labels, centers, m, &sparse_distances), dense);
      EXPECT_EQ(sparse_distances, dense_distances);
    }
  }
}

TEST(EmptyClusters, SparseFarthestPointsAreTheDenseOnesTiesIncluded) {
  // The grid: exact distances, many of them equal, and zeros among the
  // coordinates (a seventh of them).
  const int d = 3, n = 400, k = 5;
  const Matrix<float> points = GridPoints(d, n, 3);
  const Matrix<float> centers = GridPoints(d, k, 4);
  Labels labels(n);
  Rng rng(5);
  for (int i = 0; i < n; ++i) labels[i] = static_cast<int>(rng.Below(k));
  ExpectSparseFarthestAsDense(points, centers, labels);
  ExpectSparseFarthestAsDense<double>(points.cast<double>(), centers.cast<double>(), labels);
}

template <typename Scalar>
void SparseFarthestPointsOfDocuments() {
  // TF-IDF documents labelled with the nearest of 12 of them: unit rows
  // mostly orthogonal to their centers, so that most distances lie within
  // the estimates' round-off of 2 and of each other, and a few documents
  // are their own centers (distance 0).
  const CsrMatrix<Scalar> documents =
      TfIdfDocuments<Scalar>({.n = 1500, .d = 4000, .terms = 40}, 6);
  const Matrix<Scalar> points = documents.ToDense();
  const Matrix<Scalar> centers = points.leftCols(12);
  Labels labels;
  AssignNearest(points, centers, &labels);
  ExpectSparseFarthestAsDense(points, centers, labels);
  // Centers that are no point's: means of the clusters.
  ClusterSums sums(static_cast<int>(points.rows()), 12);
  AccumulateClusterSums(points, labels, &sums);
  Matrix<Scalar> means = centers;
  ApplyMeans(sums, &means);
  ExpectSparseFarthestAsDense(points, means, labels);
}

TEST(EmptyClusters, SparseFarthestPointsOfDocumentsAreTheDenseOnesFloat) {
  SparseFarthestPointsOfDocuments<float>();
}
TEST(EmptyClusters, SparseFarthestPointsOfDocumentsAreTheDenseOnesDouble) {
  SparseFarthestPointsOfDocuments<double>();
}

TEST(EmptyClusters, SparseFarthestPointsFollowTheDenseFormsRoundOff) {
  // Rows of the same 1000 values in different orders, point i's copy of
  // the first value raised by i ulps: the exact distances to 0 increase
  // with i by far less than the float sums' round-off, which orders the
  // dense form's distances otherwise. The sparse form must measure every
  // point its estimates cannot place, not take the estimates' order.
  const int d = 1000, n = 50;
  Rng rng(11);
  std::vector<float> values(d);
  for (float& v : values) v = 0.5f + static_cast<float>(rng.Uniform());
  Matrix<float> points(d, n);
  for (int i = 0; i < n; ++i) {
    std::vector<int> order(d);
    std::iota(order.begin(), order.end(), 0);
    for (int l = d - 1; l > 0; --l) std::swap(order[l], order[rng.Below(l + 1)]);
    for (int l = 0; l < d; ++l) points(order[l], i) = values[l];
    for (int u = 0; u < i; ++u) points(order[0], i) = std::nextafter(points(order[0], i), 2.0f);
  }
  const Matrix<float> origin = Matrix<float>::Zero(d, 1);
  const Labels labels(n, 0);
  // The premise: the dense form's farthest point is not the exact one.
  ASSERT_NE(FarthestPoints<float>(points, nullptr, labels, origin, 1), std::vector<int64_t>{n - 1});
  ExpectSparseFarthestAsDense(points, origin, labels);
}

TEST(EmptyClusters, RelocationMovesTheFarthestPointsIntoTheEmptyClusters) {
  const int d = 2, n = 60, k = 4;
  const Matrix<float> points = GridPoints(d, n, 8);
  Matrix<float> centers = points.leftCols(k);
  Labels labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 2;  // clusters 2 and 3 are empty
  ClusterSums sums(d, k);
  AccumulateClusterSums(points, labels, &sums);
  ClusterSums want = sums;
  const std::vector<int64_t> far = FarthestPoints<float>(points, nullptr, labels, centers, 2);
  ASSERT_EQ(far.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const Vector<double> x = points.col(far[r]).cast<double>();
    want.sums.col(labels[far[r]]) -= x;
    want.weights[labels[far[r]]] -= 1;
    --want.counts[labels[far[r]]];
    want.sums.col(2 + r) = x;
    want.weights[2 + r] = 1;
    want.counts[2 + r] = 1;
  }
  EXPECT_EQ(RelocateEmptyClusters<float>(points, nullptr, labels, centers, &sums), 2);
  EXPECT_EQ(sums.sums, want.sums);
  EXPECT_EQ(sums.weights, want.weights);
  EXPECT_EQ(sums.counts, want.counts);
}

template <typename Scalar>
void SparseRelocationMovesTheDensePoints() {
  // Twelve documents as centers, the last three copies of the first three:
  // their clusters are empty (ties go to the lower index).
  const CsrMatrix<Scalar> rows = TfIdfDocuments<Scalar>({.n = 800, .d = 2000, .terms = 30}, 9);
  const Matrix<Scalar> points = rows.ToDense();
  Matrix<Scalar> centers(points.rows(), 12);
  centers.leftCols(9) = points.leftCols(9);
  centers.rightCols(3) = points.leftCols(3);
  Labels labels;
  AssignNearest(points, centers, &labels);
  Vector<Scalar> weights(points.cols());
  for (Eigen::Index i = 0; i < weights.size(); ++i) weights[i] = i % 4 == 0 ? 0 : Scalar(1 + i % 3);
  for (const Vector<Scalar>* w : std::vector<const Vector<Scalar>*>{nullptr, &weights}) {
    SCOPED_TRACE(w == nullptr ? "unweighted" : "weighted");
    ClusterSums dense(static_cast<int>(points.rows()), 12), sparse = dense;
    AccumulateClusterSums(points, labels, &dense, w);
    AccumulateSparseClusterSums(rows, labels, &sparse, w);
    EXPECT_EQ(RelocateEmptyClusters(points, w, labels, centers, &dense), 3);
    EXPECT_EQ(RelocateEmptyClusters(rows, w, labels, centers, &sparse), 3);
    for (int j = 9; j < 12; ++j) EXPECT_EQ(sparse.counts[j], 1) << j;
    EXPECT_EQ(sparse.counts, dense.counts);
    EXPECT_EQ(sparse.weights, dense.weights);
    EXPECT_EQ(sparse.sums, dense.sums);
  }
}

TEST(EmptyClusters, SparseRelocationMovesTheDensePointsFloat) {
  SparseRelocationMovesTheDensePoints<float>();
}
TEST(EmptyClusters, SparseRelocationMovesTheDensePointsDouble) {
  SparseRelocationMovesTheDensePoints<double>();
}

}  // namespace
}  // namespace kmt
