// The exact constructions against reference Lloyd's, layer by layer.
#include "core/constructions.h"

#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/init.h"
#include "core/random.h"
#include "core/transformer.h"
#include "reference/lloyd.h"
#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

struct Case {
  int n, d, k;
  Embedding embedding;
  Theta3Form theta3;
  bool grid;  // integer coordinates: duplicates, exact ties, empty clusters
  uint64_t seed;
  ScoreKind score = ScoreKind::kEuclidean;

  LloydOptions Options() const {
    return {.embedding = embedding, .theta3 = theta3, .score = score};
  }
  std::string Describe() const {
    return absl::StrCat("n=", n, " d=", d, " k=", k, " ", LloydModelName(Options()),
                        grid ? " grid" : "", " seed=", seed);
  }
};

// The same problems for the dot-product circuit (one-hot, linear theta3).
std::vector<Case> DotProductCases(std::vector<Case> cases) {
  for (Case& c : cases) {
    c.embedding = Embedding::kOneHot;
    c.theta3 = Theta3Form::kLinear;
    c.score = ScoreKind::kDotProduct;
  }
  return cases;
}

std::vector<Case> RandomCases(int count) {
  Rng rng(2026);
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) {
    Case c;
    c.k = 1 + static_cast<int>(rng.Below(64));
    c.d = 1 + static_cast<int>(rng.Below(64));
    // n log-uniform on [k, 5000].
    c.n = static_cast<int>(std::round(c.k * std::pow(5000.0 / c.k, rng.Uniform())));
    c.n = std::clamp(c.n, c.k, 5000);
    c.embedding = (i % 2 == 0) ? Embedding::kOneHot : Embedding::kBinary;
    c.theta3 = (i % 4 == 0) ? Theta3Form::kLinear : Theta3Form::kHardmax;
    c.grid = i % 5 == 4;
    c.seed = 1000 + i;
    cases.push_back(c);
  }
  // The extremes of the ranges, always covered.
  cases.push_back({5000, 64, 64, Embedding::kOneHot, Theta3Form::kLinear, false, 1});
  cases.push_back({5000, 64, 64, Embedding::kBinary, Theta3Form::kHardmax, false, 2});
  cases.push_back({1, 1, 1, Embedding::kOneHot, Theta3Form::kHardmax, false, 3});
  cases.push_back({64, 1, 64, Embedding::kBinary, Theta3Form::kHardmax, true, 4});
  return cases;
}

Matrix<double> CaseData(const Case& c) {
  if (!c.grid) {
    return GaussianClusters<double>({.n = c.n, .d = c.d, .k = std::max(1, c.k / 2)}, c.seed).points;
  }
  Rng rng(c.seed);
  Matrix<double> points(c.d, c.n);
  for (Eigen::Index i = 0; i < points.size(); ++i) {
    points.data()[i] = static_cast<double>(rng.Below(4));
  }
  return points;
}

// One circuit of each kind: both embeddings, Theorem 2.2's dot products.
std::vector<LloydOptions> ExactCircuits() {
  return {{.embedding = Embedding::kOneHot},
          {.embedding = Embedding::kBinary},
          {.embedding = Embedding::kOneHot,
           .theta3 = Theta3Form::kLinear,
           .score = ScoreKind::kDotProduct}};
}

double RelativeError(const Matrix<double>& got, const Matrix<double>& want) {
  return (got - want).norm() / std::max(want.norm(), 1e-300);
}

// Whether every point the two labelings put apart lies at a tie of the
// centers it was assigned with: its squared distances to both centers agree
// to round-off of the squared norms involved. The dot-product circuit orders
// centers by <x, c> - ||c||^2 / 2, which rounds differently from the direct
// distances reference Lloyd's compares, so at an exact tie (integer grids)
// the two can pick different maximisers.
bool DifferOnlyAtTies(const Matrix<double>& points, const Matrix<double>& centers,
                      const Labels& got, const Labels& want) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    const auto x = points.col(i);
    const double a = (x - centers.col(got[i])).squaredNorm();
    const double b = (x - centers.col(want[i])).squaredNorm();
    const double scale =
        x.squaredNorm() + centers.col(got[i]).squaredNorm() + centers.col(want[i]).squaredNorm();
    if (std::abs(a - b) > 1e-12 * scale) return false;
  }
  return true;
}

