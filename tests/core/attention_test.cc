// The dense attention against a straightforward per-pair implementation, and
// the normalizers' defining properties.
#include "core/attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <vector>

#include "core/random.h"
#include "tests/support/random_weights.h"
#include "tests/support/simd_levels.h"

namespace kmt {
namespace {

// A Euclidean block on one coordinate with unit projections: query x meets
// key y with score -(x - y)^2 and contributes y.
template <typename Scalar>
AttentionBlock<Scalar> UnitBlock(Normalizer normalizer, Scalar beta) {
  AttentionBlock<Scalar> b = AttentionBlock<Scalar>::Zero(1);
  b.Q(0, 0) = b.K(0, 0) = b.V(0, 0) = 1;
  b.normalizer = normalizer;
  b.beta = beta;
  return b;
}

// One-coordinate tokens, a 1 x n matrix.
template <typename Scalar>
Matrix<Scalar> Row(std::initializer_list<double> values) {
  Matrix<Scalar> m(1, static_cast<Eigen::Index>(values.size()));
  Eigen::Index i = 0;
  for (double x : values) m(0, i++) = static_cast<Scalar>(x);
  return m;
}

// The attention definition (docs/core.md) written out per query and key, in long double: the
// weights of every key (rows) for every query (columns), each normalizer straight from its
// definition.
template <typename Scalar>
Matrix<long double> NaiveWeights(const AttentionBlock<Scalar>& b, const Matrix<Scalar>& z,
                                 const Matrix<Scalar>& keys, Sampling sampling = {}) {
  using L = long double;
  const int dim = b.dim();
  const Eigen::Index n = keys.cols();
  Matrix<L> weights(n, z.cols());
  for (Eigen::Index q = 0; q < z.cols(); ++q) {
    std::vector<L> pq(dim), s(n);
    for (int r = 0; r < dim; ++r) {
      pq[r] = b.bQ[r];
      for (int c = 0; c < dim; ++c) pq[r] += L(b.Q(r, c)) * z(c, q);
    }
    for (Eigen::Index l = 0; l < n; ++l) {
      L acc = 0;
      for (int r = 0; r < dim; ++r) {
        L pk = b.bK[r];
        for (int c = 0; c < dim; ++c) pk += L(b.K(r, c)) * keys(c, l);
        acc += b.score == ScoreKind::kEuclidean ? (pq[r] - pk) * (pq[r] - pk) : pq[r] * pk;
      }
      s[l] = b.score == ScoreKind::kEuclidean ? -acc : acc;
    }
    const L beta = b.beta;
    std::vector<L> w(n, 0);
    const L best = *std::max_element(s.begin(), s.end());
    switch (b.normalizer) {
      case Normalizer::kSoftmax:
        for (Eigen::Index l = 0; l < n; ++l) w[l] = std::exp(beta * (s[l] - best));
        break;
      case Normalizer::kHardmax:
        for (Eigen::Index l = 0; l < n; ++l) w[l] = s[l] == best ? 1 : 0;
        break;
      case Normalizer::kLinear:
        w = s;
        break;
      case Normalizer::kSparsemax: {
        // Bisection for t with sum_l max(beta s_l - t, 0) = 1 in
        // [beta best - 1, beta best].
        L lo = beta * best - 1, hi = beta * best;
        for (int step = 0; step < 200; ++step) {
          const L t = (lo + hi) / 2;
          L mass = 0;
          for (L x : s) mass += std::max(beta * x - t, L(0));
          (mass > 1 ? lo : hi) = t;
        }
        for (Eigen::Index l = 0; l < n; ++l) w[l] = std::max(beta * s[l] - lo, L(0));
        break;
      }
      case Normalizer::kNormmax: {
        // Every r: the top r by score (lower index first among equals),
        // mean - tau / r, the first best r.
        std::vector<Eigen::Index> order(n);
        for (Eigen::Index l = 0; l < n; ++l) order[l] = l;
        std::stable_sort(order.begin(), order.end(),
                         [&s](Eigen::Index a, Eigen::Index c) { return s[a] > s[c]; });
        L sum = 0, best_value = -INFINITY;
        Eigen::Index best_r = 0;
        for (Eigen::Index r = 1; r <= n; ++r) {
          sum += beta * s[order[r - 1]];
          const L value = sum / r - L(b.tau) / r;
          if (value > best_value) {
            best_value = value;
            best_r = r;
          }
        }
        for (Eigen::Index j = 0; j < best_r; ++j) w[order[j]] = 1;
        break;
      }
      case Normalizer::kGumbel: {
        // beta = infinity: the first maximiser of s; else of beta s + noise.
        Eigen::Index chosen = 0;
        L chosen_value = -INFINITY;
        for (Eigen::Index l = 0; l < n; ++l) {
          const L value = std::isinf(b.beta)
                              ? s[l]
                              : beta * s[l] + CounterGumbel(sampling.seed, sampling.layer, q, l);
          if (value > chosen_value) {
            chosen_value = value;
            chosen = l;
          }
        }
        w[chosen] = 1;
        break;
      }
    }
    const L total = std::accumulate(w.begin(), w.end(), L(0));
    for (Eigen::Index l = 0; l < n; ++l) weights(l, q) = w[l] / total;
  }
  return weights;
}

// The output sum_l w_l (V z'_l + b_V) of those weights.
template <typename Scalar>
Matrix<Scalar> NaiveAttend(const AttentionBlock<Scalar>& b, const Matrix<Scalar>& z,
                           const Matrix<Scalar>& keys, Sampling sampling = {}) {
  using L = long double;
  const Matrix<L> w = NaiveWeights(b, z, keys, sampling);
  const int dim = b.dim();
  Matrix<Scalar> out(dim, z.cols());
  for (Eigen::Index q = 0; q < z.cols(); ++q) {
    for (int r = 0; r < dim; ++r) {
      L acc = 0;
      for (Eigen::Index l = 0; l < keys.cols(); ++l) {
        L v = b.bV[r];
        for (int c = 0; c < dim; ++c) v += L(b.V(r, c)) * keys(c, l);
        acc += w(l, q) * v;
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
  AtEachSimdLevel([&] {
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
        const Matrix<S> queries = UniformMatrix<S>(dim, 1 + rng.Below(40), rng, lo, 1);
        const Matrix<S> keys = UniformMatrix<S>(dim, 1 + rng.Below(40), rng, lo, 1);
        const Matrix<S> want = NaiveAttend(block, queries, keys);
        const Matrix<S> got = Attend(block, queries, keys);
        EXPECT_LE((got - want).norm(), this->kTolerance * (1 + want.norm()));
      }
    }
  });
}

TYPED_TEST(AttentionTest, SparseAndSampledNormalizersMatchPerPairLoops) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(19);
    struct Kind {
      ScoreKind score;
      Normalizer normalizer;
      double beta;
      double tau;
    };
    const Kind kinds[] = {{ScoreKind::kEuclidean, Normalizer::kSparsemax, 0.7, 0},
                          {ScoreKind::kDotProduct, Normalizer::kSparsemax, 1.3, 0},
                          {ScoreKind::kEuclidean, Normalizer::kNormmax, 1, 2},
                          {ScoreKind::kEuclidean, Normalizer::kNormmax, 0.5, 0},
                          {ScoreKind::kDotProduct, Normalizer::kNormmax, 2, 5},
                          {ScoreKind::kEuclidean, Normalizer::kGumbel, 3, 0},
                          {ScoreKind::kDotProduct, Normalizer::kGumbel, 1.5, 0},
                          {ScoreKind::kEuclidean, Normalizer::kGumbel, INFINITY, 0},
                          {ScoreKind::kDotProduct, Normalizer::kGumbel, INFINITY, 0}};
    for (const Kind& kind : kinds) {
      SCOPED_TRACE(NormalizerName(kind.normalizer));
      SCOPED_TRACE(ScoreKindName(kind.score));
      SCOPED_TRACE(kind.beta);
      for (int trial = 0; trial < 5; ++trial) {
        const int dim = 1 + static_cast<int>(rng.Below(9));
        AttentionBlock<S> block = RandomBlock<S>(dim, rng);
        block.score = kind.score;
        block.normalizer = kind.normalizer;
        block.beta = static_cast<S>(kind.beta);
        block.tau = static_cast<S>(kind.tau);
        ASSERT_TRUE(ValidateBlock(block, dim).ok());
        const Sampling sampling{.seed = 100u + static_cast<uint64_t>(trial), .layer = trial};
        const Matrix<S> queries = UniformMatrix<S>(dim, 1 + rng.Below(40), rng);
        const Matrix<S> keys = UniformMatrix<S>(dim, 1 + rng.Below(40), rng);
        const Matrix<long double> want = NaiveWeights(block, queries, keys, sampling);
        const Matrix<S> got = AttentionWeights(block, queries, keys, sampling);
        EXPECT_LE((got.template cast<long double>() - want).cwiseAbs().maxCoeff(),
                  this->kTolerance);
        const Matrix<S> want_out = NaiveAttend(block, queries, keys, sampling);
        std::vector<bool> support;
        const Matrix<S> out = Attend(block, queries, keys, &support, sampling);
        EXPECT_LE((out - want_out).norm(), this->kTolerance * (1 + want_out.norm()));
        EXPECT_EQ(support, std::vector<bool>(queries.cols(), true));
      }
    }
  });
}

