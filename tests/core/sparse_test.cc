// Sparse points: CsrMatrix's checks, and the sparse assignment, sums and
// Lloyd's against the dense path on the same points made dense, to the bit,
// at every SIMD level this CPU runs (the kernels' levels, core/simd.h).
#include "core/sparse.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/random.h"
#include "tests/support/random_weights.h"
#include "tests/support/simd_levels.h"
#include "tests/support/sparse_documents.h"

namespace kmt {
namespace {

// The bits of two vectors equal (EXPECT_EQ on the values would let -0 and
// 0 pass, and fail every NaN).
template <typename A, typename B>
void ExpectSameBits(const A& a, const B& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int64_t differ = 0, first = -1;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a.data()[i], &b.data()[i], sizeof(a.data()[i])) != 0) {
      if (first < 0) first = i;
      ++differ;
    }
  }
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << a.size() << " differ, first at "
                       << first;
}

void ExpectSameSums(const ClusterSums& a, const ClusterSums& b) {
  ExpectSameBits(a.sums, b.sums, "sums");
  EXPECT_EQ(a.counts, b.counts);
  ExpectSameBits(Eigen::Map<const Eigen::VectorXd>(a.weights.data(), a.weights.size()),
                 Eigen::Map<const Eigen::VectorXd>(b.weights.data(), b.weights.size()), "weights");
}

// The columns `which` of the points made dense.
template <typename Scalar>
Matrix<Scalar> Columns(const Matrix<Scalar>& dense, const std::vector<int>& which) {
  Matrix<Scalar> out(dense.rows(), which.size());
  for (size_t j = 0; j < which.size(); ++j) out.col(j) = dense.col(which[j]);
  return out;
}

// Weights in [0.25, 4].
template <typename Scalar>
Vector<Scalar> RandomWeights(Eigen::Index n, uint64_t seed) {
  Rng rng(seed);
  return UniformMatrix<Scalar>(n, 1, rng, 0.25, 4);
}

// One assignment, sparse against dense: labels, squared distances,
// objective and in-pass sums to the bit.
template <typename Scalar>
void ExpectAssignmentAsDense(const CsrMatrix<Scalar>& sparse, const Matrix<Scalar>& centers,
                             const NonDeduced<Vector<Scalar>>* weights) {
  const Matrix<Scalar> dense = sparse.ToDense();
  Labels dense_labels, sparse_labels;
  Vector<Scalar> dense_sq, sparse_sq;
  ClusterSums dense_sums(dense.rows(), centers.cols()), sparse_sums(dense.rows(), centers.cols());
  const double dense_objective =
      AssignNearest(dense, centers, &dense_labels, &dense_sq, &dense_sums, weights);
  const double sparse_objective =
      AssignNearestSparse(sparse, centers, &sparse_labels, &sparse_sq, &sparse_sums, weights);
  EXPECT_EQ(sparse_labels, dense_labels);
  ExpectSameBits(sparse_sq, dense_sq, "squared distances");
  EXPECT_EQ(std::memcmp(&sparse_objective, &dense_objective, sizeof(double)), 0)
      << sparse_objective << " against " << dense_objective;
  ExpectSameSums(sparse_sums, dense_sums);
}

TEST(CsrMatrix, KeepsTheArraysAndMakesThemDense) {
  auto m = CsrMatrix<double>::Create(3, 4, {0, 2, 2, 3}, {0, 3, 1}, {1.5, -2, 3});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->nnz(), 3);
  Matrix<double> expected = Matrix<double>::Zero(4, 3);
  expected(0, 0) = 1.5;
  expected(3, 0) = -2;
  expected(1, 2) = 3;
  EXPECT_EQ(m->ToDense(), expected);
  const CsrMatrix<double> back = CsrMatrix<double>::FromDense(expected);
  EXPECT_EQ(back.indptr(), m->indptr());
  EXPECT_EQ(back.indices(), m->indices());
  EXPECT_EQ(back.values(), m->values());
}

