#include "learn/evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/padding.h"
#include "core/random.h"
#include "core/transformer.h"

namespace kmt {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// log(objective) per step; a failed run, or every step from the first
// non-finite objective on, is +inf.
std::vector<double> Logs(const absl::StatusOr<RunResult<float>>& run, int steps) {
  std::vector<double> out(steps, kInf);
  if (!run.ok()) return out;
  for (int t = 0; t < steps && t < static_cast<int>(run->layer_objectives.size()); ++t) {
    const double o = run->layer_objectives[t];
    if (!std::isfinite(o)) break;
    out[t] = std::log(o);
  }
  return out;
}

bool Finite(const std::vector<double>& logs) { return std::isfinite(logs.back()); }

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// Population standard deviation over tasks; sample standard deviation
// (n - 1) over seeds, which are few.
double Spread(const std::vector<double>& v, bool sample) {
  const double mean = Mean(v);
  if (!std::isfinite(mean)) return kInf;
  double sum = 0;
  for (double x : v) sum += (x - mean) * (x - mean);
  const double n = static_cast<double>(v.size());
  return std::sqrt(sum / (sample ? n - 1 : n));
}

StepSummary Summary(const std::vector<std::vector<double>>& samples, int steps, bool sample) {
  StepSummary s{std::vector<double>(steps), std::vector<double>(steps)};
  for (int t = 0; t < steps; ++t) {
    std::vector<double> at;
    for (const auto& x : samples) at.push_back(x[t]);
    s.mean[t] = Mean(at);
    s.sd[t] = Spread(at, sample);
  }
  return s;
}

// Per step, the mean over tasks.
std::vector<double> TaskMean(const StepLogs& logs, int steps) {
  std::vector<double> mean(steps, 0.0);
  for (int t = 0; t < steps; ++t) {
    for (const auto& task : logs) mean[t] += task[t] / static_cast<double>(logs.size());
  }
  return mean;
}

std::vector<double> Minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] - b[i];
  return out;
}

}  // namespace

std::vector<Scenario> PaperScenarios(const TaskOptions& base) {
  std::vector<Scenario> all;
  const auto add = [&](std::string name, std::string description, auto change) {
    Scenario s{std::move(name), std::move(description), base};
    change(s);
    all.push_back(std::move(s));
  };
  add("random", "training distribution, random-subset init", [](Scenario&) {});
  add("kmeans++", "greedy k-means++ init",
      [](Scenario& s) { s.init = InitMethod::kKMeansPlusPlus; });
  add("plain-kmeans++", "plain k-means++ init",
      [](Scenario& s) { s.init = InitMethod::kPlainKMeansPlusPlus; });
  for (int n : {128, 256, 1024, 2048}) {
    add(absl::StrCat("n", n), absl::StrCat("n = ", n), [n](Scenario& s) { s.tasks.n = n; });
  }
  add("unequal", "unequal mixture weights", [](Scenario& s) { s.tasks.equal_weights = false; });
  add("anisotropic", absl::StrFormat("anisotropic scales, %g U(0, 1)", base.scale),
      [](Scenario& s) { s.tasks.isotropic = false; });
  add("half-scale", absl::StrFormat("half scale, %g", base.scale / 2),
      [](Scenario& s) { s.tasks.scale /= 2; });
  add("double-scale", absl::StrFormat("double scale, %g", base.scale * 2),
      [](Scenario& s) { s.tasks.scale *= 2; });
  add("raw", "training distribution, not min-max scaled",
      [](Scenario& s) { s.tasks.min_max_scale = false; });
  add("anisotropic-raw", "anisotropic scales, not min-max scaled", [](Scenario& s) {
    s.tasks.isotropic = false;
    s.tasks.min_max_scale = false;
  });
  add("unequal-dimensions", "dimensions scaled by U(0.5, 50), offsets U(-100, 100)",
      [](Scenario& s) { s.tasks.unequal_dimensions = true; });
  for (Family f :
       {Family::kNormal, Family::kLaplace, Family::kGumbel, Family::kLognormal, Family::kCauchy}) {
    if (f == base.family) continue;
    const std::string name(FamilyName(f));
    add(name, name + " noise", [f](Scenario& s) { s.tasks.family = f; });
  }
  return all;
}

Scenario DataScenario(std::string name, std::shared_ptr<const Matrix<float>> points, int n, int k,
                      InitMethod init) {
  Scenario s;
  s.description =
      absl::StrCat(name, ", ", points->cols(), " points, ", InitMethodName(init), " init");
  s.name = std::move(name);
  s.tasks = {.n = n, .d = static_cast<int>(points->rows()), .k = k};
  s.init = init;
  s.data = std::move(points);
  return s;
}