TYPED_TEST(AttentionTest, NormmaxAveragesTheKeysItKeeps) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    AttentionBlock<S> block = UnitBlock<S>(Normalizer::kNormmax, 1);
    const Matrix<S> query = Row<S>({1}), keys = Row<S>({0, 2, 5, 3.5});  // -1, -1, -16, -6.25
    // tau = 0: the nearest key, the lower index of the two.
    EXPECT_EQ(AttentionWeights(block, query, keys).col(0), (Vector<S>(4) << 1, 0, 0, 0).finished());
    block.tau = 5;  // gaps 0, 10.5: the two nearest
    EXPECT_EQ(AttentionWeights(block, query, keys).col(0),
              (Vector<S>(4) << 0.5, 0.5, 0, 0).finished());
    EXPECT_EQ(Attend(block, query, keys)(0, 0), 1);
    block.tau = 20;  // gaps 0, 10.5, 39.75: the three nearest
    const S third = S(1) / 3;
    EXPECT_EQ(AttentionWeights(block, query, keys).col(0),
              (Vector<S>(4) << third, third, 0, third).finished());
    EXPECT_EQ(Attend(block, query, keys)(0, 0), S(5.5) / 3);
  });
}

TYPED_TEST(AttentionTest, SparsemaxKeepsItsWeightWhenScoresAreLarge) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    // Scores beyond 1 / epsilon: the threshold t = s_max - 1 would round to
    // s_max and leave no weight at all; the best key gets exactly 1.
    AttentionBlock<S> block = UnitBlock<S>(Normalizer::kSparsemax, 1);
    block.score = ScoreKind::kDotProduct;  // scores are the keys
    const double big = sizeof(S) == 8 ? 1e17 : 1e8;
    const Matrix<S> query = Row<S>({1});
    Matrix<S> keys = Row<S>({big / 2, big, -big});
    EXPECT_EQ(AttentionWeights(block, query, keys).col(0), (Vector<S>(3) << 0, 1, 0).finished());
    EXPECT_EQ(Attend(block, query, keys)(0, 0), S(big));
    // Scores within 1 of each other share it.
    keys = Row<S>({0.25, 0.75, -1});
    EXPECT_EQ(AttentionWeights(block, query, keys).col(0),
              (Vector<S>(3) << 0.25, 0.75, 0).finished());
  });
}

