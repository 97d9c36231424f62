// kmt-eval: held-out evaluation of learned k-means transformers against
// Lloyd's in the papers' scenarios (learn/evaluation.h) and on subsets of
// datasets, over one or more seeds of held-out tasks. Writes a Markdown table and SVG plots of the
// mean log objective against the step, and, for a models-by-scenarios view such as the cross-family
// matrix, each model's difference from Lloyd's at step T as a table and an SVG heatmap.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "core/engine_flags.h"
#include "core/padding.h"
#include "learn/dataset.h"
#include "learn/evaluation.h"
#include "proto/model_file.h"

ABSL_FLAG(std::vector<std::string>, models, {}, "model files (*.kmt) to evaluate");
ABSL_FLAG(int, tasks, 320, "held-out tasks per scenario and seed");
ABSL_FLAG(int, steps, 20, "steps T (layers; Lloyd's iterations)");
ABSL_FLAG(std::vector<std::string>, scenarios, {},
          "scenarios to run (default all): random, kmeans++, plain-kmeans++, n128, n256, n1024, "
          "n2048, unequal, anisotropic, half-scale, double-scale, raw, anisotropic-raw, laplace, "
          "gumbel, lognormal, cauchy");
ABSL_FLAG(uint64_t, seed, 1000003, "seed of the held-out tasks (unlike any training seed)");
ABSL_FLAG(std::vector<std::string>, seeds, {},
          "several task seeds (overrides --seed): the spread is then over seeds, of each seed's "
          "mean over its tasks");
ABSL_FLAG(bool, without_reembed, false,
          "also run each model without re-embedding (registers carried over between steps)");
ABSL_FLAG(bool, guard, false,
          "also run each model guarded: each step the learned one or an exact Lloyd's step from "
          "the same centers, whichever gives the lower objective");
ABSL_FLAG(int, lloyd_after, 0,
          "also run each model handing over to exact Lloyd's steps after this many of its layers "
          "(a model file's lloyd_after); 0: no such form");
ABSL_FLAG(std::vector<std::string>, data, {},
          "datasets (.npy, float32 or float64, shape (N, d), d the models'): each adds the "
          "scenarios <name> and <name>-kmeans++, whose tasks are random subsets of --data_points "
          "of its points, from random-subset and greedy k-means++ centers");
ABSL_FLAG(std::string, data_rows, "",
          "rows of each --data file its tasks are drawn from, A:B (rows A to B - 1), A: or :B, "
          "e.g. those kmt-train --data_train_rows held out; empty: all");
ABSL_FLAG(int, data_points, 512, "points per task of a --data scenario (all, if fewer)");
ABSL_FLAG(bool, standard_errors, false,
          "give each mean ± its standard error (the spread over tasks or seeds divided by the "
          "square root of their number) instead of ± the spread");
ABSL_FLAG(std::string, out_md, "", "Markdown table to write (default: stdout only)");
ABSL_FLAG(std::string, out_steps_md, "",
          "Markdown table of every step's mean log objective, first scenario");
ABSL_FLAG(std::string, out_svg, "", "SVG plot of mean log objective against step, first scenario");
ABSL_FLAG(std::string, svg_dir, "", "directory for one SVG plot per scenario, <scenario>.svg");
ABSL_FLAG(std::string, out_matrix_md, "",
          "Markdown table, models by scenarios, of log(objective) minus Lloyd's at step T");
ABSL_FLAG(std::string, out_matrix_svg, "", "SVG heatmap of the same table");
ABSL_FLAG(std::vector<std::string>, sizes, {},
          "batch sizes dxk at or below the models' d and k (e.g. 16x8), run padded: each adds "
          "the scenarios d<d>-k<k> and d<d>-k<k>-kmeans++, the training distribution at that "
          "size from random-subset and greedy k-means++ centers");
ABSL_FLAG(std::string, out_sizes_md, "",
          "Markdown table of the --sizes scenarios, one row per size: each model's log "
          "objective minus Lloyd's at step T from both starts, ± its standard error, and "
          "whether it is ahead from both by more than two standard errors");

