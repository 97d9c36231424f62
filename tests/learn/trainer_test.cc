// Training smoke test on a tiny setting: the loss goes down, a resumed run
// equals an uninterrupted one, the thread count does not matter, and tasks
// start from the initialisations asked for; on a dataset, tasks are its
// subsets, the same for a seed and others for another.
#include "learn/trainer.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/random.h"

namespace kmt {
namespace {

TrainerOptions Tiny() {
  TrainerOptions o;
  o.tasks = {.n = 64, .d = 2, .k = 3};
  o.embedding = Embedding::kBinary;
  o.steps = 60;
  o.batch = 8;
  o.eval_every = 20;
  o.validation_tasks = 8;
  o.seed = 3;
  return o;
}

TEST(Trainer, LossGoesDown) {
  const TrainerOptions o = Tiny();
  TrainerState state = InitialState(o);
  std::vector<double> losses;
  std::vector<double> validation;
  ASSERT_TRUE(Train(o, o.steps, &state, [&](const StepReport& r) {
                losses.push_back(r.loss);
                if (r.validated) validation.push_back(r.validation_ratio);
              }).ok());
  ASSERT_EQ(losses.size(), 60u);
  const double first = std::accumulate(losses.begin(), losses.begin() + 15, 0.0);
  const double last = std::accumulate(losses.end() - 15, losses.end(), 0.0);
  EXPECT_LT(last, 0.8 * first);
  ASSERT_EQ(validation.size(), 3u);
  EXPECT_LT(validation.back(), validation.front());
  EXPECT_EQ(state.step, 60);
}

// Whether float arithmetic in the calling thread keeps subnormal numbers.
bool KeepsSubnormals() {
  volatile float smallest_normal = 1.17549435e-38f;
  volatile float half = 0.5f;
  const float subnormal = smallest_normal * half;
  return subnormal != 0.0f && subnormal * 2.0f == smallest_normal;
}

// The trainer flushes subnormals to zero in its tasks only: afterwards the
// calling thread and OpenMP's threads compute with them as before.
TEST(Trainer, TrainingLeavesEveryThreadsSubnormalsAsTheyWere) {
  ASSERT_TRUE(KeepsSubnormals());
  TrainerOptions o = Tiny();
  o.steps = 20;
  TrainerState state = InitialState(o);
  ASSERT_TRUE(Train(o, o.steps, &state, nullptr).ok());
  EXPECT_TRUE(KeepsSubnormals());
  std::vector<int> keeps(omp_get_max_threads(), -1);
#pragma omp parallel
  keeps[omp_get_thread_num()] = KeepsSubnormals() ? 1 : 0;
  for (int k : keeps) EXPECT_EQ(k, 1);
}

TEST(Trainer, ResumedRunEqualsUninterruptedRun) {
  const TrainerOptions o = Tiny();
  TrainerState straight = InitialState(o);
  ASSERT_TRUE(Train(o, 40, &straight, nullptr).ok());
  TrainerState resumed = InitialState(o);
  ASSERT_TRUE(Train(o, 25, &resumed, nullptr).ok());
  TrainerState saved = resumed;  // what a checkpoint holds
  ASSERT_TRUE(Train(o, 40, &saved, nullptr).ok());
  EXPECT_EQ(saved.step, 40);
  EXPECT_EQ(saved.params, straight.params);
  EXPECT_EQ(saved.adam_v, straight.adam_v);
  EXPECT_EQ(saved.learning_rate, straight.learning_rate);
}

TEST(Trainer, ThreadCountDoesNotChangeTheResult) {
  const TrainerOptions o = Tiny();
  TrainerState two = InitialState(o), one = InitialState(o);
  ASSERT_TRUE(Train(o, 10, &two, nullptr).ok());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ASSERT_TRUE(Train(o, 10, &one, nullptr).ok());
  omp_set_num_threads(threads);
  EXPECT_EQ(one.params, two.params);
}

TEST(Trainer, TasksOfRandomSizesTrainReproduciblyAndValidatePadded) {
  TrainerOptions o = Tiny();
  o.tasks = {.n = 64, .d = 5, .k = 4};
  o.embedding = Embedding::kOneHot;
  TrainerOptions fixed = o;
  o.random_sizes = true;
  TrainerState two = InitialState(o), one = InitialState(o), plain = InitialState(fixed);
  ASSERT_TRUE(Train(o, 5, &two, nullptr).ok());
  ASSERT_TRUE(Train(fixed, 5, &plain, nullptr).ok());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ASSERT_TRUE(Train(o, 5, &one, nullptr).ok());
  omp_set_num_threads(threads);
  EXPECT_EQ(one.params, two.params);
  EXPECT_NE(one.params, plain.params);
  EXPECT_TRUE(one.params.allFinite());
  const double ratio = ValidationRatio(o, ModelFromParams(o, one.params, "m"));
  EXPECT_TRUE(std::isfinite(ratio));
  EXPECT_NE(ratio, ValidationRatio(fixed, ModelFromParams(fixed, one.params, "m")));
}

TEST(Trainer, ModelFromParamsIsServable) {
  const TrainerOptions o = Tiny();
  const Model<float> model = ModelFromParams(o, InitialState(o).params, "tiny");
  EXPECT_TRUE(ValidateModel(model).ok());
  EXPECT_TRUE(model.reembed);
  EXPECT_EQ(model.dim(), 4);
  EXPECT_GT(ValidationRatio(o, model), 0);
  EXPECT_EQ(model.trained_inits, std::vector<InitMethod>{InitMethod::kRandomSubset});
}

TEST(Trainer, TasksStartFromTheInitialisationsInTurn) {
  TrainerOptions random = Tiny();
  TrainerOptions greedy = random, mixed = random;
  greedy.inits = {InitMethod::kKMeansPlusPlus};
  mixed.inits = {InitMethod::kKMeansPlusPlus, InitMethod::kRandomSubset};
  const Vector<double> params = InitialState(random).params;
  EXPECT_EQ(ModelFromParams(mixed, params, "m").trained_inits, mixed.inits);
  // Validation starts each task from its initialisation: k-means++ centers
  // differ from the first k points, and a mix is each in turn.
  const Model<float> model = ModelFromParams(random, params, "m");
  const double r = ValidationRatio(random, model), g = ValidationRatio(greedy, model);
  EXPECT_NE(r, g);
  TrainerOptions first_k = random;
  // Task 0 only: the mix starts it from k-means++ centers.
  greedy.validation_tasks = 1;
  mixed.validation_tasks = 1;
  EXPECT_EQ(ValidationRatio(mixed, model), ValidationRatio(greedy, model));
  mixed.validation_tasks = 2;  // and task 1 from a random subset
  first_k.validation_tasks = 2;
  greedy.validation_tasks = 2;
  EXPECT_NE(ValidationRatio(mixed, model), ValidationRatio(greedy, model));
  EXPECT_NE(ValidationRatio(mixed, model), ValidationRatio(first_k, model));
  // Training on the mix: reproducible whatever the thread count, and not the
  // run from random subsets alone.
  TrainerState two = InitialState(mixed), one = InitialState(mixed), plain = InitialState(random);
  ASSERT_TRUE(Train(mixed, 5, &two, nullptr).ok());
  ASSERT_TRUE(Train(random, 5, &plain, nullptr).ok());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ASSERT_TRUE(Train(mixed, 5, &one, nullptr).ok());
  omp_set_num_threads(threads);
  EXPECT_EQ(one.params, two.params);
  EXPECT_NE(two.params, plain.params);
}

// Tiny() on 200 points of d = 2 around three centers, in the units a user's
// features may come in: far from [0, 1], so that training sees them only
// through the global min-max map.
TrainerOptions TinyOnData() {
  TrainerOptions o = Tiny();
  Matrix<float> points(2, 200);
  Rng rng(11);
  for (int i = 0; i < 200; ++i) {
    const float center = static_cast<float>(i % 3);
    points.col(i) << 500 + 40 * center + 4 * static_cast<float>(rng.Normal()),
        -300 + 40 * center * center + 4 * static_cast<float>(rng.Normal());
  }
  o.data = std::make_shared<const Matrix<float>>(points);
  return o;
}

TEST(Trainer, OnADatasetTheSeedNamesTheWeights) {
  const TrainerOptions o = TinyOnData();
  TrainerState a = InitialState(o), b = InitialState(o);
  ASSERT_TRUE(Train(o, 20, &a, nullptr).ok());
  ASSERT_TRUE(Train(o, 20, &b, nullptr).ok());
  EXPECT_EQ(a.params, b.params);
  TrainerOptions other = o;
  other.seed = 4;
  TrainerState c = InitialState(other);
  ASSERT_TRUE(Train(other, 20, &c, nullptr).ok());
  EXPECT_NE(a.params, c.params);
  // The dataset's tasks, not generated ones.
  TrainerState generated = InitialState(Tiny());
  ASSERT_TRUE(Train(Tiny(), 20, &generated, nullptr).ok());
  EXPECT_NE(a.params, generated.params);
}

TEST(Trainer, OnADatasetTheLossGoesDownAndValidationIsFinite) {
  TrainerOptions o = TinyOnData();
  o.inits = {InitMethod::kKMeansPlusPlus, InitMethod::kRandomSubset};
  TrainerState state = InitialState(o);
  std::vector<double> losses, validation;
  ASSERT_TRUE(Train(o, o.steps, &state, [&](const StepReport& r) {
                losses.push_back(r.loss);
                if (r.validated) validation.push_back(r.validation_ratio);
              }).ok());
  // The loss is on the mapped points, 64 of them in [0, 1]^2; on the raw
  // points the noise alone (sd 4 per coordinate) would give about 64 * 32.
  EXPECT_LT(losses.front(), 64 * 2);
  const double first = std::accumulate(losses.begin(), losses.begin() + 15, 0.0);
  const double last = std::accumulate(losses.end() - 15, losses.end(), 0.0);
  EXPECT_LT(last, first);
  ASSERT_EQ(validation.size(), 3u);
  for (double v : validation) EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
}

// A learning rate that blows the weights up: the step whose loss is not
// finite is refused, and the state stays the last finite one.
TEST(Trainer, ADivergingRunStopsAtItsLastFiniteStep) {
  TrainerOptions o = Tiny();
  o.learning_rate = 1e30;
  o.clip_norm = 1e30;
  TrainerState state = InitialState(o);
  const absl::Status status = Train(o, o.steps, &state, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("the training diverged"), std::string::npos) << status;
  EXPECT_LT(state.step, o.steps);
  EXPECT_TRUE(state.params.allFinite());
  EXPECT_NE(status.message().find(absl::StrCat("weights of step ", state.step, " are kept")),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace kmt
