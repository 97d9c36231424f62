// The fast path of each variant, run through the engine, against the plain
// reference of its classical algorithm, layer by layer, in float and double:
// labels exactly, centers and objectives to a tolerance stated per type.

#include <gtest/gtest.h>

#include <set>

#include "core/engine.h"
#include "reference/variant_constructions.h"
#include "reference/variant_reference.h"
#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

template <typename Scalar>
const ServedModel<Scalar>& Model(const std::string& name) {
  static const std::vector<ServedModel<Scalar>> models = ExactModels<Scalar>();
  for (const ServedModel<Scalar>& m : models) {
    if (m.name() == name) return m;
  }
  ADD_FAILURE() << "no model " << name;
  return models[0];
}

// Problems with ties and duplicates: some on an integer grid, some with
// repeated points, one with more centers than the data fill (empty clusters).
template <typename Scalar>
std::vector<std::pair<Matrix<Scalar>, Matrix<Scalar>>> Problems() {
  std::vector<std::pair<Matrix<Scalar>, Matrix<Scalar>>> problems;
  for (int seed = 1; seed <= 6; ++seed) {
    const int d = 1 + seed % 4, k = 2 + 2 * seed;
    Matrix<Scalar> points =
        GaussianClusters<Scalar>({.n = 150 * seed, .d = d, .k = k}, 100 + seed).points;
    if (seed % 3 == 0) points = (points * Scalar(4)).array().round().matrix();  // a grid
    if (seed % 2 == 0) points.rightCols(20) = points.leftCols(20);              // duplicates
    Matrix<Scalar> centers = points.leftCols(k);
    if (seed == 5) centers.col(k - 1).setConstant(Scalar(50));  // far: its cluster is empty
    problems.emplace_back(points, centers);
  }
  return problems;
}

template <typename Scalar>
double Tolerance() {
  return std::is_same_v<Scalar, float> ? 1e-4 : 1e-10;
}

// A run's trajectory against the reference, layer by layer: labels and
// empty-cluster counts exactly, centers (and, when the run reports against
// the reference's points, objectives) to the type's tolerance.
template <typename Scalar>
void ExpectTrajectory(const RunResult<Scalar>& run,
                      const std::vector<LloydIteration<Scalar>>& reference, bool objectives) {
  ASSERT_EQ(run.trajectory.size(), reference.size());
  for (size_t t = 0; t < reference.size(); ++t) {
    SCOPED_TRACE(testing::Message() << "layer " << t);
    const LayerRecord<Scalar>& got = run.trajectory[t];
    ASSERT_EQ(got.labels, reference[t].labels);
    EXPECT_LE((got.centers - reference[t].centers).norm(),
              Tolerance<Scalar>() * (1 + reference[t].centers.norm()));
    if (objectives) {
      EXPECT_NEAR(got.objective, reference[t].objective,
                  Tolerance<Scalar>() * (1 + reference[t].objective));
    }
    EXPECT_EQ(got.empty_clusters, reference[t].empty_clusters);
  }
}

// The engine's run with the trajectory recorded, against the reference.
template <typename Scalar>
void ExpectEqualsReference(const ServedModel<Scalar>& model, BatchSpec<Scalar> spec,
                           const std::vector<LloydIteration<Scalar>>& reference) {
  spec.record_trajectory = true;
  const absl::StatusOr<Batch<Scalar>> batch = Batch<Scalar>::Validate(spec);
  ASSERT_TRUE(batch.ok()) << batch.status();
  const absl::StatusOr<RunResult<Scalar>> run = Cluster(model, *batch);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->path, Path::kFast);
  ExpectTrajectory(*run, reference, /*objectives=*/true);
}

// The problems the circuits run on the dense evaluator, with the squared
// diameter of their points and centers (which bounds a cluster's spread of
// scores). Not the integer grids: there points lie exactly halfway between
// centers, and a circuit's weighted sums (a matrix product, then a division
// by the weights' sum) round differently from a reference's loop, so such a
// point may go to the other center. Elsewhere the labels are equal exactly.
template <typename Scalar>
struct DenseProblem {
  Matrix<Scalar> points, centers;
  double diameter_sq;
};