namespace kmt {
namespace {

std::string Cell(const StepSummary& s, int t) {
  if (!std::isfinite(s.mean[t])) return "diverged";
  return absl::StrFormat("%.3f ± %.3f", s.mean[t], s.sd[t]);
}

std::string SignedCell(const StepSummary& s, int t) {
  if (!std::isfinite(s.mean[t])) return "diverged";
  return absl::StrFormat("%+.3f ± %.3f", s.mean[t], s.sd[t]);
}

// One row per scenario at step t (0-based): Lloyd's, then per model its log
// objective and its difference from Lloyd's.
std::string Table(const std::vector<Scenario>& scenarios,
                  const std::vector<ScenarioSummary>& results,
                  const std::vector<Model<float>>& models, int t) {
  std::string header = absl::StrCat("| scenario, T = ", t + 1, " | Lloyd's");
  std::string rule = "|---|---";
  for (const Model<float>& m : models) {
    absl::StrAppend(&header, " | ", m.name, " | − Lloyd's");
    absl::StrAppend(&rule, "|---|---");
  }
  std::string out = header + " |\n" + rule + "|\n";
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const ScenarioSummary& r = results[i];
    absl::StrAppend(&out, "| ", scenarios[i].description, " | ", Cell(r.lloyd, t));
    for (size_t m = 0; m < models.size(); ++m) {
      absl::StrAppend(&out, " | ", Cell(r.models[m], t), " | ", SignedCell(r.differences[m], t));
    }
    absl::StrAppend(&out, " |\n");
  }
  return out;
}

// The first scenario step by step: one row per T, one column per run.
std::string StepsTable(const Scenario& s, const ScenarioSummary& r,
                       const std::vector<Model<float>>& models, int steps) {
  std::string out = absl::StrCat("| ", s.description, ", T | Lloyd's");
  std::string rule = "|---|---";
  for (const Model<float>& m : models) {
    absl::StrAppend(&out, " | ", m.name);
    absl::StrAppend(&rule, "|---");
  }
  absl::StrAppend(&out, " |\n", rule, "|\n");
  for (int t = 0; t < steps; ++t) {
    absl::StrAppend(&out, "| ", t + 1, " | ", Cell(r.lloyd, t));
    for (const StepSummary& m : r.models) absl::StrAppend(&out, " | ", Cell(m, t));
    absl::StrAppend(&out, " |\n");
  }
  return out;
}

// A line chart of mean log objective against step: Lloyd's and each model.
// A curve stops where its mean stops being finite.
std::string Svg(const Scenario& s, const ScenarioSummary& r,
                const std::vector<Model<float>>& models, int steps) {
  std::vector<std::pair<std::string, const StepSummary*>> lines = {{"Lloyd's", &r.lloyd}};
  for (size_t m = 0; m < models.size(); ++m) lines.push_back({models[m].name, &r.models[m]});
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& [name, c] : lines) {
    for (double v : c->mean) {
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  const double pad = 0.05 * (hi - lo + 1e-9);
  lo -= pad;
  hi += pad;
  const int w = 720, h = 400, left = 70, right = 280, top = 40, bottom = 50;
  const auto x = [&](int t) { return left + (w - left - right) * t / std::max(1.0, steps - 1.0); };
  const auto y = [&](double v) { return top + (h - top - bottom) * (hi - v) / (hi - lo); };
  const char* colors[] = {"#444444", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  const std::string spread = r.seeds > 1 ? absl::StrCat(r.seeds, " seeds") : "1 seed";
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%d\" y=\"22\" font-size=\"14\">Mean log k-means objective, "
      "%s (%s)</text>\n",
      w, h, left, s.description, spread);
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
    for (int t = 0; t < steps && std::isfinite(lines[i].second->mean[t]); ++t) {
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

// Models (rows) by scenarios (columns): log(model objective) - log(Lloyd's
// objective) at the last step, as the main table's "− Lloyd's" columns.
std::string MatrixTable(const std::vector<Scenario>& scenarios,
                        const std::vector<ScenarioSummary>& results,
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
    for (const ScenarioSummary& r : results) {
      absl::StrAppend(&out, " ", SignedCell(r.differences[m], steps - 1), " |");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

// The same means as a heatmap: blue where a model beats Lloyd's, red where
// it loses, white at zero, colours scaled by the largest finite magnitude; a
// diverged cell is grey.
std::string MatrixSvg(const std::vector<Scenario>& scenarios,
                      const std::vector<ScenarioSummary>& results,
                      const std::vector<Model<float>>& models, int steps,
                      const std::string& spread) {
  double extent = 1e-9;
  for (const ScenarioSummary& r : results) {
    for (const StepSummary& c : r.differences) {
      if (std::isfinite(c.mean[steps - 1])) extent = std::max(extent, std::abs(c.mean[steps - 1]));
    }
  }
  const int left = 260, top = 70, cell_w = 110, cell_h = 40;
  const int w = left + cell_w * static_cast<int>(scenarios.size()) + 20;
  const int h = top + cell_h * static_cast<int>(models.size()) + 50;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"10\" y=\"22\" font-size=\"14\">Mean log objective minus "
      "Lloyd's at T = %d, %s (blue: better than Lloyd's)</text>\n"
      "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">evaluated on</text>\n",
      w, h, steps, spread, left + cell_w * static_cast<int>(scenarios.size()) / 2, top - 30);
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
      const int x = left + cell_w * static_cast<int>(j);
      // 0 is white; -extent full blue (33, 102, 172), +extent full red (178, 24, 43).
      const double a = std::isfinite(v) ? std::min(1.0, std::abs(v) / extent) : 0.0;
      const auto mix = [&](int negative, int positive) {
        if (!std::isfinite(v)) return 190;
        return static_cast<int>(std::lround(255 + a * ((v < 0 ? negative : positive) - 255)));
      };
      absl::StrAppend(
          &svg,
          absl::StrFormat("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                          "fill=\"rgb(%d,%d,%d)\" stroke=\"white\"/>\n"
                          "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
                          x, y, cell_w, cell_h, mix(33, 178), mix(102, 24), mix(172, 43),
                          x + cell_w / 2, y + cell_h / 2 + 4, a > 0.6 ? "white" : "black",
                          std::isfinite(v) ? absl::StrFormat("%+.3f", v) : "diverged"));
    }
  }
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"10\" y=\"%d\">rows: models; "
                                        "colours scaled to ±%.3f</text>\n</svg>\n",
                                        h - 16, extent));
  return svg;
}

// One size of --sizes: its two scenarios' indices among all.
struct SizeRow {
  ModelSize size;
  size_t random = 0, kmeanspp = 0;
};

absl::StatusOr<std::vector<ModelSize>> Sizes(const Model<float>& model) {
  std::vector<ModelSize> sizes;
  for (const std::string& text : absl::GetFlag(FLAGS_sizes)) {
    const std::vector<std::string> parts = absl::StrSplit(text, 'x');
    ModelSize size;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &size.d) ||
        !absl::SimpleAtoi(parts[1], &size.k)) {
      return absl::InvalidArgumentError(absl::StrCat("--sizes: '", text, "' is not dxk"));
    }
    if (absl::Status s = CheckPaddable(model, size.d, size.k); !s.ok()) return s;
    sizes.push_back(size);
  }
  return sizes;
}

