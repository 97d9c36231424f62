// What a learned model can do for a batch above the dense limit: a learned
// model's point-to-point block is n x n, so the server refuses it batches
// over --max_dense_points. One way around is to run it on a uniform sample
// and let exact Lloyd's finish from its centers on all the points. This
// program measures that against exact Lloyd's from k-means++ on all the
// points, through the engine the server runs, on large tasks of the
// training distribution, and prints a Markdown table of mean log objectives
// (lower is better).
//   build/bench/large_batch_table [--model=models/learned-onehot-d32-k10.kmt]
//       [--n=100000] [--sample=512] [--tasks=30] [--seed=5000003]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "base/command_line.h"
#include "core/engine.h"
#include "core/engine_flags.h"
#include "learn/task_generator.h"
#include "proto/model_file.h"

ABSL_FLAG(std::string, model, "models/learned-onehot-d32-k10.kmt", "the learned model file");
ABSL_FLAG(int, n, 100000, "points per task");
ABSL_FLAG(int, sample, 512, "points of the sample the learned model runs on");
ABSL_FLAG(int, tasks, 30, "tasks");
ABSL_FLAG(uint64_t, seed, 5000003, "task t is drawn with seed + t");

namespace kmt {
namespace {

constexpr int kLayers = 20;

struct Options {
  std::string model;
  int n = 0;
  int sample = 0;
  int tasks = 0;
  uint64_t seed = 0;
};

Batch<float> MakeBatch(BatchSpec<float> spec) {
  absl::StatusOr<Batch<float>> batch = Batch<float>::Validate(std::move(spec));
  if (!batch.ok()) {
    std::fprintf(stderr, "%s\n", std::string(batch.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(batch);
}

RunResult<float> Run(const ServedModel<float>& model, BatchSpec<float> spec) {
  absl::StatusOr<RunResult<float>> run = Cluster(model, MakeBatch(std::move(spec)));
  if (!run.ok()) {
    std::fprintf(stderr, "%s: %s\n", model.name().c_str(),
                 std::string(run.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(run);
}

int Main(const Options& o) {
  absl::StatusOr<Model<float>> weights = ReadModel<float>(o.model);
  if (!weights.ok()) {
    std::fprintf(stderr, "%s\n", std::string(weights.status().message()).c_str());
    return 1;
  }
  const int d = weights->d, k = weights->k;
  const ServedModel<float> learned = *ServedModel<float>::FromWeights(*weights, "");
  const ServedModel<float> lloyd = ExactModels<float>()[0];

  // Each method maps a task's points (d x n) and seed to the final centers'
  // run on all the points.
  struct Method {
    const char* name;
    std::function<RunResult<float>(const Matrix<float>&, uint64_t)> run;
  };
  const auto finish = [&](const Matrix<float>& points, const Matrix<float>& centers) {
    return Run(lloyd, {.points = points, .k = k, .layers = kLayers, .given_centers = centers});
  };
  // The points are drawn in random order: the first `sample` are a uniform
  // sample.
  const auto sample = [&](const Matrix<float>& points) { return points.leftCols(o.sample); };
  const std::vector<Method> methods = {
      {"Lloyd's from greedy k-means++ (all points)",
       [&](const Matrix<float>& points, uint64_t seed) {
         return Run(lloyd, {.points = points,
                            .k = k,
                            .layers = kLayers,
                            .init = InitMethod::kKMeansPlusPlus,
                            .seed = seed});
       }},
      {"Lloyd's from a random subset (all points)",
       [&](const Matrix<float>& points, uint64_t seed) {
         return Run(lloyd, {.points = points,
                            .k = k,
                            .layers = kLayers,
                            .init = InitMethod::kRandomSubset,
                            .seed = seed});
       }},
      {"learned on the sample (its default init), then Lloyd's (all points)",
       [&](const Matrix<float>& points, uint64_t seed) {
         const RunResult<float> on_sample =
             Run(learned, {.points = sample(points), .k = k, .layers = kLayers, .seed = seed});
         return finish(points, on_sample.centers);
       }},
      {"learned on the sample from greedy k-means++, then Lloyd's (all points)",
       [&](const Matrix<float>& points, uint64_t seed) {
         const RunResult<float> on_sample = Run(learned, {.points = sample(points),
                                                          .k = k,
                                                          .layers = kLayers,
                                                          .init = InitMethod::kKMeansPlusPlus,
                                                          .seed = seed});
         return finish(points, on_sample.centers);
       }},
      {"Lloyd's on the sample from greedy k-means++, then Lloyd's (all points)",
       [&](const Matrix<float>& points, uint64_t seed) {
         const RunResult<float> on_sample = Run(lloyd, {.points = sample(points),
                                                        .k = k,
                                                        .layers = kLayers,
                                                        .init = InitMethod::kKMeansPlusPlus,
                                                        .seed = seed});
         return finish(points, on_sample.centers);
       }},
  };

  // logs[m][t]: log objective of method m on task t, on all the points.
  std::vector<std::vector<double>> logs(methods.size(), std::vector<double>(o.tasks));
  for (int t = 0; t < o.tasks; ++t) {
    const uint64_t seed = o.seed + t;
    const Matrix<float> points = GenerateTask<float>({.n = o.n, .d = d, .k = k}, seed).points;
    for (size_t m = 0; m < methods.size(); ++m) {
      logs[m][t] = std::log(methods[m].run(points, seed).objective);
    }
    std::fprintf(stderr, "\rtask %d/%d", t + 1, o.tasks);
  }
  std::fprintf(stderr, "\n");

  const auto mean_sd = [](const std::vector<double>& x) {
    double mean = 0, sq = 0;
    for (double v : x) mean += v;
    mean /= x.size();
    for (double v : x) sq += (v - mean) * (v - mean);
    return std::pair{mean, x.size() > 1 ? std::sqrt(sq / (x.size() - 1)) : 0.0};
  };
  std::printf(
      "%d tasks of the training distribution (normal mixtures, scale 0.1, min-max scaled), "
      "n = %d, d = %d, k = %d; T = %d everywhere; sample of %d points; model %s\n\n",
      o.tasks, o.n, d, k, kLayers, o.sample, weights->name.c_str());
  std::printf("| method | mean log objective | − first row | tasks better / worse |\n");
  std::printf("|---|---|---|---|\n");
  for (size_t m = 0; m < methods.size(); ++m) {
    std::vector<double> diff(o.tasks);
    int better = 0, worse = 0;
    for (int t = 0; t < o.tasks; ++t) {
      diff[t] = logs[m][t] - logs[0][t];
      better += diff[t] < -1e-9;
      worse += diff[t] > 1e-9;
    }
    const auto [mean, sd] = mean_sd(logs[m]);
    const auto [dmean, dsd] = mean_sd(diff);
    std::printf("| %s | %.4f ± %.4f | %+.4f ± %.4f | %d / %d |\n", methods[m].name, mean, sd, dmean,
                dsd, better, worse);
  }
  return 0;
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::ParseCommandLine(
      "Measures a learned model on a sample with exact Lloyd's finishing on all the points\n"
      "against Lloyd's from k-means++ on all the points; prints a Markdown table.",
      argc, argv, kmt::EngineFlags());
  const kmt::Options o{.model = absl::GetFlag(FLAGS_model),
                       .n = absl::GetFlag(FLAGS_n),
                       .sample = absl::GetFlag(FLAGS_sample),
                       .tasks = absl::GetFlag(FLAGS_tasks),
                       .seed = absl::GetFlag(FLAGS_seed)};
  if (o.tasks < 1 || o.sample < 1 || o.n < o.sample) {
    std::fprintf(stderr, "need --tasks >= 1 and 1 <= --sample <= --n\n");
    return 2;
  }
  return kmt::Main(o);
}