TEST(CsrMatrix, RefusesEachMalformedArrayByName) {
  struct Case {
    const char* name;
    int64_t rows, cols;
    std::vector<int64_t> indptr;
    std::vector<int32_t> indices;
    std::vector<float> values;
    std::string message;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Case> cases = {
      {"negative shape", -1, 4, {0}, {}, {}, "shape (-1, 4) has a negative dimension"},
      {"too many columns",
       1,
       int64_t{1} << 31,
       {0, 0},
       {},
       {},
       "cols = 2147483648 exceeds 2^31 - 1, the most int32 indices address"},
      {"indptr length", 2, 4, {0, 1}, {0}, {1}, "indptr has 2 values, expected rows + 1 = 3"},
      {"indices and values",
       1,
       4,
       {0, 2},
       {0, 1},
       {1},
       "indices has 2 values and values has 1: one column per value"},
      {"indptr start", 1, 4, {1, 1}, {0}, {1}, "indptr[0] = 1, expected 0"},
      {"indptr decreasing",
       2,
       4,
       {0, 2, 1},
       {0, 1},
       {1, 2},
       "indptr decreases at row 1: indptr[2] = 1 < indptr[1] = 2"},
      {"indptr last",
       2,
       4,
       {0, 1, 1},
       {0, 1},
       {1, 2},
       "indptr[2] = 1, expected the number of values, 2"},
      {"index too large",
       2,
       4,
       {0, 1, 2},
       {0, 4},
       {1, 2},
       "indices[1] = 4 (row 1) is outside [0, cols = 4)"},
      {"negative index",
       1,
       4,
       {0, 1},
       {-1},
       {1},
       "indices[0] = -1 (row 0) is outside [0, cols = 4)"},
      {"duplicate",
       2,
       4,
       {0, 1, 3},
       {2, 3, 3},
       {1, 2, 3},
       "indices[2] = 3 (row 1) repeats the column before it: duplicates must be summed first "
       "(scipy: sum_duplicates())"},
      {"unsorted",
       1,
       4,
       {0, 2},
       {3, 1},
       {1, 2},
       "indices[1] = 1 (row 0) is below indices[0] = 3: columns must increase within a row "
       "(scipy: sort_indices())"},
      {"NaN", 2, 4, {0, 1, 2}, {0, 2}, {1, nan}, "values[1] = nan (row 1, column 2) is not finite"},
      {"infinity", 1, 4, {0, 1}, {0}, {-inf}, "values[0] = -inf (row 0, column 0) is not finite"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto m = CsrMatrix<float>::Create(c.rows, c.cols, c.indptr, c.indices, c.values);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(m.status().message(), c.message);
  }
  // A row across a sorted boundary is not compared with the row before it.
  EXPECT_TRUE(CsrMatrix<float>::Create(2, 4, {0, 1, 2}, {3, 0}, {1, 2}).ok());
}

TEST(CsrMatrix, RowsAreGatheredAndWrittenDense) {
  const CsrMatrix<float> docs = TfIdfDocuments<float>({.n = 300, .d = 700, .terms = 20}, 4);
  const Matrix<float> dense = docs.ToDense();
  // Any order, repeats, an empty selection.
  const std::vector<int64_t> rows = {299, 0, 17, 17, 150};
  const CsrMatrix<float> some = docs.Rows(rows.data(), static_cast<int64_t>(rows.size()));
  EXPECT_EQ(some.rows(), 5);
  EXPECT_EQ(some.cols(), 700);
  Matrix<float> want(700, 5);
  for (size_t r = 0; r < rows.size(); ++r) want.col(r) = dense.col(rows[r]);
  EXPECT_EQ(some.ToDense(), want);
  // The arrays as Create would take them.
  EXPECT_TRUE(CsrMatrix<float>::Create(some.rows(), some.cols(), some.indptr(), some.indices(),
                                       some.values())
                  .ok());
  const CsrMatrix<float> none = docs.Rows(nullptr, 0);
  EXPECT_EQ(none.rows(), 0);
  EXPECT_EQ(none.indptr(), std::vector<int64_t>{0});
  // Row writes every value, the zeros over what was there.
  std::vector<float> row(700, 9.0f);
  docs.Row(17, row.data());
  EXPECT_EQ(Eigen::Map<const Vector<float>>(row.data(), 700), dense.col(17));
  // Squared norms from the nonzeros: the documents have unit norm.
  const Vector<float> sq = docs.RowSquaredNorms();
  ASSERT_EQ(sq.size(), 300);
  for (int i = 0; i < 300; ++i) {
    EXPECT_NEAR(sq[i], dense.col(i).cast<double>().squaredNorm(), 1e-6) << i;
  }
}

// Rows with unsorted and repeated columns come out sorted, a column's
// entries summed in their order (3 + 0.25 + 1e8 is not 1e8 + 3 + 0.25 in
// float), an empty row stays empty, and the arrays are a valid matrix's.
TEST(CsrMatrix, CanonicalRowsSortAndSumInTheirOrder) {
  const std::vector<int64_t> indptr = {0, 5, 5, 8};
  const std::vector<int32_t> indices = {4, 1, 4, 0, 4, 2, 1, 0};
  const std::vector<float> values = {3, 7, 0.25f, 5, 1e8f, 1, 2, 4};
  std::vector<int64_t> out_indptr(4);
  std::vector<int32_t> out_indices(8);
  std::vector<float> out_values(8);
  const int64_t nnz =
      CanonicalRows<float>(3, indptr.data(), indices.data(), values.data(), out_indptr.data(),
                           out_indices.data(), out_values.data());
  ASSERT_EQ(nnz, 6);
  EXPECT_EQ(out_indptr, (std::vector<int64_t>{0, 3, 3, 6}));
  out_indices.resize(nnz);
  out_values.resize(nnz);
  EXPECT_EQ(out_indices, (std::vector<int32_t>{0, 1, 4, 0, 1, 2}));
  const float column_4 = (3.0f + 0.25f) + 1e8f;
  EXPECT_EQ(out_values, (std::vector<float>{5, 7, column_4, 4, 2, 1}));
  EXPECT_TRUE(CsrMatrix<float>::Create(3, 5, out_indptr, out_indices, out_values).ok());
}

TEST(CsrMatrix, ChunksAppendIntoOneMatrix) {
  const CsrMatrix<double> docs = TfIdfDocuments<double>({.n = 100, .d = 300, .terms = 10}, 2);
  // Chunks as a shard receives them, each with its indptr from 0, one of
  // them without rows.
  CsrMatrix<double> whole = *CsrMatrix<double>::Create(0, 300, {0}, {}, {});
  whole.Reserve(100, docs.nnz());
  int64_t first = 0;
  for (const int64_t size : {30, 0, 1, 69}) {
    std::vector<int64_t> rows(size);
    std::iota(rows.begin(), rows.end(), first);
    first += size;
    const CsrMatrix<double> chunk = docs.Rows(rows.data(), size);
    ASSERT_EQ(chunk.indptr()[0], 0);
    ASSERT_TRUE(whole.Append(chunk).ok());
  }
  EXPECT_EQ(whole.rows(), 100);
  EXPECT_EQ(whole.indptr(), docs.indptr());
  EXPECT_EQ(whole.indices(), docs.indices());
  EXPECT_EQ(whole.values(), docs.values());
  // Another width is refused and changes nothing.
  const absl::Status wrong = whole.Append(*CsrMatrix<double>::Create(1, 299, {0, 1}, {3}, {1}));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.message(), "rows of 299 columns appended to a matrix of 300");
  EXPECT_EQ(whole.rows(), 100);
  EXPECT_EQ(whole.nnz(), docs.nnz());
}

TEST(SparseAssignment, NoPointsOrNoCentersAnswerAsTheDensePath) {
  const CsrMatrix<float> none = *CsrMatrix<float>::Create(0, 3, {0}, {}, {});
  const CsrMatrix<float> two = *CsrMatrix<float>::Create(2, 3, {0, 1, 1}, {2}, {1});
  Labels labels{7};
  Vector<float> sq;
  EXPECT_EQ(AssignNearestSparse(none, Matrix<float>(Matrix<float>::Zero(3, 2)), &labels, &sq), 0);
  EXPECT_TRUE(labels.empty());
  EXPECT_EQ(sq.size(), 0);
  EXPECT_EQ(AssignNearestSparse(two, Matrix<float>(3, 0), &labels, &sq), 0);
  EXPECT_EQ(labels, Labels({0, 0}));
  EXPECT_EQ(sq.size(), 2);
}

template <typename Scalar>
class SparseTest : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SparseTest, Scalars);