// Whether a difference from Lloyd's is below zero by more than two standard
// errors.
bool Ahead(const StepSummary& difference, int t, double standard_error) {
  return difference.mean[t] + 2 * standard_error < 0;
}

// One row per size: per model the difference from Lloyd's at step t from
// random-subset and from greedy k-means++ centers, and whether it is ahead
// from both; `errors[i]` is scenario i's standard error of each difference.
std::string SizesTable(const std::vector<SizeRow>& rows,
                       const std::vector<ScenarioSummary>& results,
                       const std::vector<std::vector<double>>& errors,
                       const std::vector<Model<float>>& models, int t) {
  std::string out = absl::StrCat("| d | k | Lloyd's, random | Lloyd's, k-means++");
  std::string rule = "|---|---|---|---";
  for (const Model<float>& m : models) {
    absl::StrAppend(&out, " | ", m.name, ", random − Lloyd's | k-means++ − Lloyd's | ahead");
    absl::StrAppend(&rule, "|---|---|---");
  }
  absl::StrAppend(&out, " |\n", rule, "|\n");
  const auto cell = [&](const StepSummary& s, double error) {
    if (!std::isfinite(s.mean[t])) return std::string("diverged");
    return absl::StrFormat("%+.3f ± %.3f", s.mean[t], error);
  };
  for (const SizeRow& row : rows) {
    const ScenarioSummary &random = results[row.random], &kmeanspp = results[row.kmeanspp];
    absl::StrAppend(&out, "| ", row.size.d, " | ", row.size.k, " | ",
                    absl::StrFormat("%.3f", random.lloyd.mean[t]), " | ",
                    absl::StrFormat("%.3f", kmeanspp.lloyd.mean[t]));
    for (size_t m = 0; m < models.size(); ++m) {
      const double e_random = errors[row.random][m], e_kmeanspp = errors[row.kmeanspp][m];
      const bool ahead = Ahead(random.differences[m], t, e_random) &&
                         Ahead(kmeanspp.differences[m], t, e_kmeanspp);
      absl::StrAppend(&out, " | ", cell(random.differences[m], e_random), " | ",
                      cell(kmeanspp.differences[m], e_kmeanspp), " | ", ahead ? "yes" : "no");
    }
    absl::StrAppend(&out, " |\n");
  }
  // What a model file would list (ModelFile.padded_sizes): the sizes below
  // its own where it is ahead from both starts.
  for (size_t m = 0; m < models.size(); ++m) {
    std::vector<std::string> listed;
    for (const SizeRow& row : rows) {
      if (row.size == ModelSize{models[m].d, models[m].k}) continue;
      if (Ahead(results[row.random].differences[m], t, errors[row.random][m]) &&
          Ahead(results[row.kmeanspp].differences[m], t, errors[row.kmeanspp][m])) {
        listed.push_back(absl::StrCat(row.size.d, "x", row.size.k));
      }
    }
    absl::StrAppend(&out, "\n", models[m].name, " ahead from both starts at: ",
                    listed.empty() ? "none" : absl::StrJoin(listed, ","), "\n");
  }
  return out;
}

