// The in-process reference of bench/whole_bench.sh, and its data.
//   whole_reference --generate --n=N --d=D --k=K --points=F --centers=C
//       writes N x D float32 points (K Gaussian blobs, row-major) to F and
//       K initial centers (greedy k-means++ on the first 65,536 points) as
//       CSV to C.
//   whole_reference --points=F --d=D --centers=C --iterations=T --labels_out=L
//       reads F, runs the core's Lloyd's (the fast path, every CPU) from C
//       for T iterations, writes the labels and prints the seconds of each
//       phase as `kmt cluster --mode=whole` does. --tol=0 stops after an
//       iteration that changed no label (or moved no center), as the
//       service's whole mode does; --assignment=products computes every
//       distance, without the bounds the fast path keeps across iterations.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "core/bounds.h"
#include "core/engine_flags.h"
#include "core/init.h"
#include "core/transformer.h"
#include "learn/task_generator.h"

ABSL_FLAG(bool, generate, false, "write the data and initial centers instead of clustering");
ABSL_FLAG(int64_t, n, 1000000, "points to generate");
ABSL_FLAG(int, d, 32, "dimensions");
ABSL_FLAG(int, k, 64, "clusters");
ABSL_FLAG(int, iterations, 10, "Lloyd's iterations");
ABSL_FLAG(std::string, points, "", "raw float32 points, row-major");
ABSL_FLAG(std::string, centers, "", "CSV of k initial centers");
ABSL_FLAG(std::string, labels_out, "", "where to write the labels, one per line");
ABSL_FLAG(double, tol, -1,
          "stop once the centers' squared shift is at most this (0: once no label changes); "
          "negative: run every iteration");
ABSL_FLAG(std::string, assignment, "auto",
          "auto (the bounds where they pay, as the service's shards) or products");

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int Generate() {
  const int64_t n = absl::GetFlag(FLAGS_n);
  const int d = absl::GetFlag(FLAGS_d), k = absl::GetFlag(FLAGS_k);
  std::ofstream out(absl::GetFlag(FLAGS_points), std::ios::binary);
  // In blocks, so memory stays small at any n; each block its own seed.
  constexpr int64_t kBlock = 1 << 18;
  Matrix<float> head;
  for (int64_t first = 0; first < n; first += kBlock) {
    const int64_t rows = std::min(kBlock, n - first);
    const Matrix<float> block =
        GenerateTask<float>({.n = static_cast<int>(rows), .d = d, .k = k, .scale = 0.2},
                            1 + first / kBlock)
            .points;
    if (first == 0) head = block.leftCols(std::min<int64_t>(rows, 65536));
    out.write(reinterpret_cast<const char*>(block.data()), block.size() * sizeof(float));
  }
  const Matrix<float> centers = *InitialCenters(head, k, InitMethod::kKMeansPlusPlus, 1);
  std::ofstream csv(absl::GetFlag(FLAGS_centers));
  for (int j = 0; j < k; ++j) {
    for (int l = 0; l < d; ++l) csv << (l ? "," : "") << absl::StrFormat("%.9g", centers(l, j));
    csv << "\n";
  }
  return out && csv ? 0 : 1;
}

int Cluster() {
  const int d = absl::GetFlag(FLAGS_d);
  const auto start = Clock::now();
  std::ifstream in(absl::GetFlag(FLAGS_points), std::ios::binary | std::ios::ate);
  const int64_t n = static_cast<int64_t>(in.tellg()) / (4 * d);
  in.seekg(0);
  Matrix<float> points(d, n);
  in.read(reinterpret_cast<char*>(points.data()), points.size() * sizeof(float));
  std::vector<float> values;
  std::ifstream csv(absl::GetFlag(FLAGS_centers));
  for (std::string line; std::getline(csv, line);) {
    for (absl::string_view field : absl::StrSplit(line, ',')) {
      values.push_back(std::strtof(std::string(field).c_str(), nullptr));
    }
  }
  const Matrix<float> centers = Eigen::Map<const Matrix<float>>(
      values.data(), d, static_cast<Eigen::Index>(values.size() / d));
  const double load = Since(start);
  const std::string assignment = absl::GetFlag(FLAGS_assignment);
  if (assignment != "auto" && assignment != "products") {
    std::fprintf(stderr, "--assignment=%s: expected auto or products\n", assignment.c_str());
    return 1;
  }
  const double tol = absl::GetFlag(FLAGS_tol);
  const auto run_start = Clock::now();
  absl::StatusOr<RunResult<float>> run = RunLloyd<float>(
      {}, points, centers,
      {.layers = absl::GetFlag(FLAGS_iterations),
       .shift_tolerance = tol >= 0 ? std::optional<double>(tol) : std::nullopt,
       .assignment = assignment == "auto" ? AssignmentPath::kAuto : AssignmentPath::kProducts});
  if (!run.ok()) {
    std::fprintf(stderr, "%s\n", run.status().ToString().c_str());
    return 1;
  }
  const double iterations = Since(run_start);
  const auto write_start = Clock::now();
  if (const std::string path = absl::GetFlag(FLAGS_labels_out); !path.empty()) {
    std::ofstream out(path);
    for (int label : run->labels) out << label << "\n";
  }
  const double write = Since(write_start);
  const int t = run->layers_run;
  std::printf(
      "in-process (%s): final objective %.10g; %d iterations; seconds: load %.3f, iterations "
      "%.3f (%.4f each, the final labels included), write %.3f, total %.3f\n",
      assignment.c_str(), run->objective, t, load, iterations, iterations / std::max(1, t), write,
      Since(start));
  return 0;
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::ParseCommandLine(
      "The in-process reference of bench/whole_bench.sh: writes its data, or runs Lloyd's on it "
      "in this process.",
      argc, argv, kmt::EngineFlags());
  return absl::GetFlag(FLAGS_generate) ? kmt::Generate() : kmt::Cluster();
}