Matrix<float> DataTask(const Matrix<float>& points, int n, uint64_t seed) {
  const Eigen::Index total = points.cols();
  const Eigen::Index size = std::min<Eigen::Index>(n, total);
  std::vector<Eigen::Index> order(total);
  for (Eigen::Index i = 0; i < total; ++i) order[i] = i;
  // The first `size` steps of a Fisher-Yates shuffle.
  Rng rng(seed);
  Matrix<float> task(points.rows(), size);
  for (Eigen::Index i = 0; i < size; ++i) {
    std::swap(order[i], order[i + static_cast<Eigen::Index>(rng.Below(total - i))]);
    task.col(i) = points.col(order[i]);
  }
  return task;
}

SeedLogs EvaluateSeed(const Scenario& scenario, const std::vector<Model<float>>& models, int tasks,
                      int steps, uint64_t seed) {
  SeedLogs logs{StepLogs(tasks), std::vector<StepLogs>(models.size(), StepLogs(tasks))};
#pragma omp parallel for schedule(dynamic)
  for (int t = 0; t < tasks; ++t) {
    const Matrix<float> points = scenario.data
                                     ? DataTask(*scenario.data, scenario.tasks.n, seed + t)
                                     : GenerateTask<float>(scenario.tasks, seed + t).points;
    const Matrix<float> init = *InitialCenters(points, scenario.tasks.k, scenario.init, seed + t);
    logs.lloyd[t] = Logs(RunLloyd<float>({}, points, init, {.layers = steps}), steps);
    for (size_t m = 0; m < models.size(); ++m) {
      // Tasks below a model's d and k run padded (core/padding.h).
      logs.models[m][t] = Logs(RunPadded(models[m], points, init, {.layers = steps}), steps);
    }
  }
  return logs;
}

ScenarioSummary Summarise(const std::vector<SeedLogs>& per_seed) {
  ScenarioSummary out;
  out.seeds = static_cast<int>(per_seed.size());
  const int steps = static_cast<int>(per_seed[0].lloyd[0].size());
  const size_t models = per_seed[0].models.size();
  out.diverged.assign(models, 0);
  for (const SeedLogs& s : per_seed) {
    for (size_t m = 0; m < models; ++m) {
      for (const auto& task : s.models[m]) out.diverged[m] += Finite(task) ? 0 : 1;
    }
  }
  if (per_seed.size() == 1) {
    const SeedLogs& s = per_seed[0];
    out.lloyd = Summary(s.lloyd, steps, false);
    for (size_t m = 0; m < models; ++m) {
      out.models.push_back(Summary(s.models[m], steps, false));
      std::vector<std::vector<double>> differences;
      for (size_t t = 0; t < s.lloyd.size(); ++t) {
        differences.push_back(Minus(s.models[m][t], s.lloyd[t]));
      }
      out.differences.push_back(Summary(differences, steps, false));
    }
    return out;
  }
  std::vector<std::vector<double>> lloyd;
  for (const SeedLogs& s : per_seed) lloyd.push_back(TaskMean(s.lloyd, steps));
  out.lloyd = Summary(lloyd, steps, true);
  for (size_t m = 0; m < models; ++m) {
    std::vector<std::vector<double>> model, differences;
    for (size_t i = 0; i < per_seed.size(); ++i) {
      model.push_back(TaskMean(per_seed[i].models[m], steps));
      differences.push_back(Minus(model.back(), lloyd[i]));
    }
    out.models.push_back(Summary(model, steps, true));
    out.differences.push_back(Summary(differences, steps, true));
  }
  return out;
}

HandOverChoice ChooseHandOver(const Model<float>& model,
                              const std::shared_ptr<const Matrix<float>>& rows, int n,
                              const std::vector<InitMethod>& inits, int tasks, int steps,
                              uint64_t seed, const std::vector<int>& candidates) {
  std::vector<Model<float>> models;
  for (const int after : candidates) {
    models.push_back(model);
    models.back().lloyd_after = after;
  }
  // Per init and candidate, the gain and its standard error after `steps`.
  std::vector<std::vector<double>> gain(inits.size()), error(inits.size());
  for (size_t i = 0; i < inits.size(); ++i) {
    const Scenario scenario = DataScenario("validation", rows, n, model.k, inits[i]);
    const ScenarioSummary summary = Summarise({EvaluateSeed(scenario, models, tasks, steps, seed)});
    for (size_t c = 0; c < candidates.size(); ++c) {
      gain[i].push_back(summary.differences[c].mean.back());
      error[i].push_back(summary.differences[c].sd.back() / std::sqrt(static_cast<double>(tasks)));
    }
  }
  size_t best = 0;
  for (size_t c = 1; c < candidates.size(); ++c) {
    if (gain[0][c] < gain[0][best]) best = c;
  }
  HandOverChoice choice{.lloyd_after = candidates[best]};
  for (size_t i = 0; i < inits.size(); ++i) {
    choice.gain.push_back(gain[i][best]);
    choice.standard_error.push_back(error[i][best]);
  }
  choice.ahead = choice.gain[0] + 2 * choice.standard_error[0] < -kMeaningfulGain;
  return choice;
}

}  // namespace kmt
