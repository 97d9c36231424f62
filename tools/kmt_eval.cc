// kmt-eval: held-out evaluation of learned k-means transformers against
// Lloyd's. For each scenario (the training distribution, k-means++ init,
// other n, unequal weights, anisotropic scales, other noise families) it draws
// held-out tasks, runs every model for T = 1..T re-embedded steps and Lloyd's
// for T iterations from the same initial centers, and reports the mean (and
// spread) over tasks of log(objective). Writes a Markdown table and an SVG
// plot of the objective against the step, and, for a models-by-scenarios
// view such as the cross-family matrix, the per-task difference from
// Lloyd's at step T as a table and an SVG heatmap.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "core/init.h"
#include "core/transformer.h"
#include "learn/task_generator.h"
#include "proto/model_file.h"

ABSL_FLAG(std::vector<std::string>, models, {}, "model files (*.kmt) to evaluate");
ABSL_FLAG(int, tasks, 320, "held-out tasks per scenario");
ABSL_FLAG(int, steps, 20, "steps T (layers; Lloyd's iterations)");
ABSL_FLAG(std::vector<std::string>, scenarios, {},
          "scenarios to run (default all): random, kmeans++, n128, n256, n1024, n2048, "
          "unequal, anisotropic, laplace, gumbel, lognormal, cauchy");
ABSL_FLAG(uint64_t, seed, 1000003, "seed of the held-out tasks (unlike any training seed)");
ABSL_FLAG(std::string, out_md, "", "Markdown table to write (default: stdout only)");
ABSL_FLAG(std::string, out_svg, "", "SVG plot of mean log objective against step, first scenario");
ABSL_FLAG(std::string, out_matrix_md, "",
          "Markdown table, models by scenarios, of log(objective) minus Lloyd's at step T");
ABSL_FLAG(std::string, out_matrix_svg, "", "SVG heatmap of the same table");

