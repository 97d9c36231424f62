// Trains the one-layer k-means transformer (docs/learning.md) on a distribution
// of clustering tasks: each step draws a batch of tasks, runs one layer from
// the tasks' initial centers (their first k points, or k-means++ ones), and takes an Adam step on
// the smoothed objective of the resulting centers, with gradient-norm clipping and the learning
// rate halved when the validation ratio stops improving. Seeded and reproducible: the same options
// give the same weights whatever the thread count, and a run resumed from a saved state equals one
// never interrupted.
#ifndef KMT_LEARN_TRAINER_H_
#define KMT_LEARN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "core/init.h"
#include "core/model.h"
#include "learn/smoothed_objective.h"
#include "learn/task_generator.h"

namespace kmt {

struct TrainerOptions {
  TaskOptions tasks;                         ///< the task distribution (n = 512, d = 32, k = 10)
  Embedding embedding = Embedding::kOneHot;  ///< register layout
  int64_t steps = 10000;                     ///< optimiser steps in all
  int batch = 32;                            ///< tasks per step
  double learning_rate = 0.01;               ///< Adam's initial step size
  double beta1 = 0.9;                        ///< Adam's first-moment decay
  double beta2 = 0.999;                      ///< Adam's second-moment decay
  double epsilon = 1e-8;                     ///< Adam's denominator guard
  double clip_norm = 1.0;                    ///< largest gradient norm applied
  double tau = 0.1;                          ///< loss temperature
  LossForm loss = LossForm::kSoftmax;        ///< loss weights: softmax or sparsemax
  int eval_every = 200;                      ///< steps between validation runs
  int validation_tasks = 64;                 ///< held-out tasks for the validation ratio
  int patience = 5;                          ///< validations without improvement before halving
  uint64_t seed = 1;                         ///< weights, tasks and validation tasks
  /// Initial centers of the tasks: task i of a step (and validation task i)
  /// starts from inits[i % inits.size()]; the model records them, the first
  /// as its default. A random subset is the task's first k points.
  std::vector<InitMethod> inits = {InitMethod::kRandomSubset};
  /// d x N points of a user's dataset (the rows it may train on): if set, a
  /// task, for training and validation alike, is tasks.n of them drawn
  /// without replacement (DataTask) and mapped by the global min-max map, as
  /// the server maps a batch for the model, instead of a generated task;
  /// tasks.d must be its d. Default: none
  std::shared_ptr<const Matrix<float>> data;
  /// Each task of a random size within tasks.d and tasks.k (DrawTaskSize),
  /// its points zero-padded to tasks.d and its centers run as the first of
  /// tasks.k clusters, as a padded model serves them (core/padding.h); the
  /// loss is the task's own, in its d dimensions; not with data (whose d is
  /// fixed); default false
  bool random_sizes = false;
};

struct TrainerState {
  Vector<double> params;       ///< all weights, flattened (see ModelFromParams)
  Vector<double> adam_m;       ///< Adam first moments
  Vector<double> adam_v;       ///< Adam second moments
  int64_t step = 0;            ///< steps taken
  double learning_rate = 0;    ///< current step size
  double best_validation = 0;  ///< best validation ratio so far (lower is better)
  int evals_since_best = 0;    ///< validations since the best one
};

struct StepReport {
  int64_t step = 0;          ///< steps taken, this one included
  double loss = 0;           ///< batch mean of the smoothed objective
  double gradient_norm = 0;  ///< before clipping
  double learning_rate = 0;  ///< used for this step
  bool validated = false;    ///< whether this step ran validation
  double validation_ratio =
      0;  ///< mean over held-out tasks of objective(model) / objective(Lloyd's step)
};

// Fresh weights, drawn uniformly in +-1/sqrt(dim) from the seed.
TrainerState InitialState(const TrainerOptions& options);

// The served model for these weights: one looped layer with re-embedding.
Model<float> ModelFromParams(const TrainerOptions& options, const Vector<double>& params,
                             const std::string& name);

// Runs steps until state->step reaches `until` (at most options.steps),
// calling `report` after each. A step whose loss or gradient is not finite
// (the training diverged) is not taken: the state stays that of the step
// before, and the error says so.
absl::Status Train(const TrainerOptions& options, int64_t until, TrainerState* state,
                   const std::function<void(const StepReport&)>& report);

// The validation ratio of a model on `tasks` held-out tasks from the
// options' distribution (the same tasks for a given seed); infinite where
// the model's run fails on a task (its weights move the centers beyond
// finite values).
double ValidationRatio(const TrainerOptions& options, const Model<float>& model);

}  // namespace kmt

#endif  // KMT_LEARN_TRAINER_H_
