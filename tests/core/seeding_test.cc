#include "core/seeding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "core/init.h"
#include "core/random.h"
#include "core/sparse.h"
#include "tests/support/gaussian_clusters.h"
#include "tests/support/random_weights.h"
#include "tests/support/simd_levels.h"
#include "tests/support/sparse_documents.h"

namespace kmt {
namespace {

// The points' columns split into shards of these sizes, each a SeedingShard,
// and a round that runs each request on its shard.
// `sparse`: each shard holds its points as sparse rows; `weights` (n
// values, or null) are split with the points.
template <typename Scalar>
struct LocalShards {
  std::vector<Matrix<Scalar>> parts;
  std::vector<CsrMatrix<Scalar>> sparse_parts;
  std::vector<Vector<Scalar>> weight_parts;
  std::vector<std::unique_ptr<SeedingShard<Scalar>>> shards;
  std::vector<int64_t> sizes;

  LocalShards(const Matrix<Scalar>& points, const std::vector<int64_t>& split, bool sparse = false,
              const Vector<Scalar>* weights = nullptr)
      : sizes(split) {
    parts.reserve(split.size());
    int64_t first = 0;
    for (int64_t size : split) {
      parts.push_back(points.middleCols(first, size));
      if (weights != nullptr) weight_parts.push_back(weights->segment(first, size));
      first += size;
    }
    for (const Matrix<Scalar>& part : parts) {
      sparse_parts.push_back(CsrMatrix<Scalar>::FromDense(part));
    }
    for (size_t s = 0; s < parts.size(); ++s) {
      const Vector<Scalar>* w = weights != nullptr ? &weight_parts[s] : nullptr;
      shards.push_back(sparse ? std::make_unique<SeedingShard<Scalar>>(&sparse_parts[s], w)
                              : std::make_unique<SeedingShard<Scalar>>(&parts[s], w));
    }
  }