absl::StatusOr<std::vector<uint64_t>> Seeds() {
  std::vector<uint64_t> seeds;
  for (const std::string& text : absl::GetFlag(FLAGS_seeds)) {
    uint64_t seed;
    if (!absl::SimpleAtoi(text, &seed)) {
      return absl::InvalidArgumentError(absl::StrCat("--seeds: '", text, "' is not a seed"));
    }
    seeds.push_back(seed);
  }
  if (seeds.empty()) seeds.push_back(absl::GetFlag(FLAGS_seed));
  return seeds;
}

absl::Status Run() {
  std::vector<Model<float>> models;
  for (const std::string& path : absl::GetFlag(FLAGS_models)) {
    absl::StatusOr<Model<float>> model = ReadModel<float>(path);
    if (!model.ok()) return model.status();
    models.push_back(*std::move(model));
  }
  if (models.empty()) return absl::InvalidArgumentError("--models names no model file");
  for (const Model<float>& m : models) {
    if (m.d != models[0].d || m.k != models[0].k) {
      return absl::InvalidArgumentError("all models must share d and k");
    }
  }
  // Each file's model once more in another form, named with `suffix`.
  const size_t files = models.size();
  const auto add_form = [&](const std::string& suffix, auto change) {
    for (size_t m = 0; m < files; ++m) {
      Model<float> form = models[m];
      change(form);
      form.name += suffix;
      if (absl::Status s = ValidateModel(form); !s.ok()) return s;
      models.push_back(std::move(form));
    }
    return absl::OkStatus();
  };
  if (absl::GetFlag(FLAGS_guard)) {
    if (absl::Status s = add_form(" (guarded)", [](Model<float>& m) { m.guard = true; }); !s.ok()) {
      return s;
    }
  }
  if (absl::GetFlag(FLAGS_without_reembed)) {
    // The ablation: the same weights, registers carried from step to step.
    if (absl::Status s = add_form(" (no re-embedding)", [](Model<float>& m) { m.reembed = false; });
        !s.ok()) {
      return s;
    }
  }
  if (const int after = absl::GetFlag(FLAGS_lloyd_after); after > 0) {
    if (absl::Status s = add_form(absl::StrCat(" (Lloyd's after ", after, ")"),
                                  [after](Model<float>& m) { m.lloyd_after = after; });
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<std::vector<uint64_t>> seeds = Seeds();
  if (!seeds.ok()) return seeds.status();
  const TaskOptions base{.d = models[0].d, .k = models[0].k};
  std::vector<Scenario> scenarios;
  const std::vector<std::string> wanted = absl::GetFlag(FLAGS_scenarios);
  // With --sizes and no --scenarios, the sizes' scenarios alone.
  const bool all = wanted.empty() && absl::GetFlag(FLAGS_sizes).empty();
  for (const Scenario& s : PaperScenarios(base)) {
    if (all || std::find(wanted.begin(), wanted.end(), s.name) != wanted.end()) {
      scenarios.push_back(s);
    }
  }
  for (const std::string& path : absl::GetFlag(FLAGS_data)) {
    absl::StatusOr<std::shared_ptr<const Matrix<float>>> points = ReadDataset(path);
    if (!points.ok()) return points.status();
    absl::StatusOr<RowRange> rows =
        ParseRowRange(absl::GetFlag(FLAGS_data_rows), (*points)->cols());
    if (!rows.ok()) return rows.status();
    if (rows->first > 0 || rows->end < (*points)->cols()) *points = DatasetRows(**points, *rows);
    if ((*points)->rows() != base.d) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has d = ", (*points)->rows(), ", the models d = ", base.d));
    }
    const std::string name = std::filesystem::path(path).stem().string();
    for (const auto& [suffix, init] : {std::pair{"", InitMethod::kRandomSubset},
                                       std::pair{"-kmeans++", InitMethod::kKMeansPlusPlus}}) {
      const std::string scenario = name + suffix;
      if (wanted.empty() || std::find(wanted.begin(), wanted.end(), scenario) != wanted.end()) {
        scenarios.push_back(
            DataScenario(scenario, *points, absl::GetFlag(FLAGS_data_points), base.k, init));
      }
    }
  }
  absl::StatusOr<std::vector<ModelSize>> sizes = Sizes(models[0]);
  if (!sizes.ok()) return sizes.status();
  std::vector<SizeRow> size_rows;
  for (const ModelSize& size : *sizes) {
    SizeRow row{.size = size};
    const std::string name = absl::StrCat("d", size.d, "-k", size.k);
    for (const auto& [suffix, init] : {std::pair{"", InitMethod::kRandomSubset},
                                       std::pair{"-kmeans++", InitMethod::kKMeansPlusPlus}}) {
      (init == InitMethod::kRandomSubset ? row.random : row.kmeanspp) = scenarios.size();
      Scenario s{
          name + suffix,
          absl::StrCat("d = ", size.d, ", k = ", size.k, ", ", InitMethodName(init), " init"),
          base};
      s.tasks.d = size.d;
      s.tasks.k = size.k;
      s.init = init;
      scenarios.push_back(std::move(s));
    }
    size_rows.push_back(row);
  }
  if (scenarios.empty()) return absl::InvalidArgumentError("--scenarios matches none");
  const int tasks = absl::GetFlag(FLAGS_tasks), steps = absl::GetFlag(FLAGS_steps);
  std::vector<ScenarioSummary> results;
  // Per scenario and model, the standard error of the difference from
  // Lloyd's at step T.
  std::vector<std::vector<double>> errors;
  for (const Scenario& s : scenarios) {
    std::vector<SeedLogs> per_seed;
    for (uint64_t seed : *seeds) {
      std::fprintf(stderr, "%s, seed %llu...\n", s.description.c_str(),
                   static_cast<unsigned long long>(seed));
      per_seed.push_back(EvaluateSeed(s, models, tasks, steps, seed));
    }
    results.push_back(Summarise(per_seed));
    const double samples = per_seed.size() > 1 ? static_cast<double>(per_seed.size()) : tasks;
    errors.emplace_back();
    for (const StepSummary& m : results.back().differences) {
      errors.back().push_back(m.sd[steps - 1] / std::sqrt(samples));
    }
    if (absl::GetFlag(FLAGS_standard_errors)) {
      const auto to_errors = [&](StepSummary& summary) {
        for (double& sd : summary.sd) sd /= std::sqrt(samples);
      };
      to_errors(results.back().lloyd);
      for (StepSummary& m : results.back().models) to_errors(m);
      for (StepSummary& m : results.back().differences) to_errors(m);
    }
    for (size_t m = 0; m < models.size(); ++m) {
      if (results.back().diverged[m] > 0) {
        std::fprintf(stderr, "%s: %s diverged (non-finite objective) on %d runs\n",
                     s.description.c_str(), models[m].name.c_str(), results.back().diverged[m]);
      }
    }
  }
  const std::string table =
      Table(scenarios, results, models, steps - 1) + "\n" + Table(scenarios, results, models, 0);
  const char* spread = absl::GetFlag(FLAGS_standard_errors) ? "standard error" : "sd";
  if (seeds->size() > 1) {
    std::printf(
        "log(k-means objective), lower is better: mean ± %s over %zu seeds (%s) of each seed's "
        "mean over %d held-out tasks\n\n%s",
        spread, seeds->size(), absl::StrJoin(*seeds, ", ").c_str(), tasks, table.c_str());
  } else {
    std::printf(
        "log(k-means objective), lower is better: mean ± %s over %d held-out tasks (seed "
        "%llu)\n\n%s",
        spread, tasks, static_cast<unsigned long long>(seeds->front()), table.c_str());
  }
  if (!size_rows.empty()) {
    const std::string sizes_table = SizesTable(size_rows, results, errors, models, steps - 1);
    std::printf("\n%s", sizes_table.c_str());
    if (const std::string path = absl::GetFlag(FLAGS_out_sizes_md); !path.empty()) {
      std::ofstream(path) << sizes_table;
    }
  }
  if (const std::string path = absl::GetFlag(FLAGS_out_md); !path.empty()) {
    std::ofstream(path) << table;
  }
  if (const std::string path = absl::GetFlag(FLAGS_out_steps_md); !path.empty()) {
    std::ofstream(path) << StepsTable(scenarios[0], results[0], models, steps);
  }
  if (const std::string path = absl::GetFlag(FLAGS_out_svg); !path.empty()) {
    std::ofstream(path) << Svg(scenarios[0], results[0], models, steps);
  }
  if (const std::string dir = absl::GetFlag(FLAGS_svg_dir); !dir.empty()) {
    for (size_t i = 0; i < scenarios.size(); ++i) {
      std::ofstream(absl::StrCat(dir, "/", scenarios[i].name, ".svg"))
          << Svg(scenarios[i], results[i], models, steps);
    }
  }
  if (const std::string path = absl::GetFlag(FLAGS_out_matrix_md); !path.empty()) {
    std::ofstream(path) << MatrixTable(scenarios, results, models, steps);
  }
  if (const std::string path = absl::GetFlag(FLAGS_out_matrix_svg); !path.empty()) {
    const std::string spread = seeds->size() > 1
                                   ? absl::StrCat(seeds->size(), " seeds of ", tasks, " tasks")
                                   : absl::StrCat(tasks, " tasks");
    std::ofstream(path) << MatrixSvg(scenarios, results, models, steps, spread);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::ParseCommandLine("Evaluates learned k-means transformers against Lloyd's on held-out tasks.",
                        argc, argv, kmt::EngineFlags());
  const absl::Status status = kmt::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "kmt-eval: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