namespace kmt {
namespace {

struct Scenario {
  std::string name;
  std::string description;
  TaskOptions tasks;
  InitMethod init = InitMethod::kRandomSubset;
};

std::vector<Scenario> Scenarios(const TaskOptions& base) {
  std::vector<Scenario> all;
  const auto add = [&](std::string name, std::string description, auto change) {
    Scenario s{std::move(name), std::move(description), base};
    change(s);
    all.push_back(std::move(s));
  };
  add("random", "training distribution, random-subset init", [](Scenario&) {});
  add("kmeans++", "k-means++ init (trained on random init)",
      [](Scenario& s) { s.init = InitMethod::kKMeansPlusPlus; });
  for (int n : {128, 256, 1024, 2048}) {
    add(absl::StrCat("n", n), absl::StrCat("n = ", n), [n](Scenario& s) { s.tasks.n = n; });
  }
  add("unequal", "unequal mixture weights", [](Scenario& s) { s.tasks.equal_weights = false; });
  add("anisotropic", "anisotropic scales", [](Scenario& s) { s.tasks.isotropic = false; });
  for (Family f : {Family::kLaplace, Family::kGumbel, Family::kLognormal, Family::kCauchy}) {
    const std::string name(FamilyName(f));
    add(name, name + " noise", [f](Scenario& s) { s.tasks.family = f; });
  }
  return all;
}

// Mean and standard deviation over tasks of log objective, per step.
struct Curve {
  std::vector<double> mean, sd;
};

struct Result {
  Curve lloyd;
  std::vector<Curve> models;
  /// Per model, log(model objective) - log(Lloyd's objective) task by task
  /// (same tasks, same initial centers).
  std::vector<Curve> differences;
};

Curve Summarise(const std::vector<std::vector<double>>& logs, int steps) {
  Curve c{std::vector<double>(steps, 0), std::vector<double>(steps, 0)};
  const double n = static_cast<double>(logs.size());
  for (int t = 0; t < steps; ++t) {
    for (const auto& task : logs) c.mean[t] += task[t] / n;
    for (const auto& task : logs) c.sd[t] += (task[t] - c.mean[t]) * (task[t] - c.mean[t]) / n;
    c.sd[t] = std::sqrt(c.sd[t]);
  }
  return c;
}

Result Evaluate(const Scenario& s, const std::vector<Model<float>>& models, int tasks, int steps,
                uint64_t seed) {
  std::vector<std::vector<double>> lloyd(tasks);
  std::vector<std::vector<std::vector<double>>> learned(models.size(),
                                                        std::vector<std::vector<double>>(tasks));
#pragma omp parallel for schedule(dynamic)
  for (int t = 0; t < tasks; ++t) {
    const Matrix<float> points = GenerateTask<float>(s.tasks, seed + t).points;
    const Matrix<float> init = *InitialCenters(points, s.tasks.k, s.init, seed + t);
    const auto logs = [](const RunResult<float>& r) {
      std::vector<double> out;
      for (double o : r.layer_objectives) out.push_back(std::log(o));
      return out;
    };
    lloyd[t] = logs(*RunLloyd<float>({}, points, init, {.layers = steps}));
    for (size_t m = 0; m < models.size(); ++m) {
      learned[m][t] = logs(*RunTransformer(models[m], points, init, {.layers = steps}));
    }
  }
  Result r{Summarise(lloyd, steps), {}, {}};
  for (const auto& m : learned) {
    r.models.push_back(Summarise(m, steps));
    std::vector<std::vector<double>> diff = m;
    for (int t = 0; t < tasks; ++t) {
      for (int step = 0; step < steps; ++step) diff[t][step] -= lloyd[t][step];
    }
    r.differences.push_back(Summarise(diff, steps));
  }
  return r;
}

std::string Cell(const Curve& c, int t) {
  return absl::StrFormat("%.3f ± %.3f", c.mean[t], c.sd[t]);
}

std::string Table(const std::vector<Scenario>& scenarios, const std::vector<Result>& results,
                  const std::vector<Model<float>>& models, int steps) {
  std::string header = "| scenario | Lloyd's T=1 | Lloyd's T=" + std::to_string(steps);
  std::string rule = "|---|---|---";
  for (const Model<float>& m : models) {
    absl::StrAppend(&header, " | ", m.name, " T=1 | ", m.name, " T=", steps);
    absl::StrAppend(&rule, "|---|---");
  }
  std::string out = header + " |\n" + rule + "|\n";
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const Result& r = results[i];
    absl::StrAppend(&out, "| ", scenarios[i].description, " | ", Cell(r.lloyd, 0), " | ",
                    Cell(r.lloyd, steps - 1));
    for (const Curve& c : r.models) {
      absl::StrAppend(&out, " | ", Cell(c, 0), " | ", Cell(c, steps - 1));
    }
    absl::StrAppend(&out, " |\n");
  }
  return out;
}

// A line chart of mean log objective against step: Lloyd's and each model.
std::string Svg(const Scenario& s, const Result& r, const std::vector<Model<float>>& models,
                int steps) {
  std::vector<std::pair<std::string, const Curve*>> lines = {{"Lloyd's", &r.lloyd}};
  for (size_t m = 0; m < models.size(); ++m) lines.push_back({models[m].name, &r.models[m]});
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& [name, c] : lines) {
    for (double v : c->mean) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  const double pad = 0.05 * (hi - lo + 1e-9);
  lo -= pad;
  hi += pad;
  const int w = 640, h = 400, left = 70, right = 200, top = 40, bottom = 50;
  const auto x = [&](int t) { return left + (w - left - right) * t / std::max(1.0, steps - 1.0); };
  const auto y = [&](double v) { return top + (h - top - bottom) * (hi - v) / (hi - lo); };
  const char* colors[] = {"#444444", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%d\" y=\"22\" font-size=\"14\">Mean log k-means objective, "
      "%s</text>\n",
      w, h, left, s.description);
  absl::StrAppend(
      &svg, absl::StrFormat("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
                            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n",
                            left, h - bottom, w - right, h - bottom, left, top, left, h - bottom));
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4;
    absl::StrAppend(&svg,
                    absl::StrFormat("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.3f</text>\n",
                                    left - 6, y(v) + 4, v));
  }
  for (int t = 0; t < steps; t += std::max(1, steps / 5)) {
    absl::StrAppend(
        &svg, absl::StrFormat("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x(t),
                              h - bottom + 18, t + 1));
  }
  absl::StrAppend(&svg,
                  absl::StrFormat("<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step T</text>\n",
                                  (left + w - right) / 2, h - 10));
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string points;
    for (int t = 0; t < steps; ++t) {
      absl::StrAppend(&points, absl::StrFormat("%.1f,%.1f ", x(t), y(lines[i].second->mean[t])));
    }
    const char* color = colors[i % 6];
    absl::StrAppend(
        &svg,
        absl::StrFormat("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n"
                        "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n",
                        color, points, w - right + 10, top + 18 * static_cast<int>(i + 1), color,
                        lines[i].first));
  }
  return svg + "</svg>\n";
}