TYPED_TEST(AttentionTest, GumbelDrawIsNamedBySeedAndLayer) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(29);
    AttentionBlock<S> block = RandomBlock<S>(3, rng);
    block.normalizer = Normalizer::kGumbel;
    block.beta = 2;
    const Matrix<S> queries = UniformMatrix<S>(3, 50, rng), keys = UniformMatrix<S>(3, 60, rng);
    const Matrix<S> w = AttentionWeights(block, queries, keys, {.seed = 5, .layer = 1});
    EXPECT_EQ(AttentionWeights(block, queries, keys, {.seed = 5, .layer = 1}), w);
    EXPECT_NE(AttentionWeights(block, queries, keys, {.seed = 6, .layer = 1}), w);
    EXPECT_NE(AttentionWeights(block, queries, keys, {.seed = 5, .layer = 2}), w);
    // Each query draws one key.
    EXPECT_EQ(w.colwise().sum(), Matrix<S>::Ones(1, 50));
    EXPECT_EQ((w.array() == 1).count(), 50);
  });
}

TYPED_TEST(AttentionTest, GumbelDrawDoesNotDependOnBlocksOrThreads) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(31);
    AttentionBlock<S> block = RandomBlock<S>(2, rng);
    block.normalizer = Normalizer::kGumbel;
    block.beta = 4;
    const Sampling sampling{.seed = 77, .layer = 3};
    // 2100 x 2100 scores are two query blocks (1997 and 103 queries).
    const Matrix<S> tokens = UniformMatrix<S>(2, 2100, rng);
    const auto chosen = [](const auto& w) {
      std::vector<Eigen::Index> keys(w.cols());
      for (Eigen::Index q = 0; q < w.cols(); ++q) w.col(q).maxCoeff(&keys[q]);
      return keys;
    };
    const std::vector<Eigen::Index> all = chosen(AttentionWeights(block, tokens, tokens, sampling));
    // Against a loop over every pair, no blocks.
    const std::vector<Eigen::Index> naive = chosen(NaiveWeights(block, tokens, tokens, sampling));
    EXPECT_EQ(all, naive);
    // The first 300 queries alone are one block.
    const std::vector<Eigen::Index> head =
        chosen(AttentionWeights(block, Matrix<S>(tokens.leftCols(300)), tokens, sampling));
    EXPECT_EQ(head, std::vector<Eigen::Index>(all.begin(), all.begin() + 300));
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const std::vector<Eigen::Index> serial =
        chosen(AttentionWeights(block, tokens, tokens, sampling));
    omp_set_num_threads(threads);
    EXPECT_EQ(serial, all);
  });
}