template <typename Scalar>
std::vector<DenseProblem<Scalar>> DenseProblems() {
  std::vector<DenseProblem<Scalar>> dense;
  int problem = 0;
  for (const auto& [points, centers] : Problems<Scalar>()) {
    const bool grid = problem++ % 3 == 2;
    if (grid || points.cols() > 800) continue;  // the dense evaluator is O(n^2) per layer
    Matrix<Scalar> all(points.rows(), points.cols() + centers.cols());
    all << points, centers;
    dense.push_back({points, centers,
                     (all.rowwise().maxCoeff() - all.rowwise().minCoeff())
                         .template cast<double>()
                         .squaredNorm()});
  }
  return dense;
}

template <typename Scalar>
class VariantsTest : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(VariantsTest, Scalars);

TYPED_TEST(VariantsTest, SoftKMeansEqualsItsReference) {
  using S = TypeParam;
  int problem = 0;
  for (const auto& [points, centers] : Problems<S>()) {
    for (const double beta : {1.0, 30.0, 1e4}) {
      SCOPED_TRACE(testing::Message() << "problem " << problem << ", beta " << beta);
      ExpectEqualsReference(Model<S>("soft-kmeans"),
                            {.points = points,
                             .k = static_cast<int>(centers.cols()),
                             .layers = 6,
                             .given_centers = centers,
                             .parameters = {{"beta", beta}}},
                            ReferenceSoftKMeans<S>(points, centers, beta, 6));
    }
    ++problem;
  }
}

TYPED_TEST(VariantsTest, SoftKMeansFastPathEqualsTheDenseCircuit) {
  using S = TypeParam;
  const auto [points, centers] = Problems<S>()[1];
  const int k = static_cast<int>(centers.cols());
  const BatchSpec<S> spec{.points = points,
                          .k = k,
                          .layers = 5,
                          .given_centers = centers,
                          .parameters = {{"beta", 40}}};
  const RunResult<S> fast = *Cluster(Model<S>("soft-kmeans"), *Batch<S>::Validate(spec));
  const RunResult<S> dense = *Cluster(Model<S>("lloyd-onehot-linear"), *Batch<S>::Validate(spec));
  EXPECT_EQ(fast.path, Path::kFast);
  EXPECT_EQ(dense.path, Path::kDense);
  EXPECT_EQ(fast.labels, dense.labels);
  EXPECT_LE((fast.centers - dense.centers).norm(), Tolerance<S>() * (1 + dense.centers.norm()));
  for (size_t t = 0; t < fast.layer_objectives.size(); ++t) {
    EXPECT_NEAR(fast.layer_objectives[t], dense.layer_objectives[t],
                Tolerance<S>() * (1 + dense.layer_objectives[t]));
  }
}

TYPED_TEST(VariantsTest, TrimmedKMeansEqualsItsReference) {
  using S = TypeParam;
  int problem = 0;
  for (const auto& [points, centers] : Problems<S>()) {
    for (const double tau : {0.0, 0.02, 1.0, 1e6}) {
      SCOPED_TRACE(testing::Message() << "problem " << problem << ", tau " << tau);
      ExpectEqualsReference(Model<S>("trimmed-kmeans"),
                            {.points = points,
                             .k = static_cast<int>(centers.cols()),
                             .layers = 6,
                             .given_centers = centers,
                             .parameters = {{"tau", tau}}},
                            ReferenceTrimmedKMeans<S>(points, centers, tau, 6));
    }
    ++problem;
  }
}

TYPED_TEST(VariantsTest, RobustKMeansEqualsItsReference) {
  using S = TypeParam;
  int problem = 0;
  for (const auto& [points, centers] : Problems<S>()) {
    for (const double beta : {0.01, 1.0, 50.0, 1e4}) {
      SCOPED_TRACE(testing::Message() << "problem " << problem << ", beta " << beta);
      ExpectEqualsReference(Model<S>("robust-kmeans"),
                            {.points = points,
                             .k = static_cast<int>(centers.cols()),
                             .layers = 6,
                             .given_centers = centers,
                             .parameters = {{"beta", beta}}},
                            ReferenceRobustKMeans<S>(points, centers, beta, 6));
    }
    ++problem;
  }
}