// Models (rows) by scenarios (columns): mean ± sd over tasks of
// log(model objective) - log(Lloyd's objective) at the last step.
std::string MatrixTable(const std::vector<Scenario>& scenarios, const std::vector<Result>& results,
                        const std::vector<Model<float>>& models, int steps) {
  std::string out = "| model |";
  std::string rule = "|---|";
  for (const Scenario& s : scenarios) {
    absl::StrAppend(&out, " ", s.name, " |");
    absl::StrAppend(&rule, "---|");
  }
  absl::StrAppend(&out, "\n", rule, "\n");
  for (size_t m = 0; m < models.size(); ++m) {
    absl::StrAppend(&out, "| ", models[m].name, " |");
    for (const Result& r : results) {
      const Curve& c = r.differences[m];
      absl::StrAppend(&out, absl::StrFormat(" %+.3f ± %.3f |", c.mean[steps - 1], c.sd[steps - 1]));
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

// The same means as a heatmap: blue where a model beats Lloyd's, red where
// it loses, white at zero, colour scaled by the largest magnitude.
std::string MatrixSvg(const std::vector<Scenario>& scenarios, const std::vector<Result>& results,
                      const std::vector<Model<float>>& models, int steps, int tasks) {
  double extent = 1e-9;
  for (const Result& r : results) {
    for (const Curve& c : r.differences) extent = std::max(extent, std::abs(c.mean[steps - 1]));
  }
  const int left = 260, top = 70, cell_w = 110, cell_h = 40;
  const int w = left + cell_w * static_cast<int>(scenarios.size()) + 20;
  const int h = top + cell_h * static_cast<int>(models.size()) + 50;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"10\" y=\"22\" font-size=\"14\">Mean log objective minus "
      "Lloyd's at T = %d, %d tasks per scenario (blue: better than Lloyd's)</text>\n"
      "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">evaluated on</text>\n",
      w, h, steps, tasks, left + cell_w * static_cast<int>(scenarios.size()) / 2, top - 30);
  for (size_t j = 0; j < scenarios.size(); ++j) {
    absl::StrAppend(&svg,
                    absl::StrFormat("<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                                    left + cell_w * static_cast<int>(j) + cell_w / 2, top - 8,
                                    scenarios[j].name));
  }
  for (size_t m = 0; m < models.size(); ++m) {
    const int y = top + cell_h * static_cast<int>(m);
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n",
                                          left - 8, y + cell_h / 2 + 4, models[m].name));
    for (size_t j = 0; j < results.size(); ++j) {
      const double v = results[j].differences[m].mean[steps - 1];
      // 0 is white; -extent full blue (33, 102, 172), +extent full red (178, 24, 43).
      const double a = std::min(1.0, std::abs(v) / extent);
      const int r = static_cast<int>(std::lround(255 + a * ((v < 0 ? 33 : 178) - 255)));
      const int g = static_cast<int>(std::lround(255 + a * ((v < 0 ? 102 : 24) - 255)));
      const int b = static_cast<int>(std::lround(255 + a * ((v < 0 ? 172 : 43) - 255)));
      const int x = left + cell_w * static_cast<int>(j);
      absl::StrAppend(
          &svg, absl::StrFormat(
                    "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                    "fill=\"rgb(%d,%d,%d)\" stroke=\"white\"/>\n"
                    "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%+.3f</text>\n",
                    x, y, cell_w, cell_h, r, g, b, x + cell_w / 2, y + cell_h / 2 + 4,
                    a > 0.6 ? "white" : "black", v));
    }
  }
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"10\" y=\"%d\">rows: models; "
                                        "colours scaled to ±%.3f</text>\n</svg>\n",
                                        h - 16, extent));
  return svg;
}

absl::Status Run() {
  std::vector<Model<float>> models;
  for (const std::string& path : absl::GetFlag(FLAGS_models)) {
    absl::StatusOr<v1::ModelFile> file = ReadModelFile(path);
    if (!file.ok()) return file.status();
    absl::StatusOr<Model<float>> model = ModelFromProto<float>(*file);
    if (!model.ok()) return model.status();
    models.push_back(*std::move(model));
  }
  if (models.empty()) return absl::InvalidArgumentError("--models names no model file");
  for (const Model<float>& m : models) {
    if (m.d != models[0].d || m.k != models[0].k) {
      return absl::InvalidArgumentError("all models must share d and k");
    }
  }
  TaskOptions base{.d = models[0].d, .k = models[0].k};
  std::vector<Scenario> scenarios;
  const std::vector<std::string> wanted = absl::GetFlag(FLAGS_scenarios);
  for (const Scenario& s : Scenarios(base)) {
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), s.name) != wanted.end()) {
      scenarios.push_back(s);
    }
  }
  if (scenarios.empty()) return absl::InvalidArgumentError("--scenarios matches none");
  const int tasks = absl::GetFlag(FLAGS_tasks), steps = absl::GetFlag(FLAGS_steps);
  std::vector<Result> results;
  for (const Scenario& s : scenarios) {
    std::fprintf(stderr, "%s...\n", s.description.c_str());
    results.push_back(Evaluate(s, models, tasks, steps, absl::GetFlag(FLAGS_seed)));
  }
  const std::string table = Table(scenarios, results, models, steps);
  std::printf("mean ± sd over %d held-out tasks of log(k-means objective); lower is better\n\n%s",
              tasks, table.c_str());
  if (const std::string path = absl::GetFlag(FLAGS_out_md); !path.empty()) {
    std::ofstream(path) << table;
  }
  if (const std::string path = absl::GetFlag(FLAGS_out_svg); !path.empty()) {
    std::ofstream(path) << Svg(scenarios[0], results[0], models, steps);
  }
  if (const std::string path = absl::GetFlag(FLAGS_out_matrix_md); !path.empty()) {
    std::ofstream(path) << MatrixTable(scenarios, results, models, steps);
  }
  if (const std::string path = absl::GetFlag(FLAGS_out_matrix_svg); !path.empty()) {
    std::ofstream(path) << MatrixSvg(scenarios, results, models, steps, tasks);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::ParseCommandLine("Evaluates learned k-means transformers against Lloyd's on held-out tasks.",
                        argc, argv);
  const absl::Status status = kmt::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "kmt-eval: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
