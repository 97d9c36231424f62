// The dense attention against a straightforward per-pair implementation, and
// the normalizers' defining properties.
#include "core/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/random.h"

namespace kmt {
namespace {

template <typename Scalar>
Matrix<Scalar> RandomMatrix(int rows, int cols, Rng& rng, double lo = -1, double hi = 1) {
  Matrix<Scalar> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    m.data()[i] = static_cast<Scalar>(lo + (hi - lo) * rng.Uniform());
  }
  return m;
}

template <typename Scalar>
AttentionBlock<Scalar> RandomBlock(int dim, Rng& rng, double lo = -1, double hi = 1) {
  AttentionBlock<Scalar> b;
  b.Q = RandomMatrix<Scalar>(dim, dim, rng, lo, hi);
  b.K = RandomMatrix<Scalar>(dim, dim, rng, lo, hi);
  b.V = RandomMatrix<Scalar>(dim, dim, rng, lo, hi);
  b.bQ = RandomMatrix<Scalar>(dim, 1, rng, lo, hi);
  b.bK = RandomMatrix<Scalar>(dim, 1, rng, lo, hi);
  b.bV = RandomMatrix<Scalar>(dim, 1, rng, lo, hi);
  return b;
}

// SPEC section 1 written out per query and key, in long double.
template <typename Scalar>
Matrix<Scalar> NaiveAttend(const AttentionBlock<Scalar>& b, const Matrix<Scalar>& z,
                           const Matrix<Scalar>& keys) {
  using L = long double;
  const int dim = b.dim();
  Matrix<Scalar> out(dim, z.cols());
  for (Eigen::Index q = 0; q < z.cols(); ++q) {
    std::vector<L> pq(dim), s(keys.cols());
    for (int r = 0; r < dim; ++r) {
      pq[r] = b.bQ[r];
      for (int c = 0; c < dim; ++c) pq[r] += L(b.Q(r, c)) * z(c, q);
    }
    for (Eigen::Index l = 0; l < keys.cols(); ++l) {
      L acc = 0;
      for (int r = 0; r < dim; ++r) {
        L pk = b.bK[r];
        for (int c = 0; c < dim; ++c) pk += L(b.K(r, c)) * keys(c, l);
        acc += b.score == ScoreKind::kEuclidean ? (pq[r] - pk) * (pq[r] - pk) : pq[r] * pk;
      }
      s[l] = b.score == ScoreKind::kEuclidean ? -acc : acc;
    }
    std::vector<L> w(s.size());
    L total = 0;
    const L best = *std::max_element(s.begin(), s.end());
    for (size_t l = 0; l < s.size(); ++l) {
      switch (b.normalizer) {
        case Normalizer::kSoftmax:
          w[l] = std::exp(L(b.beta) * (s[l] - best));
          break;
        case Normalizer::kHardmax:
          w[l] = s[l] == best ? 1 : 0;
          break;
        case Normalizer::kLinear:
          w[l] = s[l];
          break;
      }
      total += w[l];
    }
    for (int r = 0; r < dim; ++r) {
      L acc = 0;
      for (Eigen::Index l = 0; l < keys.cols(); ++l) {
        L v = b.bV[r];
        for (int c = 0; c < dim; ++c) v += L(b.V(r, c)) * keys(c, l);
        acc += w[l] / total * v;
      }
      out(r, q) = static_cast<Scalar>(acc);
    }
  }
  return out;
}

template <typename Scalar>
class AttentionTest : public ::testing::Test {
 protected:
  // Round-off allowed relative to the output's scale.
  static constexpr double kTolerance = sizeof(Scalar) == 8 ? 1e-11 : 2e-4;
};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AttentionTest, Scalars);