// What a comparison with reference Lloyd's saw.
struct Tally {
  int64_t empty_events = 0;     // the reference's empty clusters, fast path
  int tie_divergences = 0;      // dense runs that parted from it at a tie
  int64_t layers_compared = 0;  // dense layers found equal
};

// Runs the construction on both paths and compares every layer with
// reference Lloyd's: assignments and registers exactly, centers and the
// objective to 1e-12 relative, empty-cluster counts exactly. The
// dot-product circuit's dense run may part from the reference only at a tie
// (DifferOnlyAtTies); the comparison of that run stops there and counts it.
void ExpectMatchesLloyd(const Case& c, bool dense, int layers, Tally* tally) {
  SCOPED_TRACE(c.Describe());
  const Matrix<double> points = CaseData(c);
  const Matrix<double> init = *InitialCenters(points, c.k, InitMethod::kRandomSubset, c.seed);
  const std::vector<LloydIteration<double>> lloyd = ReferenceLloyd(points, init, layers);
  absl::StatusOr<Model<double>> model = LloydConstruction<double>(c.d, c.k, c.Options());
  ASSERT_TRUE(model.ok()) << model.status();
  const Matrix<double> codes = CenterRegisters<double>(c.embedding, c.k);

  std::vector<Path> paths = {Path::kFast};
  if (dense) paths.push_back(Path::kDense);
  for (Path path : paths) {
    SCOPED_TRACE(path == Path::kFast ? "fast path" : "dense path");
    absl::StatusOr<RunResult<double>> run = RunTransformer(
        *model, points, init, {.layers = layers, .path = path, .record_trajectory = true});
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->path, path);
    ASSERT_EQ(run->trajectory.size(), static_cast<size_t>(layers));
    int64_t empty = 0;
    for (int t = 0; t < layers; ++t) {
      SCOPED_TRACE(absl::StrCat("layer ", t + 1));
      const LayerRecord<double>& got = run->trajectory[t];
      const LloydIteration<double>& want = lloyd[t];
      if (c.score == ScoreKind::kDotProduct && path == Path::kDense && got.labels != want.labels) {
        ASSERT_TRUE(DifferOnlyAtTies(points, t == 0 ? init : lloyd[t - 1].centers, got.labels,
                                     want.labels));
        ++tally->tie_divergences;
        break;
      }
      ASSERT_EQ(got.labels, want.labels);
      for (int i = 0; i < c.n; ++i) {
        ASSERT_EQ(got.registers.col(i), codes.col(want.labels[i])) << "point " << i;
      }
      ASSERT_LE(RelativeError(got.centers, want.centers), 1e-12);
      ASSERT_NEAR(got.objective, want.objective, 1e-12 * want.objective + 1e-300);
      ASSERT_EQ(got.empty_clusters, want.empty_clusters);
      empty += want.empty_clusters;
      if (path == Path::kDense) ++tally->layers_compared;
    }
    if (path == Path::kFast) {
      EXPECT_EQ(run->empty_cluster_events, empty);
      tally->empty_events += empty;
    }
    EXPECT_EQ(run->layers_run, layers);
  }
}

TEST(LloydConstruction, EqualsReferenceLloydAtEveryLayerOnRandomProblems) {
  const std::vector<Case> cases = RandomCases(200);
  ASSERT_GE(cases.size(), 200u);
  Tally tally;
  for (const Case& c : cases) {
    // The dense path is O(n^2) per layer; it runs on every problem up to
    // n = 2000 and on the two largest.
    ExpectMatchesLloyd(c, /*dense=*/c.n <= 2000 || c.n == 5000, 20, &tally);
    if (HasFatalFailure()) return;
  }
  const int64_t empty_events = tally.empty_events;
  EXPECT_EQ(tally.tie_divergences, 0);
  // The grid problems exercise the empty-cluster rule, not just the proof's
  // case without empty clusters.
  EXPECT_GT(empty_events, 0);
  std::printf("%zu problems, %lld empty-cluster events\n", cases.size(),
              static_cast<long long>(empty_events));
}