// Paper A's circuits of trimmed and robust k-means, run by the dense
// evaluator as transformers, against the references.
TYPED_TEST(VariantsTest, TrimmedAndRobustCircuitsEqualTheirReferences) {
  using S = TypeParam;
  for (const DenseProblem<S>& p : DenseProblems<S>()) {
    const int d = static_cast<int>(p.points.rows()), k = static_cast<int>(p.centers.cols());
    for (const auto& [normalizer, parameter] :
         std::vector<std::pair<Normalizer, double>>{{Normalizer::kSparsemax, 1.0},
                                                    {Normalizer::kSparsemax, 50.0},
                                                    {Normalizer::kNormmax, 0.0},
                                                    {Normalizer::kNormmax, 0.5}}) {
      SCOPED_TRACE(testing::Message() << "n = " << p.points.cols() << ", "
                                      << NormalizerName(normalizer) << " " << parameter);
      const bool sparse = normalizer == Normalizer::kSparsemax;
      const double penalty = 4 * (1 + (sparse ? parameter : 1.0) * p.diameter_sq + parameter);
      const kmt::Model<S> model = *ClusterRestrictedConstruction<S>(
          d, k, normalizer, sparse ? parameter : 0, sparse ? 0 : parameter, penalty);
      const RunResult<S> run =
          *RunTransformer(model, p.points, p.centers,
                          {.layers = 5, .path = Path::kDense, .record_trajectory = true});
      ASSERT_EQ(run.path, Path::kDense);
      ExpectTrajectory(run,
                       sparse ? ReferenceRobustKMeans<S>(p.points, p.centers, parameter, 5)
                              : ReferenceTrimmedKMeans<S>(p.points, p.centers, parameter, 5),
                       /*objectives=*/true);
    }
  }
}

// Paper A's k-medoids circuit (the mean, then a Gumbel centers -> points
// step) on the dense evaluator against the reference, with the same seed:
// the noise is keyed alike (seed, layer, cluster, point), so the same data
// points are drawn.
TYPED_TEST(VariantsTest, KMedoidsCircuitEqualsItsReference) {
  using S = TypeParam;
  for (const DenseProblem<S>& p : DenseProblems<S>()) {
    const int d = static_cast<int>(p.points.rows()), k = static_cast<int>(p.centers.cols());
    for (const double gamma : {0.0, 0.5, 50.0}) {
      SCOPED_TRACE(testing::Message() << "n = " << p.points.cols() << ", gamma " << gamma);
      const double model_gamma = gamma == 0 ? std::numeric_limits<double>::infinity() : gamma;
      // Above the spread of a cluster's scores and of the Gumbel noise.
      const double penalty = 4 * (100 + (gamma == 0 ? 1.0 : gamma) * p.diameter_sq);
      const kmt::Model<S> model = *KMedoidsConstruction<S>(d, k, model_gamma, penalty);
      const RunResult<S> run = *RunTransformer(
          model, p.points, p.centers,
          {.layers = 5, .path = Path::kDense, .record_trajectory = true, .seed = 77});
      const std::vector<LloydIteration<S>> reference =
          ReferenceKMedoids<S>(p.points, p.centers, gamma, 77, 5);
      ExpectTrajectory(run, reference, /*objectives=*/true);
      for (size_t t = 0; t < reference.size(); ++t) {
        EXPECT_EQ(run.trajectory[t].centers, reference[t].centers);  // data points, exactly
      }
    }
  }
}

TYPED_TEST(VariantsTest, KMedoidsEqualsItsReferenceAndCentersAreDataPoints) {
  using S = TypeParam;
  const double kInf = std::numeric_limits<double>::infinity();
  int problem = 0;
  for (const auto& [points, centers] : Problems<S>()) {
    for (const double gamma : {0.0, 0.5, 50.0}) {
      SCOPED_TRACE(testing::Message() << "problem " << problem << ", gamma " << gamma);
      const int k = static_cast<int>(centers.cols());
      BatchSpec<S> spec{.points = points,
                        .k = k,
                        .layers = 5,
                        .given_centers = centers,
                        .seed = 77,
                        // The reference's gamma 0 stands for infinity.
                        .parameters = {{"gamma", gamma == 0 ? kInf : gamma}}};
      ExpectEqualsReference(Model<S>("kmedoids"), spec,
                            ReferenceKMedoids<S>(points, centers, gamma, 77, 5));
      const RunResult<S> run = *Cluster(Model<S>("kmedoids"), *Batch<S>::Validate(spec));
      std::set<std::vector<S>> data;
      for (Eigen::Index i = 0; i < points.cols(); ++i) {
        data.insert(std::vector<S>(points.col(i).data(), points.col(i).data() + points.rows()));
      }
      for (int j = 0; j < k; ++j) {
        const std::vector<S> c(run.centers.col(j).data(),
                               run.centers.col(j).data() + run.centers.rows());
        EXPECT_TRUE(data.count(c) || c == std::vector<S>(centers.col(j).data(),
                                                         centers.col(j).data() + centers.rows()))
            << "center " << j << " is neither a data point nor its initial value";
      }
    }
    ++problem;
  }
}

