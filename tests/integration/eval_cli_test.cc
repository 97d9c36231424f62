// kmt-eval as a user runs it for a models-by-scenarios matrix: each cell is
// the mean over tasks of log(model objective) - log(Lloyd's objective) at
// step T, the main table's "− Lloyd's" cell and the difference of its two
// means, and the heatmap has one coloured cell per model and scenario;
// --data_rows draws a dataset's tasks from those rows alone, and
// --lloyd_after adds each model's hand-over to Lloyd's steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "io/npy.h"
#include "learn/trainer.h"
#include "proto/model_file.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

std::string Read(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

// The cells of a Markdown table row, the label cell first.
std::vector<std::string> Cells(absl::string_view row) {
  std::vector<std::string> cells = absl::StrSplit(row, '|', absl::SkipWhitespace());
  for (std::string& c : cells) c = std::string(absl::StripAsciiWhitespace(c));
  return cells;
}

double Leading(const std::string& cell) {
  double v = NAN;
  std::sscanf(cell.c_str(), "%lf", &v);
  return v;
}

// Two untrained models of the d = 2, k = 3 shape from different seeds.
std::vector<std::string> WriteModels(const std::string& dir) {
  std::vector<std::string> paths;
  for (int seed : {1, 2}) {
    TrainerOptions o;
    o.tasks = {.n = 48, .d = 2, .k = 3};
    o.seed = seed;
    const std::string name = "model-" + std::to_string(seed);
    paths.push_back(dir + "/" + name + ".kmt");
    EXPECT_TRUE(
        WriteModelFile(ModelToProto(ModelFromParams(o, InitialState(o).params, name)), paths.back())
            .ok());
  }
  return paths;
}

TEST(EvalCli, MatrixCellIsTheModelsMeanMinusLloydsOnTheSameTasks) {
  const std::string dir = TempDir("eval-matrix");
  const std::vector<std::string> models = WriteModels(dir);
  std::string out, err;
  ASSERT_EQ(RunProgram({KMT_EVAL_BINARY, "--models=" + models[0] + "," + models[1],
                        "--scenarios=random,laplace,cauchy", "--tasks=12", "--steps=3",
                        "--out_md=" + dir + "/table.md", "--out_matrix_md=" + dir + "/matrix.md",
                        "--out_matrix_svg=" + dir + "/matrix.svg"},
                       &out, &err),
            0)
      << err;
  const std::vector<std::string> table = absl::StrSplit(Read(dir + "/table.md"), '\n');
  const std::vector<std::string> matrix = absl::StrSplit(Read(dir + "/matrix.md"), '\n');
  ASSERT_GE(table.size(), 5u);
  EXPECT_EQ(table[0], "| scenario, T = 3 | Lloyd's | model-1 | − Lloyd's | model-2 | − Lloyd's |");
  ASSERT_GE(matrix.size(), 4u);
  EXPECT_EQ(matrix[0], "| model | random | laplace | cauchy |");
  for (int m = 0; m < 2; ++m) {
    SCOPED_TRACE(m);
    const std::vector<std::string> cells = Cells(matrix[2 + m]);
    ASSERT_EQ(cells.size(), 4u) << matrix[2 + m];
    EXPECT_EQ(cells[0], "model-" + std::to_string(m + 1));
    for (int s = 0; s < 3; ++s) {
      SCOPED_TRACE(s);
      // Main table row at T = 3: scenario, Lloyd's, then per model its mean
      // and its difference from Lloyd's.
      const std::vector<std::string> row = Cells(table[2 + s]);
      ASSERT_EQ(row.size(), 6u) << table[2 + s];
      EXPECT_EQ(cells[1 + s], row[3 + 2 * m]);
      // Three figures rounded to 1e-3: within 1.5e-3 of each other.
      EXPECT_NEAR(Leading(cells[1 + s]), Leading(row[2 + 2 * m]) - Leading(row[1]), 1.5e-3);
    }
  }
  const std::string svg = Read(dir + "/matrix.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  int cells = 0;
  for (size_t at = svg.find("fill=\"rgb("); at != std::string::npos;
       at = svg.find("fill=\"rgb(", at + 1)) {
    ++cells;
  }
  EXPECT_EQ(cells, 6);
  EXPECT_NE(svg.find(">model-2</text>"), std::string::npos);
  EXPECT_NE(svg.find(">cauchy</text>"), std::string::npos);
}

// --guard adds each model's guarded form as a column; --data adds a
// dataset's two scenarios as rows; --standard_errors says what the spread is.
TEST(EvalCli, GuardedModelsAndDatasetsGetTheirColumnsAndRows) {
  const std::string dir = TempDir("eval-guard");
  const std::vector<std::string> models = WriteModels(dir);
  std::vector<float> points;
  for (int i = 0; i < 40; ++i) {
    points.push_back(static_cast<float>(i % 5));
    points.push_back(static_cast<float>(i % 7) * 0.5f);
  }
  ASSERT_TRUE(WriteNpy(dir + "/grid.npy", "<f4", {40, 2}, points.data(), 40 * 2 * 4).ok());
  std::string out, err;
  ASSERT_EQ(RunProgram(
                {KMT_EVAL_BINARY, "--models=" + models[0], "--guard", "--data=" + dir + "/grid.npy",
                 "--scenarios=grid,grid-kmeans++", "--tasks=3", "--steps=2", "--standard_errors"},
                &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("mean ± standard error over 3 held-out tasks"), std::string::npos) << out;
  const std::vector<std::string> lines = absl::StrSplit(out, '\n');
  const auto row = [&](absl::string_view start) {
    for (const std::string& line : lines) {
      if (absl::StartsWith(line, start)) return line;
    }
    return std::string();
  };
  EXPECT_EQ(row("| scenario, T = 2"),
            "| scenario, T = 2 | Lloyd's | model-1 | − Lloyd's | model-1 (guarded) | − Lloyd's |");
  EXPECT_EQ(Cells(row("| grid, 40 points, random")).size(), 6u) << out;
  EXPECT_EQ(Cells(row("| grid-kmeans++, 40 points, kmeans++")).size(), 6u) << out;
}

// 40 points of d = 2 on a grid; from row `moved_from` on, 1000 away.
std::string WriteGrid(const std::string& path, int moved_from) {
  std::vector<float> points;
  for (int i = 0; i < 40; ++i) {
    const float shift = i >= moved_from ? 1000.0f : 0.0f;
    points.push_back(static_cast<float>(i % 5) + shift);
    points.push_back(static_cast<float>(i % 7) * 0.5f);
  }
  EXPECT_TRUE(WriteNpy(path, "<f4", {40, 2}, points.data(), 40 * 2 * 4).ok());
  return path;
}

TEST(EvalCli, DataRowsDrawTheTasksFromThoseRowsAlone) {
  const std::string dir = TempDir("eval-rows");
  const std::vector<std::string> models = WriteModels(dir);
  const std::string near = WriteGrid(dir + "/near.npy", 40);
  const std::string far = WriteGrid(dir + "/far.npy", 30);
  const auto table = [&](const std::string& data, const std::string& rows) {
    std::string out, err;
    EXPECT_EQ(RunProgram({KMT_EVAL_BINARY, "--models=" + models[0], "--data=" + data,
                          "--data_rows=" + rows, "--data_points=12", "--tasks=4", "--steps=2",
                          "--out_md=" + dir + "/table.md"},
                         &out, &err),
              0)
        << err;
    // The scenario's name is the file's: compare the rows without it.
    return absl::StrReplaceAll(Read(dir + "/table.md"), {{"near", "grid"}, {"far", "grid"}});
  };
  const std::string first_rows = table(near, "0:30");
  EXPECT_NE(first_rows.find("| grid, 30 points, random init |"), std::string::npos) << first_rows;
  // The files differ only after row 30.
  EXPECT_EQ(table(far, "0:30"), first_rows);
  EXPECT_NE(table(far, "20:"), table(near, "20:"));
  std::string out, err;
  EXPECT_EQ(
      RunProgram({KMT_EVAL_BINARY, "--models=" + models[0], "--data=" + near, "--data_rows=30:50"},
                 &out, &err),
      1);
  EXPECT_NE(err.find("rows '30:50'"), std::string::npos) << err;
}

// A NaN in the evaluated file is refused before any task runs, naming the
// file's row; exit code 1, no core dump.
TEST(EvalCli, ANonFiniteValueIsRefusedNamingItsRow) {
  const std::string dir = TempDir("eval-nan");
  const std::vector<std::string> models = WriteModels(dir);
  std::vector<float> points(40 * 2, 1.0f);
  for (int i = 0; i < 40; ++i) points[2 * i] = static_cast<float>(i % 5);
  points[2 * 33 + 1] = std::nanf("");
  ASSERT_TRUE(WriteNpy(dir + "/nan.npy", "<f4", {40, 2}, points.data(), 40 * 2 * 4).ok());
  std::string out, err;
  EXPECT_EQ(RunProgram({KMT_EVAL_BINARY, "--models=" + models[0], "--data=" + dir + "/nan.npy",
                        "--data_points=12", "--tasks=4", "--steps=2"},
                       &out, &err),
            1);
  EXPECT_NE(err.find("nan.npy row 33 has NaN in column 1"), std::string::npos) << err;
}

TEST(EvalCli, LloydAfterAddsTheHandOverFormOfEachModel) {
  const std::string dir = TempDir("eval-lloyd-after");
  const std::vector<std::string> models = WriteModels(dir);
  std::string out, err;
  ASSERT_EQ(RunProgram({KMT_EVAL_BINARY, "--models=" + models[0], "--lloyd_after=1",
                        "--scenarios=random", "--tasks=6", "--steps=3"},
                       &out, &err),
            0)
      << err;
  const std::vector<std::string> lines = absl::StrSplit(out, '\n');
  std::vector<std::vector<std::string>> rows;
  for (const std::string& line : lines) {
    if (absl::StartsWith(line, "| training distribution")) rows.push_back(Cells(line));
  }
  EXPECT_NE(out.find("| model-1 | − Lloyd's | model-1 (Lloyd's after 1) | − Lloyd's |"),
            std::string::npos)
      << out;
  ASSERT_EQ(rows.size(), 2u) << out;  // T = 3, then T = 1
  ASSERT_EQ(rows[0].size(), 6u);
  // One learned layer, then Lloyd's: the same first step, not the same third.
  EXPECT_EQ(rows[1][2], rows[1][4]);
  EXPECT_NE(rows[0][2], rows[0][4]);
}

}  // namespace
}  // namespace kmt