// Paper A's Theorem 2.2: the dot-product circuit on the same problems.
TEST(LloydConstruction, DotProductCircuitEqualsReferenceLloydAtEveryLayer) {
  const std::vector<Case> cases = DotProductCases(RandomCases(200));
  Tally tally;
  int off_grid_dense = 0;
  for (const Case& c : cases) {
    // The dense path up to n = 1500: every block of this circuit scores
    // through dot products, whose round-off bound sends more keys to the
    // direct re-decision than the Euclidean circuit's.
    const bool dense = c.n <= 1500;
    const int before = tally.tie_divergences;
    ExpectMatchesLloyd(c, dense, 20, &tally);
    if (HasFatalFailure()) return;
    // Off the integer grids there are no exact ties: every layer equal.
    if (!c.grid) {
      EXPECT_EQ(tally.tie_divergences, before) << c.Describe();
    }
    off_grid_dense += dense && !c.grid;
  }
  EXPECT_GT(tally.empty_events, 0);
  EXPECT_GT(off_grid_dense, 100);
  std::printf("%zu problems: %lld dense layers equal to Lloyd's, %d grid runs parted at a tie\n",
              cases.size(), static_cast<long long>(tally.layers_compared), tally.tie_divergences);
}

TEST(LloydConstruction, TiesGoToTheLowestIndex) {
  // Point 1 is equidistant from centers 0 and 1; 3 from 1 and 2.
  Matrix<double> points(1, 4);
  points << 0, 1, 2, 3;
  Matrix<double> init(1, 3);
  init << 0, 2, 4;
  for (const LloydOptions& options : ExactCircuits()) {
    SCOPED_TRACE(LloydModelName(options));
    const Model<double> model = *LloydConstruction<double>(1, 3, options);
    for (Path path : {Path::kFast, Path::kDense}) {
      const RunResult<double> run = *RunTransformer(
          model, points, init, {.layers = 1, .path = path, .record_trajectory = true});
      EXPECT_EQ(run.trajectory[0].labels, (Labels{0, 0, 1, 1}));
      EXPECT_EQ(ReferenceLloyd(points, init, 1)[0].labels, (Labels{0, 0, 1, 1}));
    }
  }
}

TEST(LloydConstruction, EmptyClusterKeepsPreviousCenterAndIsCounted) {
  Matrix<double> points(2, 4);
  points << 0, 1, 0, 1, 0, 0, 1, 1;
  Matrix<double> init(2, 3);
  init << 0.5, 9, 0.6, 0.5, 9, 0.5;  // center 1 is far away: nobody comes to it
  for (const LloydOptions& options : ExactCircuits()) {
    SCOPED_TRACE(LloydModelName(options));
    const Model<double> model = *LloydConstruction<double>(2, 3, options);
    for (Path path : {Path::kFast, Path::kDense}) {
      const RunResult<double> run =
          *RunTransformer(model, points, init, {.layers = 3, .path = path});
      EXPECT_EQ(run.centers(0, 1), 9);
      EXPECT_EQ(run.centers(1, 1), 9);
      EXPECT_EQ(run.empty_cluster_events, 3);
    }
  }
  const auto lloyd = ReferenceLloyd(points, init, 3);
  EXPECT_EQ(lloyd[2].centers.col(1), init.col(1));
  EXPECT_EQ(lloyd[0].empty_clusters, 1);
}

