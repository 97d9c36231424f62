// Held-out evaluation of k-means transformers against Lloyd's, in the
// scenarios the papers evaluate learned models on. For one scenario and one
// seed, `tasks` tasks are drawn; every model runs T = 1..steps steps and
// Lloyd's `steps` iterations from the same initial centers, and each run's
// log(k-means objective) after each step is kept. Over several seeds, each
// seed's mean over its tasks is one sample, and the spread is over seeds.
#ifndef KMT_LEARN_EVALUATION_H_
#define KMT_LEARN_EVALUATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/init.h"
#include "core/model.h"
#include "learn/task_generator.h"

namespace kmt {

struct Scenario {
  std::string name;                             ///< as kmt-eval's --scenarios names it
  std::string description;                      ///< for tables and figures
  TaskOptions tasks;                            ///< the task distribution
  InitMethod init = InitMethod::kRandomSubset;  ///< how the initial centers are chosen
  /// d x N points of a dataset: if set, a task is tasks.n of them drawn
  /// without replacement (all N, shuffled, if N <= tasks.n) instead of a
  /// generated task.
  std::shared_ptr<const Matrix<float>> data;
};

// Tasks from a dataset's points (d x N), each a random subset of n of them,
// initial centers by `init`.
Scenario DataScenario(std::string name, std::shared_ptr<const Matrix<float>> points, int n, int k,
                      InitMethod init);

// The points of a data scenario's task `seed`: min(n, N) of the dataset's
// columns, drawn without replacement in random order.
Matrix<float> DataTask(const Matrix<float>& points, int n, uint64_t seed);

// Every scenario, around the training distribution `base` (its n, d, k,
// scale and family): the training distribution itself; each initialisation;
// other n; unequal weights; anisotropic scales; half and double the scale;
// the training distribution and anisotropic scales without the generator's
// min-max step (a model's own input map does the scaling); dimensions of
// unequal scales and offsets; each other family.
std::vector<Scenario> PaperScenarios(const TaskOptions& base);

// log(objective) after each step: runs[task][t] for t = 0..steps-1. A run
// whose objective is not finite (or that fails) counts as +inf from then on.
using StepLogs = std::vector<std::vector<double>>;

struct SeedLogs {
  StepLogs lloyd;                ///< Lloyd's from the same initial centers
  std::vector<StepLogs> models;  ///< per model, in the order given
};

// Tasks seed, seed + 1, ..., seed + tasks - 1 of the scenario; a model runs
// a task below its d and k padded (core/padding.h).
SeedLogs EvaluateSeed(const Scenario& scenario, const std::vector<Model<float>>& models, int tasks,
                      int steps, uint64_t seed);

// Mean and spread per step. Over one seed the spread is the standard
// deviation over tasks; over several, the sample standard deviation over
// seeds of each seed's mean over its tasks.
struct StepSummary {
  std::vector<double> mean, sd;
};

struct ScenarioSummary {
  int seeds = 0;
  StepSummary lloyd;
  std::vector<StepSummary> models;
  /// Per model, the model's log objective minus Lloyd's (task by task over
  /// one seed; seed mean minus seed mean over several).
  std::vector<StepSummary> differences;
  std::vector<int> diverged;  ///< per model, runs (over all seeds) with a non-finite objective
};

ScenarioSummary Summarise(const std::vector<SeedLogs>& per_seed);

// A model trained on a dataset, measured on its validation rows against
// Lloyd's from the same starts: `tasks` tasks of n of the rows, from each of
// `inits` (the starts it is served with), `steps` steps each, for each
// hand-over layer (Model::lloyd_after) in `candidates`. The one chosen has
// the lowest mean gain from the first init (the model's default), the
// lowest layer among equal ones.
struct HandOverChoice {
  int lloyd_after = 0;
  /// Per init, at the chosen hand-over: the mean over tasks of the model's
  /// log objective minus Lloyd's after `steps` steps (negative: ahead), and
  /// its standard error (the tasks' standard deviation over sqrt(tasks)).
  std::vector<double> gain, standard_error;
  /// Ahead of Lloyd's from the first init: the gain plus two standard
  /// errors below -kMeaningfulGain.
  bool ahead = false;
};

// The least gain that counts as ahead: a tenth of a percent of the
// objective. Below it a model is as good as Lloyd's (a run that hands over
// at once, or tasks every start solves alike, differ from Lloyd's by
// round-off, with a standard error as small).
inline constexpr double kMeaningfulGain = 1e-3;

HandOverChoice ChooseHandOver(const Model<float>& model,
                              const std::shared_ptr<const Matrix<float>>& rows, int n,
                              const std::vector<InitMethod>& inits, int tasks, int steps,
                              uint64_t seed, const std::vector<int>& candidates);

}  // namespace kmt

#endif  // KMT_LEARN_EVALUATION_H_