// TF-IDF documents (d = 5,000, about 50 terms a row, unit norm), the
// first k of them the centers: those rows are at distance 0 from theirs.
// The k take the scores' packets whole and in part at every level.
TYPED_TEST(SparseTest, AssignmentEqualsTheDensePathOnDocuments) {
  using Scalar = TypeParam;
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = 2000, .d = 5000, .terms = 50}, 7);
  const Matrix<Scalar> dense = docs.ToDense();
  const Vector<Scalar> weights = RandomWeights<Scalar>(docs.rows(), 3);
  for (const int k : {20, 100}) {
    SCOPED_TRACE(k);
    std::vector<int> first(k);
    for (int j = 0; j < k; ++j) first[j] = 3 * j;
    const Matrix<Scalar> centers = Columns(dense, first);
    AtEachSimdLevel([&] {
      ExpectAssignmentAsDense(docs, centers, nullptr);
      ExpectAssignmentAsDense(docs, centers, &weights);
    });
  }
}

// What one assignment gives at one level.
template <typename Scalar>
struct SparseAnswers {
  Labels labels, product_labels;
  Vector<Scalar> sq, product_sq;
  Matrix<Scalar> all;
  ClusterSums sums;
  double objective = 0;
};

// Every level gives the same labels, distances (the dense row's and the
// product form's: the scores add the same products in the same order at
// every packet width, without fused multiply-adds), objective and sums, to
// the bit, for centers that are rows and for means (which no row is near);
// k = 300 takes more than one pass of registers (16 AVX-512 packets: 256
// float centers).
TYPED_TEST(SparseTest, EveryLevelGivesTheSameBits) {
  using Scalar = TypeParam;
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = 1500, .d = 4000, .terms = 40}, 15);
  const Matrix<Scalar> dense = docs.ToDense();
  const Vector<Scalar> weights = RandomWeights<Scalar>(docs.rows(), 8);
  for (const int k : {7, 33, 300}) {
    for (const bool means : {false, true}) {
      SCOPED_TRACE(testing::Message() << "k " << k << (means ? ", means" : ", rows"));
      Matrix<Scalar> centers(dense.rows(), k);
      for (int j = 0; j < k; ++j) {
        if (means) {
          centers.col(j) = dense.middleCols(j, 4).rowwise().mean();
        } else {
          centers.col(j) = dense.col(5 * j);
        }
      }
      std::map<std::string, SparseAnswers<Scalar>> at;
      AtEachSimdLevel([&] {
        SparseAnswers<Scalar> a{.sums = ClusterSums(dense.rows(), k)};
        a.objective = AssignNearestSparse(docs, centers, &a.labels, &a.sq, &a.sums, &weights);
        AssignNearestSparse(docs, centers, &a.product_labels, &a.product_sq, nullptr, nullptr,
                            SparseDistances::kProduct);
        a.all = SparseSquaredDistances(docs, centers);
        Labels dense_labels;
        AssignNearest(dense, centers, &dense_labels);
        EXPECT_EQ(a.labels, dense_labels);
        EXPECT_EQ(a.product_labels, dense_labels);
        at.emplace(SimdChoiceName(ActiveSimdChoice()), std::move(a));
      });
      const auto& [first_name, first] = *at.begin();
      for (const auto& [name, a] : at) {
        SCOPED_TRACE(name + " against " + first_name);
        EXPECT_EQ(a.labels, first.labels);
        EXPECT_EQ(a.product_labels, first.labels);
        ExpectSameBits(a.sq, first.sq, "dense row's distances");
        ExpectSameBits(a.product_sq, first.product_sq, "product distances");
        ExpectSameBits(a.all, first.all, "all distances");
        EXPECT_EQ(std::memcmp(&a.objective, &first.objective, sizeof(double)), 0);
        ExpectSameSums(a.sums, first.sums);
      }
    }
  }
}