TEST(LloydConstruction, DuplicatePointsAndDuplicateCenters) {
  // Every point is the same: the second of two equal centers never wins a
  // tie, so it is empty at every layer and keeps its place.
  const Matrix<double> points = Matrix<double>::Constant(3, 50, 0.25);
  const Matrix<double> init = Matrix<double>::Constant(3, 2, 0.25);
  for (const LloydOptions& options : ExactCircuits()) {
    const Model<double> model = *LloydConstruction<double>(3, 2, options);
    for (Path path : {Path::kFast, Path::kDense}) {
      const RunResult<double> run =
          *RunTransformer(model, points, init, {.layers = 4, .path = path});
      EXPECT_EQ(run.labels, Labels(50, 0));
      EXPECT_EQ(run.centers, init);
      EXPECT_EQ(run.empty_cluster_events, 4);
      EXPECT_EQ(run.objective, 0);
    }
  }
}

TEST(LloydConstruction, BinaryRegistersHoldTheBitsOfTheCluster) {
  const Matrix<float> codes = CenterRegisters<float>(Embedding::kBinary, 5);
  ASSERT_EQ(codes.rows(), 3);
  Matrix<float> want(3, 5);
  want << 0, 1, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1;
  EXPECT_EQ(codes, want);
  EXPECT_EQ(RegisterDim(Embedding::kBinary, 1), 0);
  EXPECT_EQ(RegisterDim(Embedding::kBinary, 64), 6);
  EXPECT_EQ(RegisterDim(Embedding::kBinary, 65), 7);
  EXPECT_EQ(RegisterDim(Embedding::kOneHot, 10), 10);
}