  SeedRound<Scalar> Round() {
    return [this](const std::vector<SeedRequest<Scalar>>& requests)
               -> absl::StatusOr<std::vector<SeedAnswer<Scalar>>> {
      std::vector<SeedAnswer<Scalar>> answers;
      for (size_t s = 0; s < requests.size(); ++s) {
        absl::StatusOr<SeedAnswer<Scalar>> a = shards[s]->Step(requests[s]);
        if (!a.ok()) return a.status();
        answers.push_back(*std::move(a));
      }
      return answers;
    };
  }
};

template <typename Scalar>
void ShardsChooseTheCentersOfTheWholeMatrix() {
  const Matrix<Scalar> points = GaussianClusters<Scalar>({.n = 3000, .d = 4, .k = 12}, 5).points;
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    // Uneven shards, one of them empty; fresh shards for each run.
    LocalShards<Scalar> greedy(points, {1000, 0, 1, 1999});
    EXPECT_EQ(*ShardedKMeansPlusPlus<Scalar>(greedy.sizes, 4, 12, seed, GreedySeedingCandidates(12),
                                             greedy.Round()),
              *InitialCenters(points, 12, InitMethod::kKMeansPlusPlus, seed));
    LocalShards<Scalar> plain(points, {1000, 0, 1, 1999});
    EXPECT_EQ(*ShardedKMeansPlusPlus<Scalar>(plain.sizes, 4, 12, seed, 1, plain.Round()),
              *InitialCenters(points, 12, InitMethod::kPlainKMeansPlusPlus, seed));
  }
}

TEST(Seeding, ShardsChooseTheCentersOfTheWholeMatrixFloat) {
  AtEachSimdLevel([&] { ShardsChooseTheCentersOfTheWholeMatrix<float>(); });
}
TEST(Seeding, ShardsChooseTheCentersOfTheWholeMatrixDouble) {
  AtEachSimdLevel([&] { ShardsChooseTheCentersOfTheWholeMatrix<double>(); });
}

TEST(Seeding, CentersTakenAtOnceGiveTheSameDistancesAsOneByOne) {
  AtEachSimdLevel([&] {
    const Matrix<float> points = GaussianClusters<float>({.n = 500, .d = 3, .k = 4}, 2).points;
    const Matrix<float> centers = points.leftCols(4);
    SeedingShard<float> one_by_one(&points), at_once(&points);
    for (int c = 0; c < 4; ++c) ASSERT_TRUE(one_by_one.Step({.add = centers.col(c)}).ok());
    ASSERT_TRUE(at_once.Step({.add = centers}).ok());
    const SeedRequest<float> ask{.targets = {0.0, 10.0, 100.0}, .candidates = points.col(7)};
    const SeedAnswer<float> a = *one_by_one.Step(ask), b = *at_once.Step(ask);
    EXPECT_EQ(a.potential, b.potential);
    EXPECT_EQ(a.points, b.points);
    EXPECT_EQ(a.candidate_potentials, b.candidate_potentials);
  });
}

TEST(Seeding, DrawsFollowTheRunningSumOfDistances) {
  AtEachSimdLevel([&] {
    Matrix<double> points(1, 4);
    points << 0, 1, 3, 6;
    SeedingShard<double> shard(&points);
    Matrix<double> origin = Matrix<double>::Zero(1, 1);
    // Distances to 0: 0, 1, 9, 36; running sum 0, 1, 10, 46: the points hold
    // [0, 0), [0, 1), [1, 10) and [10, 46), so the point at distance 0 is
    // never drawn.
    const SeedAnswer<double> a = *shard.Step(
        {.add = origin, .targets = {0.0, 0.5, 1.0, 9.9, 45.0, 1e9}, .candidates = points});
    EXPECT_EQ(a.potential, 46);
    Matrix<double> drawn(1, 6);
    drawn << 1, 1, 3, 3, 6, 6;  // past the end: the last point
    EXPECT_EQ(a.points, drawn);
    EXPECT_EQ(a.candidate_potentials, (std::vector<double>{46, 29, 10, 10}));
  });
}

TEST(Seeding, PastTheEndDrawsTheLastPointAtAPositiveDistance) {
  AtEachSimdLevel([&] {
    Matrix<double> points(1, 4);
    points << 5, 0, 3, 0;
    SeedingShard<double> shard(&points);
    // Distances to 0: 25, 0, 9, 0; a target past the sum (round-off between
    // the coordinator's sum and the shard's running sum) takes point 2.
    const SeedAnswer<double> a =
        *shard.Step({.add = Matrix<double>::Zero(1, 1), .targets = {34.0, 1e9}});
    Matrix<double> drawn(1, 2);
    drawn << 3, 3;
    EXPECT_EQ(a.points, drawn);
  });
}

TEST(Seeding, BadRequestsSayWhatIsWrong) {
  AtEachSimdLevel([&] {
    const Matrix<float> points = Matrix<float>::Ones(2, 5);
    SeedingShard<float> shard(&points);
    EXPECT_EQ(shard.Step({.targets = {1.0}}).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(shard.Step({.indices = {5}}).status().message(),
              "point index 5 is outside the shard's 5 points");
    EXPECT_EQ(shard.Step({.add = Matrix<float>::Ones(3, 1)}).status().message(),
              "centers have d = 3, points have d = 2");
    Matrix<float> nan = Matrix<float>::Ones(2, 1);
    nan(1, 0) = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(shard.Step({.candidates = nan}).status().code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(shard.Step({.add = points.col(0)}).ok());
    EXPECT_EQ(shard.Step({.targets = {-1.0}}).status().message(),
              "draw target -1 is not in [0, inf)");
    EXPECT_EQ(ShardedKMeansPlusPlus<float>({2, 1}, 2, 4, 1, 1, {}).status().message(),
              "k = 4 needs 1 <= k <= n = 3");
    EXPECT_EQ(ShardedKMeansPlusPlus<float>({2, 1}, 2, 2, 1, 0, {}).status().message(),
              "0 k-means++ candidates per center, expected at least 1");
  });
}

TEST(KMeansParallel, AGroupOfCentersTakenAtOnceGivesTheDistancesToTheNearest) {
  AtEachSimdLevel([&] {
    Matrix<double> points(1, 5);
    points << 0, 1, 3, 6, 7;
    Matrix<double> centers(1, 2);
    centers << 0, 6;
    SeedingShard<double> shard(&points);
    EXPECT_FALSE(shard.seeded());
    // Nearest squared distances 0, 1, 9, 0, 1.
    EXPECT_EQ(*shard.AddCenters(centers), 11);
    EXPECT_TRUE(shard.seeded());
    // Taking no center answers the potential as it is.
    EXPECT_EQ(*shard.AddCenters(Matrix<double>(1, 0)), 11);
    // The same as the seed step's one center at a time.
    SeedingShard<double> one_by_one(&points);
    EXPECT_EQ(one_by_one.Step({.add = centers})->potential, 11);
  });
}

TEST(KMeansParallel, AWeightedShardsFirstGroupReplacesTheWeights) {
  AtEachSimdLevel([&] {
    Matrix<double> points(1, 4);
    points << 0, 1, 3, 6;
    const Vector<double> weights = (Vector<double>(4) << 1, 2, 0, 0.5).finished();
    SeedingShard<double> shard(&points, &weights);
    Matrix<double> centers(1, 2);
    centers << 0, 6;
    // w * min d^2: 0, 2 * 1, 0 * 9, 0.5 * 0.
    EXPECT_EQ(*shard.AddCenters(centers), 2);
  });
}

TEST(KMeansParallel, EachPointIsTakenWithItsShareOfThePotential) {
  AtEachSimdLevel([&] {
    Matrix<double> points(1, 4);
    points << 0, 1, 3, 6;
    SeedingShard<double> shard(&points);
    // Distances 0, 1, 9, 36 (potential 46); with oversampling 2 the points are
    // taken with probability 0, 2/46, 18/46 and 1.
    ASSERT_EQ(*shard.AddCenters(Matrix<double>::Zero(1, 1)), 46);
    constexpr int kSeeds = 20000;
    std::vector<int> taken(4, 0);
    for (uint64_t seed = 0; seed < kSeeds; ++seed) {
      const std::vector<int64_t> sample = *shard.Oversample(2, 46, seed, 1, 0);
      for (int64_t i : sample) ++taken[i];
    }
    EXPECT_EQ(taken[0], 0);
    EXPECT_EQ(taken[3], kSeeds);
    // Within four standard deviations of the binomial counts.
    for (const auto& [i, p] : std::vector<std::pair<int, double>>{{1, 2.0 / 46}, {2, 18.0 / 46}}) {
      SCOPED_TRACE(i);
      EXPECT_NEAR(taken[i], kSeeds * p, 4 * std::sqrt(kSeeds * p * (1 - p)));
    }
  });
}

TEST(KMeansParallel, TheSampleDependsOnTheSeedTheRoundAndThePointsIndexInTheDataset) {
  AtEachSimdLevel([&] {
    const Matrix<float> points = GaussianClusters<float>({.n = 2000, .d = 4, .k = 6}, 3).points;
    const Matrix<float> centers = points.leftCols(3);
    SeedingShard<float> whole(&points);
    const double potential = *whole.AddCenters(centers);
    const std::vector<int64_t> sample = *whole.Oversample(12, potential, 7, 1, 0);
    EXPECT_GT(sample.size(), 3u);
    EXPECT_EQ(*whole.Oversample(12, potential, 7, 1, 0), sample);
    EXPECT_NE(*whole.Oversample(12, potential, 7, 2, 0), sample);
    EXPECT_NE(*whole.Oversample(12, potential, 8, 1, 0), sample);
    // Two shards told where they start in the dataset take the same points.
    const Matrix<float> head = points.leftCols(700), tail = points.rightCols(1300);
    SeedingShard<float> first(&head), second(&tail);
    EXPECT_NEAR(*first.AddCenters(centers) + *second.AddCenters(centers), potential,
                1e-5 * potential);
    std::vector<int64_t> parts = *first.Oversample(12, potential, 7, 1, 0);
    const std::vector<int64_t> rest = *second.Oversample(12, potential, 7, 1, 700);
    for (int64_t i : rest) parts.push_back(700 + i);
    EXPECT_EQ(parts, sample);
  });
}

TEST(KMeansParallel, CopiesOfCentersAndPointsOfWeightZeroAreNeverTaken) {
  AtEachSimdLevel([&] {
    Matrix<float> points(2, 6);
    points << 0, 0, 1, 2, 3, 4,  //
        0, 0, 1, 2, 3, 4;
    const Vector<float> weights = (Vector<float>(6) << 1, 1, 1, 0, 1, 1).finished();
    SeedingShard<float> shard(&points, &weights);
    const double potential = *shard.AddCenters(points.col(0));
    // Oversampling so large that every point at a positive distance is taken.
    EXPECT_EQ(*shard.Oversample(1e9, potential, 1, 1, 0), (std::vector<int64_t>{2, 4, 5}));
    EXPECT_TRUE(shard.Oversample(1e9, 0, 1, 1, 0)->empty());
  });
}

TEST(KMeansParallel, BadSamplingSaysWhatIsWrong) {
  AtEachSimdLevel([&] {
    const Matrix<float> points = Matrix<float>::Ones(2, 5);
    SeedingShard<float> shard(&points);
    EXPECT_EQ(shard.Oversample(2, 1, 1, 1, 0).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(shard.AddCenters(Matrix<float>::Ones(3, 1)).status().message(),
              "centers have d = 3, points have d = 2");
    EXPECT_FALSE(shard.seeded());
    ASSERT_TRUE(shard.AddCenters(points.col(0)).ok());
    EXPECT_EQ(shard.Oversample(0, 1, 1, 1, 0).status().message(),
              "oversampling 0 is not in (0, inf)");
    EXPECT_EQ(shard.Oversample(std::nan(""), 1, 1, 1, 0).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(shard.Oversample(2, -1, 1, 1, 0).status().message(),
              "potential -1 is not in [0, inf)");
    EXPECT_EQ(shard.Oversample(2, std::numeric_limits<double>::infinity(), 1, 1, 0).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(shard.Oversample(2, 1, 1, -1, 0).status().message(),
              "round -1 and first point 0: neither may be negative");
  });
}

TEST(KMeansParallel, APointsDistanceAndNearestCenterDoNotDependOnItsBlockOrThread) {
  AtEachSimdLevel([&] {
    // Several of the scan's blocks, taken in parallel: split anywhere, the
    // shards keep the whole's distances and nearest centers to the bit.
    const Matrix<float> points = GaussianClusters<float>({.n = 12000, .d = 4, .k = 30}, 5).points;
    const Matrix<float> first = points.leftCols(20), then = points.middleCols(5000, 25);
    const Matrix<float> head = points.leftCols(4321), tail = points.rightCols(12000 - 4321);
    SeedingShard<float> whole(&points), a(&head), b(&tail);
    for (const Matrix<float>* group : {&first, &then}) {
      ASSERT_TRUE(whole.AddCenters(*group).ok());
      ASSERT_TRUE(a.AddCenters(*group).ok());
      ASSERT_TRUE(b.AddCenters(*group).ok());
    }
    std::vector<double> parts = a.TakenCenterWeights();
    const std::vector<double> rest = b.TakenCenterWeights();
    for (size_t c = 0; c < parts.size(); ++c) parts[c] += rest[c];
    EXPECT_EQ(parts, whole.TakenCenterWeights());
    // The same potential to sample by: the same points taken.
    std::vector<int64_t> sample = *a.Oversample(500, 1e3, 9, 1, 0);
    const std::vector<int64_t> rest_sample = *b.Oversample(500, 1e3, 9, 1, 4321);
    for (int64_t i : rest_sample) sample.push_back(4321 + i);
    EXPECT_EQ(sample, *whole.Oversample(500, 1e3, 9, 1, 0));
    // A copy of a center lies at 0 and is never taken.
    for (int64_t i : sample) EXPECT_NE(i, 5000);
  });
}

TEST(KMeansParallel, TheShardWeighsTheCentersItTookInByTheirNearestPoints) {
  AtEachSimdLevel([&] {
    Matrix<double> points(1, 5);
    points << 0, 1, 2, 3, 10;
    Matrix<double> first(1, 1), then(1, 2);
    first << 0;
    then << 2, 10;
    const Vector<double> weights = (Vector<double>(5) << 0.5, 2, 0, 1, 4).finished();
    SeedingShard<double> shard(&points), weighted(&points, &weights);
    for (SeedingShard<double>* s : {&shard, &weighted}) {
      ASSERT_TRUE(s->AddCenters(first).ok());
      ASSERT_TRUE(s->AddCenters(then).ok());
    }
    // Point 1 is as near to 0 as to 2: it stays with 0, taken first.
    EXPECT_EQ(shard.TakenCenterWeights(), (std::vector<double>{2, 2, 1}));
    EXPECT_EQ(weighted.TakenCenterWeights(), (std::vector<double>{2.5, 1, 4}));
  });
}

TEST(KMeansParallel, CandidatesWeighTheirNearestPointsTiesToTheLowestIndex) {
  AtEachSimdLevel([&] {
    Matrix<double> points(1, 5);
    points << 0, 1, 2, 3, 10;
    Matrix<double> candidates(1, 3);
    candidates << 0, 2, 10;
    // Point 1 is as near to 0 as to 2: it goes to candidate 0.
    EXPECT_EQ(NearestCandidateWeights<double>(points, nullptr, candidates),
              (std::vector<double>{2, 2, 1}));
    const Vector<double> weights = (Vector<double>(5) << 0.5, 2, 0, 1, 4).finished();
    EXPECT_EQ(NearestCandidateWeights(points, &weights, candidates),
              (std::vector<double>{2.5, 1, 4}));
  });
}

// Points for the sparse shards: well-separated clusters with about half of
// the coordinates 0 (each point's own), and TF-IDF documents.
template <typename Scalar>
Matrix<Scalar> HalfZeroClusters(uint64_t seed) {
  Matrix<Scalar> points = GaussianClusters<Scalar>({.n = 2000, .d = 16, .k = 10}, seed).points;
  Rng rng(seed + 100);
  for (Eigen::Index i = 0; i < points.size(); ++i) {
    if (rng.Below(2) == 0) points.data()[i] = 0;
  }
  return points;
}

template <typename Scalar>
std::vector<Matrix<Scalar>> SparseSeedingProblems() {
  return {HalfZeroClusters<Scalar>(4),
          TfIdfDocuments<Scalar>({.n = 1500, .d = 3000, .terms = 30}, 8).ToDense()};
}

// The product form's bound on |sparse - dense| for the summed distances of
// `points` to their nearest center of `centers` (weighted): each form within
// SquaredDistanceRoundOff of the exact distance to any center, so the
// minima within it too.
template <typename Scalar>
double PotentialBound(const Matrix<Scalar>& points, const Matrix<Scalar>& centers,
                      const Vector<Scalar>* weights) {
  const Vector<Scalar> x_sq = SquaredNorms<Scalar>(points);
  const Scalar c_sq = SquaredNorms<Scalar>(centers).maxCoeff();
  double bound = 0;
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    const double w = weights != nullptr ? static_cast<double>((*weights)[i]) : 1.0;
    bound +=
        2 * w * static_cast<double>(SquaredDistanceRoundOff<Scalar>(points.rows(), x_sq[i], c_sq));
  }
  return bound;
}

template <typename Scalar>
void SparseShardsDrawTheDenseShardsCenters() {
  for (const Matrix<Scalar>& points : SparseSeedingProblems<Scalar>()) {
    SCOPED_TRACE(points.rows());
    const int d = static_cast<int>(points.rows()), n = static_cast<int>(points.cols()), k = 12;
    const std::vector<int64_t> split = {n / 3, 0, 1, n - n / 3 - 1};
    Rng rng(3);
    const Vector<Scalar> weights = UniformMatrix<Scalar>(n, 1, rng, 0.25, 4);
    for (uint64_t seed : {2}) {
      SCOPED_TRACE(seed);
      for (const int trials : {GreedySeedingCandidates(k), 1}) {
        SCOPED_TRACE(trials);
        LocalShards<Scalar> dense(points, split), sparse(points, split, true);
        const Matrix<Scalar> want =
            *ShardedKMeansPlusPlus<Scalar>(dense.sizes, d, k, seed, trials, dense.Round());
        EXPECT_EQ(*ShardedKMeansPlusPlus<Scalar>(sparse.sizes, d, k, seed, trials, sparse.Round()),
                  want);
        LocalShards<Scalar> dense_weighted(points, split, false, &weights),
            sparse_weighted(points, split, true, &weights);
        EXPECT_EQ(*ShardedKMeansPlusPlus<Scalar>(sparse_weighted.sizes, d, k, seed, trials,
                                                 sparse_weighted.Round(), {}, true),
                  *ShardedKMeansPlusPlus<Scalar>(dense_weighted.sizes, d, k, seed, trials,
                                                 dense_weighted.Round(), {}, true));
      }
    }
  }
}

TEST(SparseSeeding, ShardsDrawTheDenseShardsCentersFloat) {
  AtEachSimdLevel([&] { SparseShardsDrawTheDenseShardsCenters<float>(); });
}
TEST(SparseSeeding, ShardsDrawTheDenseShardsCentersDouble) {
  AtEachSimdLevel([&] { SparseShardsDrawTheDenseShardsCenters<double>(); });
}

TEST(SparseSeeding, AStepAnswersAsTheDenseShardWithinTheProductFormsRoundOff) {
  AtEachSimdLevel([&] {
    const Matrix<float> points = HalfZeroClusters<float>(6);
    const CsrMatrix<float> rows = CsrMatrix<float>::FromDense(points);
    SeedingShard<float> dense(&points), sparse(&rows);
    // A center that is one of the points: that point lies at 0 in both.
    const Matrix<float> add = points.col(11);
    const Matrix<float> candidates = points(Eigen::all, std::vector<int>{3, 500, 1999});
    const SeedRequest<float> request{
        .add = add, .indices = {0, 1999}, .targets = {0.0, 5.0, 1e9}, .candidates = candidates};
    const SeedAnswer<float> a = *dense.Step(request), b = *sparse.Step(request);
    const double bound = PotentialBound<float>(points, add, nullptr);
    EXPECT_GT(a.potential, 1e3 * bound);
    EXPECT_NEAR(b.potential, a.potential, bound);
    EXPECT_EQ(b.points, a.points);
    ASSERT_EQ(b.candidate_potentials.size(), 3u);
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(b.candidate_potentials[c], a.candidate_potentials[c],
                  PotentialBound<float>(points, candidates.col(c), nullptr) + bound)
          << c;
    }
    // The copy of the center is never drawn: the whole potential's draws
    // land where the dense shard's do.
    const SeedAnswer<float> drawn = *sparse.Step({.targets = {0.0}});
    EXPECT_NE(drawn.points.col(0), points.col(11));
    EXPECT_EQ(drawn.points, dense.Step({.targets = {0.0}})->points);
    // The sparse shard's checks are the dense one's.
    EXPECT_EQ(sparse.Step({.indices = {2000}}).status().message(),
              "point index 2000 is outside the shard's 2000 points");
    EXPECT_EQ(sparse.AddCenters(Matrix<float>::Ones(3, 1)).status().message(),
              "centers have d = 3, points have d = 16");
  });
}

template <typename Scalar>
void SparseKMeansParallelRoundsAsDense() {
  for (const Matrix<Scalar>& points : SparseSeedingProblems<Scalar>()) {
    SCOPED_TRACE(points.rows());
    const Eigen::Index n = points.cols();
    const CsrMatrix<Scalar> rows = CsrMatrix<Scalar>::FromDense(points);
    Rng rng(5);
    const Vector<Scalar> weights = UniformMatrix<Scalar>(n, 1, rng, 0.25, 4);
    for (const Vector<Scalar>* w : std::vector<const Vector<Scalar>*>{nullptr, &weights}) {
      SCOPED_TRACE(w == nullptr ? "unweighted" : "weighted");
      SeedingShard<Scalar> dense(&points, w), sparse(&rows, w);
      // Rounds of k-means‖ from one point: each round's sample is the next
      // round's group of centers.
      Matrix<Scalar> group = points.col(7), taken(points.rows(), 0);
      for (int64_t round = 1; round <= 3; ++round) {
        SCOPED_TRACE(round);
        const double a = *dense.AddCenters(group), b = *sparse.AddCenters(group);
        taken.conservativeResize(Eigen::NoChange, taken.cols() + group.cols());
        taken.rightCols(group.cols()) = group;
        const double bound = PotentialBound<Scalar>(points, taken, w);
        EXPECT_NEAR(b, a, bound);
        EXPECT_EQ(sparse.TakenCenterWeights(), dense.TakenCenterWeights());
        // Both sample by the dense shard's potential, as a job sums them.
        const std::vector<int64_t> sample = *dense.Oversample(8, a, 17, round, 0);
        EXPECT_EQ(*sparse.Oversample(8, a, 17, round, 0), sample);
        ASSERT_FALSE(sample.empty());
        group = points(Eigen::all, sample);
      }
      // Copies of the centers taken lie at 0: never taken, however large
      // the oversampling.
      const std::vector<int64_t> all = *sparse.Oversample(1e12, 1, 1, 9, 0);
      EXPECT_EQ(all, *dense.Oversample(1e12, 1, 1, 9, 0));
      EXPECT_EQ(std::find(all.begin(), all.end(), 7), all.end());
    }
  }
}

TEST(SparseKMeansParallel, RoundsSampleTheDenseShardsPointsFloat) {
  AtEachSimdLevel([&] { SparseKMeansParallelRoundsAsDense<float>(); });
}
TEST(SparseKMeansParallel, RoundsSampleTheDenseShardsPointsDouble) {
  AtEachSimdLevel([&] { SparseKMeansParallelRoundsAsDense<double>(); });
}

TEST(SparseKMeansParallel, CandidatesWeighTheirNearestPointsAsDense) {
  AtEachSimdLevel([&] {
    for (const Matrix<double>& points : SparseSeedingProblems<double>()) {
      SCOPED_TRACE(points.rows());
      const CsrMatrix<double> rows = CsrMatrix<double>::FromDense(points);
      Rng rng(6);
      const Vector<double> weights = UniformMatrix<double>(points.cols(), 1, rng, 0.25, 4);
      // A duplicate candidate (never the higher index) and points as
      // candidates.
      const Matrix<double> candidates = points(Eigen::all, std::vector<int>{5, 9, 5, 400, 1234});
      EXPECT_EQ(NearestCandidateWeights<double>(rows, nullptr, candidates),
                NearestCandidateWeights<double>(points, nullptr, candidates));
      const std::vector<double> weighted = NearestCandidateWeights(rows, &weights, candidates);
      EXPECT_EQ(weighted, NearestCandidateWeights(points, &weights, candidates));
      EXPECT_EQ(weighted[2], 0);
    }
  });
}

}  // namespace
}  // namespace kmt