TYPED_TEST(AttentionTest, GumbelDrawsFollowSoftmax) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    // One query at 0, five keys: scores -k^2, exact in float. Over 20000 seeds
    // the draw of each key is counted and compared with softmax(beta s) by a
    // chi-square test with 4 degrees of freedom at significance 0.001: critical
    // value 18.467. The seeds are fixed, so the outcome is too.
    const AttentionBlock<S> block = UnitBlock<S>(Normalizer::kGumbel, 1.5);
    const Matrix<S> query = Row<S>({0}), keys = Row<S>({0, 0.5, 1, 1.5, -0.75});
    std::vector<double> p(5);
    for (int l = 0; l < 5; ++l) p[l] = std::exp(-1.5 * double(keys(0, l)) * double(keys(0, l)));
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    constexpr int kDraws = 20000;
    std::vector<int> counts(5, 0);
    for (int seed = 0; seed < kDraws; ++seed) {
      Eigen::Index key;
      AttentionWeights(block, query, keys, {.seed = static_cast<uint64_t>(seed), .layer = 4})
          .col(0)
          .maxCoeff(&key);
      ++counts[key];
    }
    double chi2 = 0;
    for (int l = 0; l < 5; ++l) {
      const double expected = kDraws * p[l] / total;
      chi2 += (counts[l] - expected) * (counts[l] - expected) / expected;
    }
    EXPECT_LT(chi2, 18.467);
  });
}

TYPED_TEST(AttentionTest, GumbelAtInfiniteBetaIsArgmaxWithLowestIndex) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    const AttentionBlock<S> block =
        UnitBlock<S>(Normalizer::kGumbel, std::numeric_limits<S>::infinity());
    const Matrix<S> query = Row<S>({1}), keys = Row<S>({0, 2, 5, 3.5});  // 0 and 2 tie
    for (uint64_t seed : {0, 1, 2}) {
      EXPECT_EQ(AttentionWeights(block, query, keys, {.seed = seed}).col(0),
                (Vector<S>(4) << 1, 0, 0, 0).finished());
    }
    std::vector<bool> support;
    EXPECT_EQ(Attend(block, query, keys, &support)(0, 0), 0);
    EXPECT_EQ(support, std::vector<bool>{true});  // no key at distance 0, yet support
  });
}

TYPED_TEST(AttentionTest, HardmaxAveragesTiesOrTakesTheLowestIndex) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    AttentionBlock<S> block =
        UnitBlock<S>(Normalizer::kHardmax, std::numeric_limits<S>::infinity());
    const Matrix<S> query = Row<S>({1}), keys = Row<S>({0, 2, 5, 3.5});  // 0 and 2 tie
    Matrix<S> w = AttentionWeights(block, query, keys);
    EXPECT_EQ(w.col(0), (Vector<S>(4) << 0.5, 0.5, 0, 0).finished());
    block.ties = Ties::kLowestIndex;
    w = AttentionWeights(block, query, keys);
    EXPECT_EQ(w.col(0), (Vector<S>(4) << 1, 0, 0, 0).finished());
    EXPECT_EQ(Attend(block, query, keys)(0, 0), 0);
  });
}

