// The evaluation draws each scenario as the papers define it, compares a
// model with Lloyd's from the same initial centers, and spreads its summary
// over tasks (one seed) or over seed means (several).
#include "learn/evaluation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/constructions.h"
#include "core/random.h"
#include "core/transformer.h"

namespace kmt {
namespace {

std::map<std::string, Scenario> ByName(const std::vector<Scenario>& scenarios) {
  std::map<std::string, Scenario> by_name;
  for (const Scenario& s : scenarios) {
    EXPECT_TRUE(by_name.emplace(s.name, s).second) << "two scenarios named " << s.name;
  }
  return by_name;
}

TEST(Evaluation, ScenariosAreThePapersSetupsAroundTheTrainingDistribution) {
  const TaskOptions base{.n = 512, .d = 32, .k = 10, .scale = 0.1};
  std::map<std::string, Scenario> s = ByName(PaperScenarios(base));
  const std::set<std::string> expected = {
      "random",       "kmeans++", "plain-kmeans++",    "n128",        "n256",
      "n1024",        "n2048",    "unequal",           "anisotropic", "half-scale",
      "double-scale", "raw",      "anisotropic-raw",   "laplace",     "gumbel",
      "lognormal",    "cauchy",   "unequal-dimensions"};
  std::set<std::string> names;
  for (const auto& [name, scenario] : s) names.insert(name);
  EXPECT_EQ(names, expected);

  const auto same_tasks = [](const TaskOptions& a, const TaskOptions& b) {
    return a.n == b.n && a.d == b.d && a.k == b.k && a.scale == b.scale &&
           a.min_max_scale == b.min_max_scale && a.family == b.family &&
           a.equal_weights == b.equal_weights && a.isotropic == b.isotropic &&
           a.unequal_dimensions == b.unequal_dimensions;
  };
  for (const char* name : {"random", "kmeans++", "plain-kmeans++"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(same_tasks(s[name].tasks, base));
  }
  EXPECT_EQ(s["random"].init, InitMethod::kRandomSubset);
  EXPECT_EQ(s["kmeans++"].init, InitMethod::kKMeansPlusPlus);
  EXPECT_EQ(s["plain-kmeans++"].init, InitMethod::kPlainKMeansPlusPlus);
  EXPECT_EQ(s["n2048"].tasks.n, 2048);
  EXPECT_FALSE(s["unequal"].tasks.equal_weights);
  EXPECT_FALSE(s["anisotropic"].tasks.isotropic);
  EXPECT_EQ(s["anisotropic"].tasks.scale, 0.1);
  EXPECT_EQ(s["half-scale"].tasks.scale, 0.05);
  EXPECT_EQ(s["double-scale"].tasks.scale, 0.2);
  EXPECT_FALSE(s["raw"].tasks.min_max_scale);
  EXPECT_FALSE(s["anisotropic-raw"].tasks.min_max_scale);
  EXPECT_FALSE(s["anisotropic-raw"].tasks.isotropic);
  EXPECT_EQ(s["lognormal"].tasks.family, Family::kLognormal);
  EXPECT_EQ(s["cauchy"].tasks.family, Family::kCauchy);
  EXPECT_TRUE(s["unequal-dimensions"].tasks.unequal_dimensions);
  for (const auto& [name, scenario] : s) {
    SCOPED_TRACE(name);
    EXPECT_EQ(scenario.tasks.d, 32);
    EXPECT_EQ(scenario.tasks.k, 10);
    if (name != "random" && name != "kmeans++" && name != "plain-kmeans++") {
      EXPECT_EQ(scenario.init, InitMethod::kRandomSubset);
      EXPECT_FALSE(same_tasks(scenario.tasks, base));
    }
  }
}

TEST(Evaluation, TheExactLloydModelTiesLloydsAtEveryStep) {
  const int d = 3, k = 4, steps = 6, tasks = 8;
  const Model<float> lloyd = *LloydConstruction<float>(d, k, {});
  for (const Scenario& scenario : PaperScenarios({.n = 64, .d = d, .k = k})) {
    if (scenario.tasks.n > 256) continue;
    SCOPED_TRACE(scenario.name);
    const SeedLogs logs = EvaluateSeed(scenario, {lloyd}, tasks, steps, 7);
    ASSERT_EQ(logs.lloyd.size(), static_cast<size_t>(tasks));
    for (int t = 0; t < tasks; ++t) {
      ASSERT_EQ(logs.lloyd[t].size(), static_cast<size_t>(steps));
      EXPECT_EQ(logs.models[0][t], logs.lloyd[t]);
      for (int step = 1; step < steps; ++step) {
        // Lloyd's never raises the objective (float round-off aside).
        EXPECT_LE(logs.lloyd[t][step], logs.lloyd[t][step - 1] + 1e-6);
      }
    }
    const ScenarioSummary summary = Summarise({logs});
    for (int step = 0; step < steps; ++step) {
      EXPECT_EQ(summary.differences[0].mean[step], 0.0);
      EXPECT_EQ(summary.differences[0].sd[step], 0.0);
    }
    EXPECT_EQ(summary.diverged[0], 0);
  }
}

TEST(Evaluation, ASeedNamesItsTasksAndInitialCenters) {
  const Model<float> lloyd = *LloydConstruction<float>(2, 3, {});
  const Scenario scenario = ByName(PaperScenarios({.n = 50, .d = 2, .k = 3}))["plain-kmeans++"];
  const SeedLogs a = EvaluateSeed(scenario, {lloyd}, 5, 3, 11);
  const SeedLogs b = EvaluateSeed(scenario, {lloyd}, 5, 3, 11);
  const SeedLogs shifted = EvaluateSeed(scenario, {lloyd}, 4, 3, 12);
  EXPECT_EQ(a.lloyd, b.lloyd);
  // Task t of seed s is task t - 1 of seed s + 1.
  for (int t = 0; t < 4; ++t) EXPECT_EQ(shifted.lloyd[t], a.lloyd[t + 1]);
}

TEST(Evaluation, ARunWhoseObjectiveIsNotFiniteCountsAsDiverged) {
  Model<float> blown = *LloydConstruction<float>(2, 3, {});
  // theta3 adds a huge value bias to every center's data coordinates: the
  // centers and then the objective overflow.
  blown.layers[0][BlockId::kCentersToPoints].bV.head(2).setConstant(3e38f);
  blown.name = "blown";
  const SeedLogs logs =
      EvaluateSeed(ByName(PaperScenarios({.n = 40, .d = 2, .k = 3}))["random"], {blown}, 3, 4, 1);
  const ScenarioSummary summary = Summarise({logs});
  EXPECT_EQ(summary.diverged[0], 3);
  EXPECT_TRUE(std::isinf(summary.models[0].mean[3]));
  EXPECT_TRUE(std::isfinite(summary.lloyd.mean[3]));
}

TEST(Evaluation, ADataTaskIsASeededSubsetOfTheDatasetsPoints) {
  Matrix<float> points(2, 30);
  for (int i = 0; i < 30; ++i) points.col(i) << static_cast<float>(i), static_cast<float>(-i);
  const Matrix<float> task = DataTask(points, 12, 5);
  ASSERT_EQ(task.cols(), 12);
  std::set<float> seen;
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(task(1, i), -task(0, i));  // whole columns
    seen.insert(task(0, i));
  }
  EXPECT_EQ(seen.size(), 12u);  // without replacement
  EXPECT_EQ(DataTask(points, 12, 5), task);
  EXPECT_NE(DataTask(points, 12, 6), task);
  // Fewer points than n: all of them.
  const Matrix<float> all = DataTask(points, 100, 5);
  ASSERT_EQ(all.cols(), 30);
  EXPECT_EQ(all.row(0).sum(), points.row(0).sum());

  const Model<float> lloyd = *LloydConstruction<float>(2, 3, {});
  const Scenario scenario = DataScenario("line", std::make_shared<const Matrix<float>>(points), 12,
                                         3, InitMethod::kRandomSubset);
  const SeedLogs logs = EvaluateSeed(scenario, {lloyd}, 2, 3, 5);
  EXPECT_EQ(logs.models[0], logs.lloyd);
  const Matrix<float> init = task.leftCols(3);
  EXPECT_DOUBLE_EQ(logs.lloyd[0][2],
                   std::log(RunLloyd<float>({}, task, init, {.layers = 3})->objective));
}

// Two seeds of two tasks and two steps, numbers chosen by hand.
std::vector<SeedLogs> HandMadeSeeds() {
  SeedLogs a{{{1, 1}, {3, 3}}, {{{0, 1}, {2, 1}}}};  // Lloyd's means 2, 2; model's 1, 1
  SeedLogs b{{{2, 2}, {2, 2}}, {{{2, 0}, {2, 0}}}};  // Lloyd's means 2, 2; model's 2, 0
  return {a, b};
}

TEST(Evaluation, OneSeedSpreadsOverTasks) {
  const ScenarioSummary s = Summarise({HandMadeSeeds()[0]});
  EXPECT_EQ(s.seeds, 1);
  EXPECT_EQ(s.lloyd.mean, (std::vector<double>{2, 2}));
  EXPECT_EQ(s.lloyd.sd, (std::vector<double>{1, 1}));  // over tasks, divided by n
  EXPECT_EQ(s.models[0].mean, (std::vector<double>{1, 1}));
  EXPECT_EQ(s.models[0].sd, (std::vector<double>{1, 0}));
  // Task by task: -1, 0 and -1, -2.
  EXPECT_EQ(s.differences[0].mean, (std::vector<double>{-1, -1}));
  EXPECT_EQ(s.differences[0].sd, (std::vector<double>{0, 1}));
}

TEST(Evaluation, SeveralSeedsSpreadOverSeedMeans) {
  const ScenarioSummary s = Summarise(HandMadeSeeds());
  EXPECT_EQ(s.seeds, 2);
  EXPECT_EQ(s.lloyd.mean, (std::vector<double>{2, 2}));
  EXPECT_EQ(s.lloyd.sd, (std::vector<double>{0, 0}));
  EXPECT_EQ(s.models[0].mean, (std::vector<double>{1.5, 0.5}));
  // Sample standard deviation of two values x, y: |x - y| / sqrt(2).
  EXPECT_DOUBLE_EQ(s.models[0].sd[0], 1 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(s.models[0].sd[1], 1 / std::sqrt(2.0));
  // Seed means minus Lloyd's seed means: -1, -1 and 0, -2.
  EXPECT_EQ(s.differences[0].mean, (std::vector<double>{-0.5, -1.5}));
  EXPECT_DOUBLE_EQ(s.differences[0].sd[0], 1 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(s.differences[0].sd[1], 1 / std::sqrt(2.0));
  EXPECT_EQ(s.diverged, (std::vector<int>{0}));
}

TEST(Evaluation, TheHandOverIsChosenWhereTheModelDoesBestAndLloydsItselfIsNotAhead) {
  Rng rng(3);
  auto points = std::make_shared<Matrix<float>>(2, 300);
  for (int i = 0; i < 300; ++i) {
    const float group = static_cast<float>(i % 4);
    points->col(i) << group * 3 + static_cast<float>(rng.Normal()),
        -group + static_cast<float>(rng.Normal());
  }
  const std::vector<InitMethod> inits = {InitMethod::kKMeansPlusPlus, InitMethod::kRandomSubset};
  // The exact model is Lloyd's: no gain, so not ahead, and the first
  // candidate among equals.
  const Model<float> lloyd = *LloydConstruction<float>(2, 4, {});
  const HandOverChoice same = ChooseHandOver(lloyd, points, 60, inits, 20, 6, 1, {0, 2, 4});
  EXPECT_EQ(same.lloyd_after, 0);
  EXPECT_EQ(same.gain, std::vector<double>({0.0, 0.0}));
  EXPECT_EQ(same.standard_error, std::vector<double>({0.0, 0.0}));
  EXPECT_FALSE(same.ahead);
  // A worse model (its center update biased): behind on its own layers,
  // less behind when Lloyd's takes over early, never ahead.
  Model<float> biased = lloyd;
  biased.layers[0][BlockId::kCentersToPoints].bV.head(2).setConstant(0.5f);
  const HandOverChoice own = ChooseHandOver(biased, points, 60, inits, 20, 6, 1, {0});
  EXPECT_GT(own.gain[0], 0);
  EXPECT_GT(own.standard_error[0], 0);
  EXPECT_FALSE(own.ahead);
  const HandOverChoice chosen = ChooseHandOver(biased, points, 60, inits, 20, 6, 1, {0, 1, 3});
  EXPECT_NE(chosen.lloyd_after, 0);
  EXPECT_LT(chosen.gain[0], own.gain[0]);
  EXPECT_FALSE(chosen.ahead);
}

}  // namespace
}  // namespace kmt
