#include "core/sparse_sums.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/random.h"
#include "core/sparse.h"
#include "tests/support/sparse_documents.h"

namespace kmt {
namespace {

// Random labels in [0, k - 2): cluster k - 2 holds row 5 alone, cluster
// k - 1 nothing.
Labels RandomLabels(int64_t n, int k, uint64_t seed) {
  Rng rng(seed);
  Labels labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int>(rng.Uniform() * (k - 2));
  labels[5] = k - 2;
  return labels;
}

// The sums as rows equal the dense ClusterSums to the bit, for parts of the
// given size: counts, weights, every sum; a cluster's row holds the
// columns its points have nonzeros in, an empty cluster's none.
template <typename Scalar>
void ExpectSparseSumsAreTheDenseOnes() {
  const int k = 7;
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = 40000, .d = 300, .terms = 6}, 3);
  const Labels labels = RandomLabels(docs.rows(), k, 4);
  Vector<Scalar> weights(docs.rows());
  for (Eigen::Index i = 0; i < weights.size(); ++i) weights[i] = Scalar(0.25) + (i % 5);
  const Vector<Scalar>* const cases[] = {nullptr, &weights};
  for (const Vector<Scalar>* w : cases) {
    SCOPED_TRACE(w != nullptr ? "weighted" : "unweighted");
    // AccumulateSparseClusterSums adds parts of kClusterSumsChunk rows: three
    // parts here.
    ClusterSums dense(static_cast<int>(docs.cols()), k);
    AccumulateSparseClusterSums(docs, labels, &dense, w);
    absl::StatusOr<CsrClusterSums> sparse =
        SparseClusterSums(docs, labels, k, w, kClusterSumsChunk);
    ASSERT_TRUE(sparse.ok()) << sparse.status();
    EXPECT_EQ(sparse->counts, dense.counts);
    EXPECT_EQ(sparse->weights, dense.weights);
    ASSERT_EQ(sparse->sums.rows(), k);
    ASSERT_EQ(sparse->sums.cols(), docs.cols());
    EXPECT_EQ(sparse->sums.ToDense(), dense.sums);
    const std::vector<int64_t>& at = sparse->sums.indptr();
    EXPECT_EQ(std::vector<int32_t>(sparse->sums.indices().begin() + at[k - 2],
                                   sparse->sums.indices().begin() + at[k - 1]),
              std::vector<int32_t>(docs.indices().begin() + docs.indptr()[5],
                                   docs.indices().begin() + docs.indptr()[6]));
    EXPECT_EQ(at[k], at[k - 1]);
  }
}

TEST(SparseClusterSums, AreTheDenseSumsBitsInPartsFloat) {
  ExpectSparseSumsAreTheDenseOnes<float>();
}

TEST(SparseClusterSums, AreTheDenseSumsBitsInPartsDouble) {
  ExpectSparseSumsAreTheDenseOnes<double>();
}

// With the assignment's parts, the sums are AssignNearestSparse's own.
TEST(SparseClusterSums, AreTheAssignmentsSumsWithItsParts) {
  const int k = 12;
  const CsrMatrix<double> docs = TfIdfDocuments<double>({.n = 3000, .d = 2000, .terms = 30}, 5);
  std::vector<int64_t> first(k);
  for (int j = 0; j < k; ++j) first[j] = 17 * j;
  const Matrix<double> centers = docs.Rows(first.data(), k).ToDense();
  Labels labels;
  ClusterSums dense(static_cast<int>(docs.cols()), k);
  AssignNearestSparse(docs, centers, &labels, nullptr, &dense);
  absl::StatusOr<CsrClusterSums> sparse = SparseClusterSums(
      docs, labels, k, nullptr, AssignmentPartSize<double>(docs.rows(), docs.cols(), k));
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_EQ(sparse->counts, dense.counts);
  EXPECT_EQ(sparse->sums.ToDense(), dense.sums);
}

// Sums past the largest double cannot be rows of a CsrMatrix: refused.
TEST(SparseClusterSums, AnOverflowingSumIsRefused) {
  const double big = 1.5e308;
  const CsrMatrix<double> points = *CsrMatrix<double>::Create(2, 3, {0, 1, 2}, {1, 1}, {big, big});
  const absl::StatusOr<CsrClusterSums> sums = SparseClusterSums(points, {0, 0}, 1, nullptr, 16);
  EXPECT_EQ(sums.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sums.status().message(),
            "the cluster sums overflow: values[0] = inf (row 0, column 1) is not finite");
}

}  // namespace
}  // namespace kmt