TYPED_TEST(AttentionTest, SoftmaxTendsToHardmaxAsBetaGrows) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(3);
    AttentionBlock<S> block = RandomBlock<S>(4, rng);
    const Matrix<S> queries = UniformMatrix<S>(4, 30, rng);
    const Matrix<S> keys = UniformMatrix<S>(4, 20, rng);
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
  });
}

TYPED_TEST(AttentionTest, WeightsAreADistributionPerQuery) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(5);
    for (Normalizer n : {Normalizer::kSoftmax, Normalizer::kHardmax}) {
      AttentionBlock<S> block = RandomBlock<S>(3, rng);
      block.normalizer = n;
      block.beta = 2;
      const Matrix<S> w =
          AttentionWeights(block, UniformMatrix<S>(3, 25, rng), UniformMatrix<S>(3, 31, rng));
      EXPECT_GE(w.minCoeff(), 0);
      for (Eigen::Index q = 0; q < w.cols(); ++q) {
        EXPECT_NEAR(w.col(q).sum(), 1, 1e-6);
      }
    }
  });
}

TYPED_TEST(AttentionTest, SupportMeansAMatchingKey) {
  AtEachSimdLevel([&] {
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
  });
}

TYPED_TEST(AttentionTest, ManyQueryBlocksGiveTheSameAnswer) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(9);
    AttentionBlock<S> block = RandomBlock<S>(2, rng);
    block.normalizer = Normalizer::kSoftmax;
    block.beta = 3;
    // 2100 x 2100 scores exceed one block of 4M entries.
    const Matrix<S> tokens = UniformMatrix<S>(2, 2100, rng);
    const Matrix<S> all = Attend(block, tokens, tokens);
    const Matrix<S> tail = Attend(block, Matrix<S>(tokens.rightCols(7)), tokens);
    EXPECT_LE((all.rightCols(7) - tail).norm(), 1e-5 * tail.norm());
  });
}

TYPED_TEST(AttentionTest, ZeroBlockAddsNothing) {
  AtEachSimdLevel([&] {
    using S = TypeParam;
    Rng rng(1);
    const Matrix<S> z = UniformMatrix<S>(5, 8, rng);
    EXPECT_EQ(Attend(AttentionBlock<S>::Zero(5), z, z), Matrix<S>::Zero(5, 8));
  });
}

TEST(AttentionBlock, ValidationNamesTheProblem) {
  AtEachSimdLevel([&] {
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
    block.normalizer = Normalizer::kSparsemax;
    block.beta = INFINITY;
    EXPECT_EQ(ValidateBlock(block, 3).message(),
              "sparsemax needs a finite inverse temperature, not inf");
    block.normalizer = Normalizer::kNormmax;
    EXPECT_EQ(ValidateBlock(block, 3).message(),
              "normmax needs a finite inverse temperature, not inf");
    block.beta = 0;
    EXPECT_EQ(ValidateBlock(block, 3).message(), "inverse temperature 0 must be positive");
    block.beta = 2;
    EXPECT_TRUE(ValidateBlock(block, 3).ok());
    block.tau = -1;
    EXPECT_EQ(ValidateBlock(block, 3).message(),
              "normmax regularisation tau = -1 must be finite and >= 0");
    block.tau = INFINITY;
    EXPECT_EQ(ValidateBlock(block, 3).message(),
              "normmax regularisation tau = inf must be finite and >= 0");
    block.tau = 0.5;
    block.normalizer = Normalizer::kGumbel;
    block.beta = INFINITY;
    EXPECT_TRUE(ValidateBlock(block, 3).ok());
    block.beta = 0;
    EXPECT_EQ(ValidateBlock(block, 3).message(), "inverse temperature 0 must be positive");
  });
}

TEST(AttentionNames, ParseWhatTheyPrint) {
  AtEachSimdLevel([&] {
    for (Normalizer n : {Normalizer::kSoftmax, Normalizer::kHardmax, Normalizer::kLinear,
                         Normalizer::kSparsemax, Normalizer::kNormmax, Normalizer::kGumbel}) {
      EXPECT_EQ(*ParseNormalizer(NormalizerName(n)), n);
    }
    EXPECT_EQ(NormalizerName(Normalizer::kGumbel), "gumbel");
    EXPECT_EQ(*ParseScoreKind("dot"), ScoreKind::kDotProduct);
    EXPECT_EQ(
        ParseNormalizer("argmax").status().message(),
        "unknown normalizer 'argmax', expected softmax, hardmax, linear, sparsemax, normmax or "
        "gumbel");
  });
}

}  // namespace
}  // namespace kmt