TYPED_TEST(SparseTest, ProductDistancesKeepTheLabels) {
  using Scalar = TypeParam;
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = 1000, .d = 5000, .terms = 50}, 8);
  const Matrix<Scalar> dense = docs.ToDense();
  const Matrix<Scalar> centers = Columns(dense, {5, 50, 500, 900, 901, 902});
  Labels dense_labels, sparse_labels;
  Vector<Scalar> dense_sq, sparse_sq;
  AssignNearest(dense, centers, &dense_labels, &dense_sq);
  AssignNearestSparse(docs, centers, &sparse_labels, &sparse_sq, nullptr, nullptr,
                      SparseDistances::kProduct);
  EXPECT_EQ(sparse_labels, dense_labels);
  // Unit rows and centers: the product form's round-off is a few hundred
  // eps at most.
  const double tolerance = 1000 * std::numeric_limits<Scalar>::epsilon();
  for (Eigen::Index i = 0; i < dense_sq.size(); ++i) {
    ASSERT_NEAR(sparse_sq[i], dense_sq[i], tolerance) << i;
  }
}

// Exact and near ties: duplicate centers (the lower index wins), centers
// at exactly the same distance from a row but whose direct distances
// round apart (the same terms in another order), duplicate rows, empty
// rows and an empty center.
TYPED_TEST(SparseTest, TiesAreDecidedAsTheDensePathDecidesThem) {
  using Scalar = TypeParam;
  constexpr int kD = 3000;
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = 200, .d = kD, .terms = 40}, 9);
  Matrix<Scalar> rows = docs.ToDense();
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  // Centers 2p and 2p + 1 around row p: row p plus u, and plus u with its
  // coordinates reversed (the same squared terms, summed in another order).
  constexpr int kPairs = 12;
  Matrix<Scalar> centers(kD, 2 * kPairs + 3);
  for (int p = 0; p < kPairs; ++p) {
    Vector<Scalar> u(kD);
    for (int l = 0; l < kD; ++l) u[l] = static_cast<Scalar>(0.02 * normal(rng));
    centers.col(2 * p) = rows.col(p) + u;
    centers.col(2 * p + 1) = rows.col(p) + u.reverse();
  }
  centers.col(2 * kPairs) = rows.col(100);
  centers.col(2 * kPairs + 1) = rows.col(100);  // a duplicate: never chosen
  centers.col(2 * kPairs + 2).setZero();        // empty rows' own
  // Points: the rows, each of the first 100 twice, and 10 empty rows.
  Matrix<Scalar> points(kD, rows.cols() + 100 + 10);
  points.leftCols(rows.cols()) = rows;
  points.middleCols(rows.cols(), 100) = rows.leftCols(100);
  points.rightCols(10).setZero();
  const CsrMatrix<Scalar> sparse = CsrMatrix<Scalar>::FromDense(points);
  AtEachSimdLevel([&] {
    ExpectAssignmentAsDense(sparse, centers, nullptr);
    Labels labels;
    AssignNearestSparse(sparse, centers, &labels);
    for (Eigen::Index i = 0; i < points.cols(); ++i) {
      EXPECT_NE(labels[i], 2 * kPairs + 1) << i;
    }
    EXPECT_EQ(labels[100], 2 * kPairs);
    EXPECT_EQ(labels.back(), 2 * kPairs + 2);
  });
}

