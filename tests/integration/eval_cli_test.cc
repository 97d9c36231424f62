// kmt-eval as a user runs it for a models-by-scenarios matrix: each cell is
// the mean over tasks of log(model objective) - log(Lloyd's objective) at
// step T, the main table's "− Lloyd's" cell and the difference of its two
// means, and the heatmap has one coloured cell per model and scenario.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/npy.h"
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

}  // namespace
}  // namespace kmt