TYPED_TEST(AttentionTest, DenseEvaluatorMatchesPerPairLoops) {
  using S = TypeParam;
  Rng rng(17);
  struct Kind {
    ScoreKind score;
    Normalizer normalizer;
    double beta;
  };
  const Kind kinds[] = {{ScoreKind::kEuclidean, Normalizer::kSoftmax, 0.7},
                        {ScoreKind::kDotProduct, Normalizer::kSoftmax, 1.3},
                        {ScoreKind::kEuclidean, Normalizer::kHardmax, INFINITY},
                        {ScoreKind::kDotProduct, Normalizer::kHardmax, INFINITY},
                        {ScoreKind::kDotProduct, Normalizer::kLinear, 1.0}};
  for (const Kind& kind : kinds) {
    SCOPED_TRACE(NormalizerName(kind.normalizer));
    SCOPED_TRACE(ScoreKindName(kind.score));
    const bool linear = kind.normalizer == Normalizer::kLinear;
    // Linear attention needs non-negative scores: non-negative everything.
    const double lo = linear ? 0 : -1;
    for (int trial = 0; trial < 5; ++trial) {
      const int dim = 1 + static_cast<int>(rng.Below(9));
      AttentionBlock<S> block = RandomBlock<S>(dim, rng, lo, 1);
      block.score = kind.score;
      block.normalizer = kind.normalizer;
      block.beta = static_cast<S>(kind.beta);
      const Matrix<S> queries = RandomMatrix<S>(dim, 1 + rng.Below(40), rng, lo, 1);
      const Matrix<S> keys = RandomMatrix<S>(dim, 1 + rng.Below(40), rng, lo, 1);
      const Matrix<S> want = NaiveAttend(block, queries, keys);
      const Matrix<S> got = Attend(block, queries, keys);
      EXPECT_LE((got - want).norm(), this->kTolerance * (1 + want.norm()));
    }
  }
}

TYPED_TEST(AttentionTest, HardmaxAveragesTiesOrTakesTheLowestIndex) {
  using S = TypeParam;
  AttentionBlock<S> block = AttentionBlock<S>::Zero(1);
  block.Q(0, 0) = block.K(0, 0) = block.V(0, 0) = 1;
  Matrix<S> query(1, 1), keys(1, 4);
  query << 1;
  keys << 0, 2, 5, 3.5;  // 0 and 2 tie at distance 1
  Matrix<S> w = AttentionWeights(block, query, keys);
  EXPECT_EQ(w.col(0), (Vector<S>(4) << 0.5, 0.5, 0, 0).finished());
  block.ties = Ties::kLowestIndex;
  w = AttentionWeights(block, query, keys);
  EXPECT_EQ(w.col(0), (Vector<S>(4) << 1, 0, 0, 0).finished());
  EXPECT_EQ(Attend(block, query, keys)(0, 0), 0);
}

TYPED_TEST(AttentionTest, SoftmaxTendsToHardmaxAsBetaGrows) {
  using S = TypeParam;
  Rng rng(3);
  AttentionBlock<S> block = RandomBlock<S>(4, rng);
  const Matrix<S> queries = RandomMatrix<S>(4, 30, rng);
  const Matrix<S> keys = RandomMatrix<S>(4, 20, rng);
  block.normalizer = Normalizer::kHardmax;
  const Matrix<S> hard = AttentionWeights(block, queries, keys);
  block.normalizer = Normalizer::kSoftmax;
  double previous = INFINITY;
  for (double beta : {1.0, 10.0, 100.0, 1000.0, 1e5}) {
    block.beta = static_cast<S>(beta);
    const double gap = (AttentionWeights(block, queries, keys) - hard).norm();
    EXPECT_LE(gap, previous);
    previous = gap;
  }
  EXPECT_LE(previous, 1e-3);
  block.beta = std::numeric_limits<S>::infinity();
  EXPECT_EQ(AttentionWeights(block, queries, keys), hard);
}