// Every row exactly as far from center 0 as from center 1, the same
// center with pairs of coordinates swapped where each row's two values
// are equal: the scores' round-off orders the two either way, the direct
// distances decide (or, equal, the lower index).
TYPED_TEST(SparseTest, ExactTiesOfSwappedCentersAreDecidedAsDense) {
  using Scalar = TypeParam;
  constexpr int kD = 5000, kSwapped = 40;
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = 400, .d = kD, .terms = 50}, 14);
  Matrix<Scalar> points = docs.ToDense();
  for (int a = 0; a < kSwapped; ++a) points.row(kD / 2 + a) = points.row(a);
  Matrix<Scalar> centers(kD, 2);
  centers.col(0) = docs.ToDense().rowwise().mean();  // not symmetric in the pairs
  centers.col(1) = centers.col(0);
  for (int a = 0; a < kSwapped; ++a) std::swap(centers(a, 1), centers(kD / 2 + a, 1));
  const CsrMatrix<Scalar> sparse = CsrMatrix<Scalar>::FromDense(points);
  AtEachSimdLevel([&] {
    ExpectAssignmentAsDense(sparse, centers, nullptr);
    // Both centers win rows: the ties went both ways.
    Labels labels;
    AssignNearest(points, centers, &labels);
    const int ones = static_cast<int>(std::count(labels.begin(), labels.end(), 1));
    EXPECT_GT(ones, 0);
    EXPECT_LT(ones, static_cast<int>(labels.size()));
    // The product distances decide the same ties.
    Labels product;
    AssignNearestSparse(sparse, centers, &product, nullptr, nullptr, nullptr,
                        SparseDistances::kProduct);
    EXPECT_EQ(product, labels);
  });
}