TEST(LloydConstruction, RejectsWhatCannotBeExact) {
  EXPECT_EQ(LloydConstruction<double>(2, 3, {.embedding = Embedding::kNone}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const auto binary_linear = LloydConstruction<double>(
      2, 3, {.embedding = Embedding::kBinary, .theta3 = Theta3Form::kLinear});
  EXPECT_EQ(binary_linear.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(binary_linear.status().message().find("one-hot"), absl::string_view::npos);
  EXPECT_FALSE(LloydConstruction<double>(0, 3, {}).ok());
  EXPECT_FALSE(LloydConstruction<double>(2, 0, {}).ok());
  EXPECT_FALSE(LloydConstruction<double>(2, 3, {.beta = -1}).ok());
  for (const LloydOptions& dot :
       {LloydOptions{.score = ScoreKind::kDotProduct},
        LloydOptions{.embedding = Embedding::kBinary, .score = ScoreKind::kDotProduct}}) {
    EXPECT_EQ(LloydConstruction<double>(2, 3, dot).status().message(),
              "the dot-product Lloyd circuit has one-hot registers and a linear theta3");
  }
}

TEST(LloydConstruction, DotProductCircuitCarriesTheSquaredNorms) {
  const LloydOptions options = ExactCircuits()[2];
  EXPECT_EQ(LloydModelName(options), "lloyd-onehot-dot");
  const Model<double> model = *LloydConstruction<double>(2, 3, options);
  EXPECT_TRUE(model.norm_coordinate);
  EXPECT_EQ(model.dim(), 2 + 3 + 1);
  for (BlockId id : kBlockIds) EXPECT_EQ(model.layers[0][id].score, ScoreKind::kDotProduct);
  ASSERT_TRUE(model.layers[0].center_feed_forward.has_value());
  EXPECT_EQ(model.layers[0].center_feed_forward->hidden(), 4);
  // After a layer the last coordinate of every center token is its squared
  // norm again: theta4 cleared the old one, the feed-forward block wrote it.
  Matrix<double> points(2, 4);
  points << 0, 1, 4, 5, 0, 2, 4, 6;
  Matrix<double> init(2, 3);
  init << 0, 4, 9, 0, 4, 9;
  const RunResult<double> run = *RunTransformer(
      model, points, init, {.layers = 2, .path = Path::kDense, .record_trajectory = true});
  EXPECT_EQ(run.trajectory[0].labels, (Labels{0, 0, 1, 1}));
  Matrix<double> want(2, 3);
  want << 0.5, 4.5, 9, 1, 5, 9;
  EXPECT_EQ(run.centers, want);
  EXPECT_EQ(run.empty_cluster_events, 2);  // center 2 at (9, 9) never wins
}

TEST(LloydConstruction, FastPathOnlyForExactWeights) {
  Model<float> model = *LloydConstruction<float>(4, 3, {});
  EXPECT_EQ(MatchLloyd(model), Theta3Form::kHardmax);
  EXPECT_EQ(MatchLloyd(*LloydConstruction<float>(4, 3, {.theta3 = Theta3Form::kLinear})),
            Theta3Form::kLinear);
  EXPECT_EQ(MatchLloyd(*LloydConstruction<float>(4, 3, {.beta = 1e4})), std::nullopt);
  Model<float> dot = *LloydConstruction<float>(4, 3, ExactCircuits()[2]);
  EXPECT_EQ(MatchLloyd(dot), Theta3Form::kLinear);
  dot.layers[0].center_feed_forward->W2(4 + 3, 0) = 2;
  EXPECT_EQ(MatchLloyd(dot), std::nullopt);
  const Matrix<float> points = GaussianClusters<float>({.n = 40, .d = 4, .k = 3}, 7).points;
  const Matrix<float> init = points.leftCols(3);
  EXPECT_EQ(RunTransformer(model, points, init, {.layers = 2})->path, Path::kFast);

  model.layers[0][BlockId::kPointsToPoints].V(0, 0) = 1e-3f;
  EXPECT_EQ(MatchLloyd(model), std::nullopt);
  EXPECT_EQ(RunTransformer(model, points, init, {.layers = 2})->path, Path::kDense);
  EXPECT_EQ(RunTransformer(model, points, init, {.layers = 2, .path = Path::kFast}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(LloydConstruction, FloatPathsAgreeWithDouble) {
  const Clusters<double> task = GaussianClusters<double>({.n = 3000, .d = 16, .k = 8}, 11);
  const Matrix<double> init = *InitialCenters(task.points, 8, InitMethod::kKMeansPlusPlus, 3);
  const RunResult<double> exact =
      *RunTransformer(*LloydConstruction<double>(16, 8, {}), task.points, init, {.layers = 10});
  for (Path path : {Path::kFast, Path::kDense}) {
    const RunResult<float> run =
        *RunTransformer(*LloydConstruction<float>(16, 8, {.embedding = Embedding::kBinary}),
                        Matrix<float>(task.points.cast<float>()), Matrix<float>(init.cast<float>()),
                        {.layers = 10, .path = path});
    EXPECT_EQ(run.labels, exact.labels);
    EXPECT_LE(RelativeError(run.centers.cast<double>(), exact.centers), 1e-5);
    EXPECT_NEAR(run.objective, exact.objective, 1e-5 * exact.objective);
  }
}

TEST(LloydConstruction, DotProductCircuitInFloatAgreesWithDouble) {
  const Clusters<double> task = GaussianClusters<double>({.n = 1000, .d = 16, .k = 8}, 12);
  const Matrix<double> init = *InitialCenters(task.points, 8, InitMethod::kKMeansPlusPlus, 4);
  const RunResult<double> exact =
      *RunTransformer(*LloydConstruction<double>(16, 8, {}), task.points, init, {.layers = 10});
  const RunResult<float> run =
      *RunTransformer(*LloydConstruction<float>(16, 8, ExactCircuits()[2]),
                      Matrix<float>(task.points.cast<float>()), Matrix<float>(init.cast<float>()),
                      {.layers = 10, .path = Path::kDense});
  EXPECT_EQ(run.labels, exact.labels);
  EXPECT_LE(RelativeError(run.centers.cast<double>(), exact.centers), 1e-5);
  EXPECT_NEAR(run.objective, exact.objective, 1e-5 * exact.objective);
}

TEST(Transformer, BeforeLayerStopsTheRun) {
  const Matrix<double> points = GaussianClusters<double>({.n = 100, .d = 2, .k = 3}, 5).points;
  const Model<double> model = *LloydConstruction<double>(2, 3, {});
  for (Path path : {Path::kFast, Path::kDense}) {
    int calls = 0;
    const auto run = RunTransformer(
        model, points, Matrix<double>(points.leftCols(3)),
        {.layers = 10, .path = path, .before_layer = [&](int layer) {
           ++calls;
           return layer == 4 ? absl::DeadlineExceededError("deadline passed") : absl::OkStatus();
         }});
    EXPECT_EQ(run.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(calls, 5);
  }
}

TEST(Transformer, ZeroLayersAssignsToTheGivenCenters) {
  Matrix<double> points(1, 3);
  points << 0, 5, 10;
  Matrix<double> centers(1, 2);
  centers << 1, 9;
  const RunResult<double> run =
      *RunTransformer(*LloydConstruction<double>(1, 2, {}), points, centers, {.layers = 0});
  EXPECT_EQ(run.labels, (Labels{0, 0, 1}));
  EXPECT_EQ(run.centers, centers);
  EXPECT_EQ(run.objective, 1 + 16 + 1);
  EXPECT_TRUE(run.layer_objectives.empty());
}

TEST(Transformer, BadInputNamesTheProblem) {
  const Model<double> model = *LloydConstruction<double>(2, 3, {});
  Matrix<double> points = GaussianClusters<double>({.n = 10, .d = 2, .k = 3}, 1).points;
  const Matrix<double> init = points.leftCols(3);
  const auto message = [&](const Matrix<double>& p, const Matrix<double>& c) {
    const auto run = RunTransformer(model, p, c, {.layers = 1});
    EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(run.status().message());
  };
  Matrix<double> nan = points;
  nan(1, 7) = std::nan("");
  EXPECT_EQ(message(nan, init), "point 7 has NaN in dimension 1");
  Matrix<double> inf = points;
  inf(0, 2) = INFINITY;
  EXPECT_EQ(message(inf, init), "point 2 has Inf in dimension 0");
  EXPECT_EQ(message(points.leftCols(2), init.leftCols(3)),
            "n = 2 points is fewer than k = 3 clusters");
  EXPECT_EQ(message(Matrix<double>(points.topRows(1)), init),
            "points have d = 1, model lloyd-onehot expects d = 2");
  EXPECT_EQ(message(points, init.leftCols(2)),
            "initial centers have k = 2, model lloyd-onehot expects k = 3");
  Matrix<double> bad_center = init;
  bad_center(0, 1) = -INFINITY;
  EXPECT_EQ(message(points, bad_center), "center 1 has Inf in dimension 0");
  EXPECT_EQ(RunTransformer(model, points, init, {.layers = -1}).status().message(),
            "layers = -1, must not be negative");
}

}  // namespace
}  // namespace kmt

namespace kmt {
namespace {

TEST(RunLloyd, EqualsTheMaterialisedConstruction) {
  const Matrix<double> points = GaussianClusters<double>({.n = 700, .d = 5, .k = 6}, 8).points;
  const Matrix<double> init = *InitialCenters(points, 6, InitMethod::kKMeansPlusPlus, 8);
  for (const LloydOptions& options :
       {LloydOptions{.embedding = Embedding::kBinary}, LloydOptions{.theta3 = Theta3Form::kLinear},
        LloydOptions{.beta = 50}}) {
    SCOPED_TRACE(LloydModelName(options));
    const RunResult<double> direct = *RunLloyd(options, points, init, {.layers = 6});
    const RunResult<double> built =
        *RunTransformer(*LloydConstruction<double>(5, 6, options), points, init, {.layers = 6});
    EXPECT_EQ(direct.path, built.path);
    EXPECT_EQ(direct.labels, built.labels);
    EXPECT_EQ(direct.centers, built.centers);
    EXPECT_EQ(direct.layer_objectives, built.layer_objectives);
  }
  EXPECT_EQ(RunLloyd<double>({.embedding = Embedding::kNone}, points, init, {}).status().message(),
            "Lloyd construction needs cluster registers: embedding none has none");
  EXPECT_EQ(RunLloyd<double>({}, points, Matrix<double>(init.topRows(4)), {}).status().message(),
            "centers have d = 4, points have d = 5");
}

}  // namespace
}  // namespace kmt