TYPED_TEST(AttentionTest, WeightsAreADistributionPerQuery) {
  using S = TypeParam;
  Rng rng(5);
  for (Normalizer n : {Normalizer::kSoftmax, Normalizer::kHardmax}) {
    AttentionBlock<S> block = RandomBlock<S>(3, rng);
    block.normalizer = n;
    block.beta = 2;
    const Matrix<S> w =
        AttentionWeights(block, RandomMatrix<S>(3, 25, rng), RandomMatrix<S>(3, 31, rng));
    EXPECT_GE(w.minCoeff(), 0);
    for (Eigen::Index q = 0; q < w.cols(); ++q) {
      EXPECT_NEAR(w.col(q).sum(), 1, 1e-6);
    }
  }
}

TYPED_TEST(AttentionTest, SupportMeansAMatchingKey) {
  using S = TypeParam;
  AttentionBlock<S> block = AttentionBlock<S>::Zero(2);
  block.Q.setIdentity();
  block.K.setIdentity();
  block.V.setIdentity();
  Matrix<S> queries(2, 3), keys(2, 2);
  queries << 1, 0, 0, 0, 1, 0;
  keys << 1, 1, 0, 0;
  std::vector<bool> support;
  Attend(block, queries, keys, &support);  // Euclidean hardmax
  EXPECT_EQ(support, (std::vector<bool>{true, false, false}));
  block.score = ScoreKind::kDotProduct;
  block.normalizer = Normalizer::kLinear;
  const Matrix<S> out = Attend(block, queries, keys, &support);
  EXPECT_EQ(support, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(out.col(1), Vector<S>::Zero(2));  // no mass: nothing added
}

TYPED_TEST(AttentionTest, ManyQueryBlocksGiveTheSameAnswer) {
  using S = TypeParam;
  Rng rng(9);
  AttentionBlock<S> block = RandomBlock<S>(2, rng);
  block.normalizer = Normalizer::kSoftmax;
  block.beta = 3;
  // 2100 x 2100 scores exceed one block of 4M entries.
  const Matrix<S> tokens = RandomMatrix<S>(2, 2100, rng);
  const Matrix<S> all = Attend(block, tokens, tokens);
  const Matrix<S> tail = Attend(block, Matrix<S>(tokens.rightCols(7)), tokens);
  EXPECT_LE((all.rightCols(7) - tail).norm(), 1e-5 * tail.norm());
}

TYPED_TEST(AttentionTest, ZeroBlockAddsNothing) {
  using S = TypeParam;
  Rng rng(1);
  const Matrix<S> z = RandomMatrix<S>(5, 8, rng);
  EXPECT_EQ(Attend(AttentionBlock<S>::Zero(5), z, z), Matrix<S>::Zero(5, 8));
}

TEST(AttentionBlock, ValidationNamesTheProblem) {
  AttentionBlock<double> block = AttentionBlock<double>::Zero(3);
  EXPECT_TRUE(ValidateBlock(block, 3).ok());
  EXPECT_EQ(ValidateBlock(block, 4).message(),
            "projections are 3x3, 3x3, 3x3; tokens have 4 dimensions");
  block.bV.resize(2);
  EXPECT_EQ(ValidateBlock(block, 3).message(),
            "biases have 3, 3, 2 entries; tokens have 3 dimensions");
  block = AttentionBlock<double>::Zero(3);
  block.K(1, 1) = NAN;
  EXPECT_EQ(ValidateBlock(block, 3).message(), "weights contain NaN or Inf");
  block = AttentionBlock<double>::Zero(3);
  block.beta = -2;
  EXPECT_EQ(ValidateBlock(block, 3).message(), "inverse temperature -2 must be positive");
}

TEST(AttentionNames, ParseWhatTheyPrint) {
  for (Normalizer n : {Normalizer::kSoftmax, Normalizer::kHardmax, Normalizer::kLinear}) {
    EXPECT_EQ(*ParseNormalizer(NormalizerName(n)), n);
  }
  EXPECT_EQ(*ParseScoreKind("dot"), ScoreKind::kDotProduct);
  EXPECT_EQ(ParseNormalizer("argmax").status().message(),
            "unknown normalizer 'argmax', expected softmax, hardmax or linear");
}

}  // namespace
}  // namespace kmt