TYPED_TEST(SparseTest, LloydEqualsTheDensePathStepByStep) {
  using Scalar = TypeParam;
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = 1500, .d = 5000, .terms = 50}, 12);
  const Matrix<Scalar> dense = docs.ToDense();
  const Vector<Scalar> weights = RandomWeights<Scalar>(docs.rows(), 4);
  constexpr int kIterations = 6, kK = 16;
  std::vector<int> first(kK);
  for (int j = 0; j < kK; ++j) first[j] = j;
  for (const bool weighted : {false, true}) {
    SCOPED_TRACE(weighted);
    const Vector<Scalar>* w = weighted ? &weights : nullptr;
    // The dense steps, recorded.
    Matrix<Scalar> dense_centers = Columns(dense, first);
    std::vector<Labels> dense_labels(kIterations);
    std::vector<double> dense_objective(kIterations);
    std::vector<Matrix<Scalar>> dense_after(kIterations);
    int empty = 0;
    for (int t = 0; t < kIterations; ++t) {
      dense_objective[t] =
          AssignNearest(dense, dense_centers, &dense_labels[t], nullptr, nullptr, w);
      ClusterSums sums(dense.rows(), kK);
      AccumulateClusterSums(dense, dense_labels[t], &sums, w);
      empty += ApplyMeans(sums, &dense_centers);
      dense_after[t] = dense_centers;
    }
    AtEachSimdLevel([&] {
      Matrix<Scalar> centers = Columns(dense, first);
      Labels labels;
      int steps = 0;
      SparseLloyd<Scalar>(docs, &centers, kIterations, &labels, w,
                          [&](int t, const Labels& l, double objective, const Matrix<Scalar>& c) {
                            SCOPED_TRACE(t);
                            ++steps;
                            EXPECT_EQ(l, dense_labels[t]);
                            EXPECT_EQ(objective, dense_objective[t]);
                            ExpectSameBits(c, dense_after[t], "centers");
                          });
      EXPECT_EQ(steps, kIterations);
    });
    // The labels move: the run is not at rest from the start.
    EXPECT_NE(dense_labels.front(), dense_labels.back());
  }
}

