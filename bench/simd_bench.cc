// The kernels at each SIMD level this CPU runs, in one process: a Lloyd's
// iteration at n = 10^6, d = 32, k = 64 (the assignment with its sums, then
// the means) and one served batch of 4,096 x 32 at k = 16 (greedy k-means++,
// then 10 layers of the fast path, as the server runs a batch by default).
// Built with KMT_NATIVE=ON the only level is the build's own ("native"):
// bench/simd_levels.sh runs both builds in turns and prints one table.
//   build/bench/simd_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <tuple>

#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/constructions.h"
#include "core/init.h"
#include "core/simd.h"
#include "core/transformer.h"
#include "tests/support/gaussian_clusters.h"

namespace kmt {
namespace {

const Matrix<float>& Points(int n, int d, int k) {
  static std::map<std::tuple<int, int, int>, Matrix<float>> cache;
  Matrix<float>& points = cache[{n, d, k}];
  if (points.size() == 0) points = GaussianClusters<float>({.n = n, .d = d, .k = k}, 1).points;
  return points;
}

void UseLevel(benchmark::State& state, SimdLevel level) {
  if (const absl::Status status = UseSimdLevel(SimdLevelName(level)); !status.ok()) {
    state.SkipWithError(std::string(status.message()).c_str());
  }
}

void LloydIteration(benchmark::State& state, SimdLevel level) {
  UseLevel(state, level);
  constexpr int n = 1000000, d = 32, k = 64;
  const Matrix<float>& points = Points(n, d, k);
  Matrix<float> centers = *InitialCenters(points, k, InitMethod::kRandomSubset, 1);
  Labels labels;
  for (auto _ : state) {
    ClusterSums sums(d, k);
    benchmark::DoNotOptimize(AssignNearest(points, centers, &labels, nullptr, &sums));
    ApplyMeans(sums, &centers);
  }
}

void ServedBatch(benchmark::State& state, SimdLevel level) {
  UseLevel(state, level);
  constexpr int n = 4096, d = 32, k = 16;
  const Matrix<float>& points = Points(n, d, k);
  const LloydOptions lloyd;
  uint64_t seed = 0;
  for (auto _ : state) {
    const Matrix<float> init = *InitialCenters(points, k, InitMethod::kKMeansPlusPlus, ++seed);
    benchmark::DoNotOptimize(RunLloyd(lloyd, points, init, {.layers = 10})->objective);
  }
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  for (kmt::SimdLevel level : kmt::SupportedSimdLevels()) {
    const std::string name = kmt::SimdLevelName(level);
    benchmark::RegisterBenchmark(("BM_LloydIteration/1000000/32/64/" + name).c_str(),
                                 kmt::LloydIteration, level)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_ServedBatch/4096/32/16/" + name).c_str(), kmt::ServedBatch,
                                 level)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
