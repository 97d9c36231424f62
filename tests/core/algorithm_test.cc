#include "core/algorithm.h"

#include <set>
#include <string>

#include "core/engine.h"
#include "gtest/gtest.h"

namespace kmt {
namespace {

TEST(Algorithm, EveryHomeIsNamedOnceAndFoundByName) {
  std::set<std::string> names;
  for (const Algorithm* algorithm : Algorithms()) {
    SCOPED_TRACE(algorithm->name());
    EXPECT_TRUE(names.insert(algorithm->name()).second);
    EXPECT_EQ(FindAlgorithm(algorithm->name()), algorithm);
    EXPECT_FALSE(algorithm->description().empty());
    EXPECT_FALSE(algorithm->reference().empty());
    EXPECT_FALSE(algorithm->served().empty());
    for (const ParameterSpec& p : algorithm->parameters()) {
      SCOPED_TRACE(p.name);
      EXPECT_FALSE(p.description.empty());
      // The default is a value the table itself accepts.
      EXPECT_TRUE(
          ResolveParameters(algorithm->name(), algorithm->parameters(), {{p.name, p.default_value}})
              .ok());
    }
  }
  EXPECT_EQ(FindAlgorithm("no-such-algorithm"), nullptr);
  EXPECT_EQ(&LloydAlgorithm(), FindAlgorithm("lloyd"));
}

TEST(Algorithm, ExactModelsAreEachHomeOnEachOfItsCircuits) {
  size_t served = 0;
  for (const Algorithm* algorithm : Algorithms()) served += algorithm->served().size();
  const std::vector<ServedModel<double>> models = ExactModels<double>();
  ASSERT_EQ(models.size(), served);
  size_t i = 0;
  for (const Algorithm* algorithm : Algorithms()) {
    for (size_t c = 0; c < algorithm->served().size(); ++c, ++i) {
      EXPECT_EQ(&models[i].algorithm(), algorithm);
      EXPECT_EQ(&models[i].parameters(), &algorithm->parameters());
    }
  }
}

// The traits ListModels reports for clients agree with what each home does:
// a unit-norm algorithm prepares its points and does not move with them, and
// one that is Lloyd's at its defaults has Lloyd's weighted form and runs the
// fast path there.
TEST(Algorithm, TraitsAgreeWithWhatEachHomeDoes) {
  for (const Algorithm* algorithm : Algorithms()) {
    SCOPED_TRACE(algorithm->name());
    if (algorithm->unit_norm()) {
      EXPECT_TRUE(algorithm->Prepares());
      EXPECT_FALSE(algorithm->translation_invariant());
    }
    if (algorithm->lloyd_at_defaults()) {
      EXPECT_TRUE(algorithm->translation_invariant());
      EXPECT_TRUE(algorithm->UpdatesFromSums());
      EXPECT_FALSE(
          algorithm->RunsDense(*ResolveParameters(algorithm->name(), algorithm->parameters(), {})));
    }
  }
  EXPECT_TRUE(LloydAlgorithm().lloyd_at_defaults());
  EXPECT_TRUE(FindAlgorithm("spherical-kmeans")->unit_norm());
}

TEST(Algorithm, OnlyTheSoftmaxCircuitWithAFiniteBetaRunsDense) {
  for (const Algorithm* algorithm : Algorithms()) {
    SCOPED_TRACE(algorithm->name());
    const ParameterValues defaults =
        *ResolveParameters(algorithm->name(), algorithm->parameters(), {});
    EXPECT_FALSE(algorithm->RunsDense(defaults));
  }
  const Algorithm& softmax = *FindAlgorithm("softmax-lloyd");  // lifetime: the static table
  EXPECT_TRUE(softmax.RunsDense({{"beta", 10}}));
  Model<double> circuit;
  ASSERT_TRUE(
      softmax.DenseCircuit(3, 4, softmax.served().front().options, {{"beta", 10}}, &circuit).ok());
  EXPECT_EQ(circuit.d, 3);
  EXPECT_EQ(circuit.k, 4);
  EXPECT_FALSE(LloydAlgorithm()
                   .DenseCircuit(3, 4, LloydAlgorithm().served().front().options, {}, &circuit)
                   .ok());
}

TEST(Algorithm, SphericalPreparationRefusesAPointWithoutDirection) {
  const Algorithm& spherical = *FindAlgorithm("spherical-kmeans");  // lifetime: the static table
  EXPECT_TRUE(spherical.Prepares());
  Matrix<double> points(2, 3);
  points << 3, 0, 1, 4, 0, 0;
  EXPECT_EQ(spherical.Prepare(&points, "point").message(),
            "point 1 has norm 0: spherical k-means needs a direction");
  Matrix<double> fine(2, 1);
  fine << 3, 4;
  ASSERT_TRUE(spherical.Prepare(&fine, "point").ok());
  EXPECT_DOUBLE_EQ(fine(0, 0), 0.6);
  EXPECT_DOUBLE_EQ(fine(1, 0), 0.8);
  EXPECT_FALSE(LloydAlgorithm().Prepares());
}

TEST(Algorithm, UpdatesFromSumsEqualTheUpdateFromLabels) {
  Matrix<double> points(2, 5);
  points << 0, 1, 4, 5, 6, 1, 0, 4, 5, 5;
  const Labels labels = {0, 0, 1, 1, 1};
  for (const Algorithm* algorithm : Algorithms()) {
    if (!algorithm->UpdatesFromSums()) continue;
    SCOPED_TRACE(algorithm->name());
    Matrix<double> from_labels = points.leftCols(2), from_sums = from_labels;
    const ParameterValues parameters =
        *ResolveParameters(algorithm->name(), algorithm->parameters(), {});
    algorithm->UpdateCenters({.parameters = parameters}, points, nullptr, labels, &from_labels);
    ClusterSums sums(2, 2);
    AccumulateClusterSums(points, labels, &sums);
    algorithm->CentersFromSums(sums, &from_sums);
    EXPECT_EQ(from_labels, from_sums);
  }
}

}  // namespace
}  // namespace kmt