TYPED_TEST(VariantsTest, KMedoidsDrawsDependOnTheSeedOnly) {
  using S = TypeParam;
  const auto [points, centers] = Problems<S>()[3];
  BatchSpec<S> spec{.points = points,
                    .k = static_cast<int>(centers.cols()),
                    .layers = 4,
                    .given_centers = centers,
                    .seed = 5,
                    .parameters = {{"gamma", 0.2}}};
  const RunResult<S> a = *Cluster(Model<S>("kmedoids"), *Batch<S>::Validate(spec));
  const RunResult<S> b = *Cluster(Model<S>("kmedoids"), *Batch<S>::Validate(spec));
  EXPECT_EQ(a.centers, b.centers);
  spec.seed = 6;
  const RunResult<S> c = *Cluster(Model<S>("kmedoids"), *Batch<S>::Validate(spec));
  EXPECT_NE(a.centers, c.centers);
}

TEST(Variants, KMedoidsDrawsFollowTheGumbelMaxProbabilities) {
  // One cluster of five points; over many seeds the center drawn after one
  // layer is point i with probability proportional to exp(-gamma ||x_i -
  // mean||^2). Chi-square with 4 degrees of freedom: 18.47 is the 0.001
  // critical value.
  Matrix<double> points(1, 5);
  points << 0.0, 0.5, 1.0, 2.0, 3.5;
  const double mean = points.mean(), gamma = 0.4;
  std::vector<double> p(5);
  double total = 0;
  for (int i = 0; i < 5; ++i) {
    p[i] = std::exp(-gamma * (points(0, i) - mean) * (points(0, i) - mean));
    total += p[i];
  }
  constexpr int kDraws = 20000;
  std::vector<int> counts(5, 0);
  for (int seed = 0; seed < kDraws; ++seed) {
    const Batch<double> batch = *Batch<double>::Validate({.points = points,
                                                          .k = 1,
                                                          .layers = 1,
                                                          .given_centers = points.leftCols(1),
                                                          .seed = static_cast<uint64_t>(seed),
                                                          .parameters = {{"gamma", gamma}}});
    const double center = Cluster(Model<double>("kmedoids"), batch)->centers(0, 0);
    for (int i = 0; i < 5; ++i) counts[i] += center == points(0, i);
  }
  double chi2 = 0;
  int drawn = 0;
  for (int i = 0; i < 5; ++i) {
    const double expected = kDraws * p[i] / total;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    drawn += counts[i];
  }
  EXPECT_EQ(drawn, kDraws);  // every center is one of the points
  EXPECT_LT(chi2, 18.47);
}

// Spherical k-means as a circuit: Lloyd's construction with a norm layer on
// the data coordinates, on the dense evaluator, against the reference (whose
// objective is that of the unit points, the run's that of the points).
TYPED_TEST(VariantsTest, SphericalCircuitEqualsItsReference) {
  using S = TypeParam;
  for (DenseProblem<S> p : DenseProblems<S>()) {
    SCOPED_TRACE(testing::Message() << "n = " << p.points.cols());
    p.points.array() += S(0.25);
    p.centers.array() += S(0.25);
    kmt::Model<S> model = *LloydConstruction<S>(static_cast<int>(p.points.rows()),
                                                static_cast<int>(p.centers.cols()), {});
    model.unit_norm = true;
    const RunResult<S> run = *RunTransformer(
        model, p.points, p.centers, {.layers = 5, .path = Path::kDense, .record_trajectory = true});
    ASSERT_EQ(run.path, Path::kDense);
    ExpectTrajectory(run, ReferenceSphericalKMeans<S>(p.points, p.centers, 5),
                     /*objectives=*/false);
  }
}

TYPED_TEST(VariantsTest, SphericalKMeansEqualsItsReference) {
  using S = TypeParam;
  int problem = 0;
  for (auto [points, centers] : Problems<S>()) {
    SCOPED_TRACE(testing::Message() << "problem " << problem++);
    // Directions need points away from the origin.
    points.array() += S(0.25);
    centers.array() += S(0.25);
    ExpectEqualsReference(Model<S>("spherical-kmeans"),
                          {.points = points,
                           .k = static_cast<int>(centers.cols()),
                           .layers = 5,
                           .given_centers = centers},
                          ReferenceSphericalKMeans<S>(points, centers, 5));
  }
}