// More than one of AccumulateClusterSums's chunks, weighted and not.
TYPED_TEST(SparseTest, SumsEqualTheDenseSumsAcrossChunks) {
  using Scalar = TypeParam;
  const int n = static_cast<int>(2 * kClusterSumsChunk + 100);
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = n, .d = 60, .terms = 8}, 13);
  const Matrix<Scalar> dense = docs.ToDense();
  std::mt19937_64 rng(5);
  Labels labels(n);
  for (int& l : labels) l = static_cast<int>(rng() % 7);
  const Vector<Scalar> weights = RandomWeights<Scalar>(n, 6);
  for (const bool weighted : {false, true}) {
    SCOPED_TRACE(weighted);
    const Vector<Scalar>* w = weighted ? &weights : nullptr;
    AtEachSimdLevel([&] {
      ClusterSums dense_sums(60, 7), sparse_sums(60, 7);
      // Sums already there are added to as the dense path adds to them,
      // -0 included (a part's +0 added to it makes it +0), in the clusters
      // rows fall in and in one that none does (label 7).
      for (ClusterSums* sums : {&dense_sums, &sparse_sums}) {
        *sums = ClusterSums(60, 8);
        sums->sums.setConstant(0.1);
        sums->sums.row(3).setConstant(-0.0);
        sums->sums.col(7).setConstant(-0.0);
        sums->weights = {0, -0.0, 2, 0, 0, 0, 0, -0.0};
      }
      AccumulateClusterSums(dense, labels, &dense_sums, w);
      AccumulateSparseClusterSums(docs, labels, &sparse_sums, w);
      ExpectSameSums(sparse_sums, dense_sums);
    });
  }
}

// Every point's distance to every center from the scores, against the
// distances in long double on the points made dense, within the scores'
// round-off (a point's own equal to kProduct's).
TYPED_TEST(SparseTest, AllDistancesFromTheScoresAreWithinTheirRoundOff) {
  using Scalar = TypeParam;
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = 300, .d = 2000, .terms = 40}, 17);
  const Matrix<Scalar> dense = docs.ToDense();
  const Matrix<Scalar> centers = Columns(dense, {3, 50, 77, 120, 299});
  const Matrix<Scalar> all = SparseSquaredDistances(docs, centers);
  ASSERT_EQ(all.rows(), 5);
  ASSERT_EQ(all.cols(), 300);
  double worst = 0;
  for (Eigen::Index i = 0; i < dense.cols(); ++i) {
    for (Eigen::Index j = 0; j < centers.cols(); ++j) {
      long double exact = 0, scale = 0;
      for (Eigen::Index l = 0; l < dense.rows(); ++l) {
        const long double x = dense(l, i), c = centers(l, j);
        exact += (x - c) * (x - c);
        scale += x * x + c * c;
      }
      worst = std::max(worst, static_cast<double>(std::fabs(all(j, i) - exact) / scale));
    }
  }
  // 40 terms a row: the scores' bound is about 41 eps of the norms.
  EXPECT_LT(worst, 100 * std::numeric_limits<Scalar>::epsilon());
  EXPECT_EQ(all(0, 3), 0);  // a center's own row, clamped at 0 if below
  Labels labels;
  Vector<Scalar> own;
  AssignNearestSparse(docs, centers, &labels, &own, nullptr, nullptr, SparseDistances::kProduct);
  // The same expression as kProduct's own distance, near ties included.
  for (Eigen::Index i = 0; i < dense.cols(); ++i) {
    ASSERT_EQ(all(labels[i], i), own[i]) << i;
  }
}

}  // namespace
}  // namespace kmt
