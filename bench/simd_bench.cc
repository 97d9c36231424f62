// The kernels at each SIMD level this CPU runs, in one process: a Lloyd's
// iteration at n = 10^6, d = 32, k = 64 (the assignment with its sums, then
// the means) and one served batch of 4,096 x 32 at k = 16 (greedy k-means++,
// then 10 layers of the fast path, as the server runs a batch by default).
// Then each group of kernels that auto may take from different levels
// (core/simd.h) alone: the assignment's products and scan, the cluster sums
// with the means, and attention (hardmax over 1,024 tokens, as a learned
// model's layer).
// Built with KMT_NATIVE=ON the only level is the build's own ("native"):
// bench/simd_levels.sh runs both builds in turns and prints one table.
//   build/bench/simd_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/assign.h"
#include "core/attention.h"
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

void UseLevel(benchmark::State& state, const std::string& setting) {
  if (const absl::Status status = UseSimdLevel(setting); !status.ok()) {
    state.SkipWithError(std::string(status.message()).c_str());
  }
}

// The large problem: 10^6 points of d = 32 and k = 64 centers, a random
// subset of them.
struct Large {
  static constexpr int n = 1000000, d = 32, k = 64;
  const Matrix<float>& points = Points(n, d, k);
  Matrix<float> centers = *InitialCenters(points, k, InitMethod::kRandomSubset, 1);
  Labels labels;
};

void LloydIteration(benchmark::State& state, const std::string& level) {
  UseLevel(state, level);
  Large large;
  for (auto _ : state) {
    ClusterSums sums(Large::d, Large::k);
    benchmark::DoNotOptimize(
        AssignNearest(large.points, large.centers, &large.labels, nullptr, &sums));
    ApplyMeans(sums, &large.centers);
  }
}

void ServedBatch(benchmark::State& state, const std::string& level) {
  UseLevel(state, level);
  constexpr int n = 4096, d = 32, k = 16;
  const Matrix<float>& points = Points(n, d, k);
  const LloydOptions lloyd;
  uint64_t seed = 0;
  for (auto _ : state) {
    const Matrix<float> init = *InitialCenters(points, k, InitMethod::kKMeansPlusPlus, ++seed);
    // The last layer's objective alone, as a request without
    // return_trajectory asks.
    benchmark::DoNotOptimize(
        RunLloyd(lloyd, points, init, {.layers = 10, .layer_objectives = false})->objective);
  }
}

void Assignment(benchmark::State& state, const std::string& level) {
  UseLevel(state, level);
  Large large;
  for (auto _ : state) {
    benchmark::DoNotOptimize(AssignNearest(large.points, large.centers, &large.labels));
  }
}

void Sums(benchmark::State& state, const std::string& level) {
  UseLevel(state, level);
  Large large;
  AssignNearest(large.points, large.centers, &large.labels);
  for (auto _ : state) {
    ClusterSums sums(Large::d, Large::k);
    AccumulateClusterSums(large.points, large.labels, &sums);
    benchmark::DoNotOptimize(ApplyMeans(sums, &large.centers));
  }
}

void AttentionLayer(benchmark::State& state, const std::string& level) {
  UseLevel(state, level);
  constexpr int tokens = 1024, d = 32;
  const Matrix<float> queries = Points(4096, d, 16).leftCols(tokens);
  const Matrix<float> keys = Points(4096, d, 16).rightCols(tokens);
  AttentionBlock<float> block = AttentionBlock<float>::Zero(d);
  block.Q.setIdentity();
  block.K.setIdentity();
  block.V.setIdentity();
  for (auto _ : state) benchmark::DoNotOptimize(Attend(block, queries, keys));
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  // Each level this CPU runs, and in a dispatched build auto, the default.
  std::vector<std::string> settings;
  for (kmt::SimdLevel level : kmt::SupportedSimdLevels()) {
    settings.push_back(kmt::SimdLevelName(level));
  }
  if (kmt::CompiledSimdLevels().back() != kmt::SimdLevel::kBuild) settings.push_back("auto");
  auto add = [](const std::string& name, auto run, const std::string& setting,
                benchmark::TimeUnit unit) {
    benchmark::RegisterBenchmark((name + "/" + setting).c_str(), run, setting)
        ->Unit(unit)
        ->UseRealTime();
  };
  for (const std::string& s : settings) {
    add("BM_LloydIteration/1000000/32/64", kmt::LloydIteration, s, benchmark::kMillisecond);
    add("BM_ServedBatch/4096/32/16", kmt::ServedBatch, s, benchmark::kMicrosecond);
  }
  for (const std::string& s : settings) {
    add("BM_GroupAssignment/1000000/32/64", kmt::Assignment, s, benchmark::kMillisecond);
    add("BM_GroupSums/1000000/32/64", kmt::Sums, s, benchmark::kMillisecond);
    add("BM_GroupAttention/1024/32", kmt::AttentionLayer, s, benchmark::kMicrosecond);
  }
  std::fprintf(stderr, "%s\n", kmt::DescribeSimd().c_str());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