TEST(Variants, ParametersOutOfRangeOrUnreadAreRefusedByName) {
  const Matrix<double> points = GaussianClusters<double>({.n = 60, .d = 2, .k = 3}, 1).points;
  const auto refuse = [&](const std::string& model, BatchSpec<double> spec) {
    spec.points = points;
    spec.k = 3;
    const absl::StatusOr<Batch<double>> batch = Batch<double>::Validate(spec);
    if (!batch.ok()) return std::string(batch.status().message());
    return std::string(Cluster(Model<double>(model), *batch).status().message());
  };
  EXPECT_EQ(refuse("lloyd-onehot", {.parameters = {{"beta", 10}}}),
            "beta = 10: model lloyd-onehot has no parameter beta (a softmax assignment is "
            "soft-kmeans, or lloyd-onehot-linear with beta)");
  EXPECT_EQ(refuse("soft-kmeans", {.parameters = {{"gamma", 2}}}),
            "gamma = 2: model soft-kmeans has no parameter gamma");
  EXPECT_EQ(refuse("kmedoids", {.parameters = {{"tau", 1.0}}}),
            "tau = 1: model kmedoids has no parameter tau");
  EXPECT_EQ(refuse("kmedoids", {.parameters = {{"tau", 0.0}}}),
            "tau = 0: model kmedoids has no parameter tau");
  const double kInf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(refuse("trimmed-kmeans", {.parameters = {{"tau", -1.0}}}),
            "tau = -1 is out of range for trimmed-kmeans: [0, inf)");
  EXPECT_EQ(refuse("trimmed-kmeans", {.parameters = {{"tau", kInf}}}),
            "tau = inf is out of range for trimmed-kmeans: [0, inf)");
  EXPECT_EQ(refuse("soft-kmeans", {.parameters = {{"beta", -1}}}),
            "beta = -1 is out of range for soft-kmeans: (0, inf]");
  EXPECT_EQ(refuse("soft-kmeans", {.parameters = {{"beta", 0}}}),
            "beta = 0 is out of range for soft-kmeans: (0, inf]");
  EXPECT_EQ(refuse("kmedoids", {.parameters = {{"gamma", -3}}}),
            "gamma = -3 is out of range for kmedoids: [0, inf]");
  EXPECT_EQ(refuse("kmedoids", {.parameters = {{"gamma", NAN}}}), "gamma = nan: not a number");
  Matrix<double> zero = points;
  zero.col(7).setZero();
  const absl::StatusOr<Batch<double>> batch =
      Batch<double>::Validate({.points = zero, .k = 3, .layers = 1});
  EXPECT_EQ(Cluster(Model<double>("spherical-kmeans"), *batch).status().message(),
            "point 7 has norm 0: spherical k-means needs a direction");
}

TEST(Variants, DefaultsComeFromTheModel) {
  const Matrix<double> points = GaussianClusters<double>({.n = 60, .d = 2, .k = 3}, 1).points;
  const Batch<double> batch = *Batch<double>::Validate({.points = points, .k = 3});
  EXPECT_EQ(Model<double>("soft-kmeans").Plan(batch)->parameters.at("beta"), 100);
  EXPECT_TRUE(std::isinf(Model<double>("kmedoids").Plan(batch)->parameters.at("gamma")));
  EXPECT_EQ(Model<double>("trimmed-kmeans").Plan(batch)->parameters.at("tau"), 1);
  EXPECT_EQ(Model<double>("robust-kmeans").Plan(batch)->parameters.at("beta"), 1);
  const Batch<double> zero_tau =
      *Batch<double>::Validate({.points = points, .k = 3, .parameters = {{"tau", 0.0}}});
  EXPECT_EQ(Model<double>("trimmed-kmeans").Plan(zero_tau)->parameters.at("tau"), 0);
  EXPECT_TRUE(std::isinf(Model<double>("lloyd-onehot-linear").Plan(batch)->parameters.at("beta")));
  EXPECT_FALSE(Model<double>("lloyd-onehot-linear").Plan(batch)->dense);
}

}  // namespace
}  // namespace kmt
