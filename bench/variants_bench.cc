// Speed of each variant of Lloyd's algorithm (docs/variants.md): the engine's
// fast path per layer against the plain reference per iteration, on the same
// data in one process. Float, d = 32, k = 64.
//   build/bench/variants_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <functional>
#include <map>
#include <string>

#include "core/engine.h"
#include "core/init.h"
#include "core/variant_reference.h"
#include "learn/task_generator.h"

namespace kmt {
namespace {

constexpr int kLayers = 10;

struct Data {
  Matrix<float> points;
  Matrix<float> init;
};

const Data& Problem(int n, int d, int k) {
  static std::map<int, Data> cache;
  Data& data = cache[n];
  if (data.points.size() == 0) {
    data.points = GenerateTask<float>({.n = n, .d = d, .k = k}, 1).points;
    data.init = *InitialCenters(data.points, k, InitMethod::kRandomSubset, 1);
  }
  return data;
}

struct Variant {
  const char* model;
  BatchSpec<float> parameters;                   // beta, tau, gamma, seed
  std::function<double(const Data&)> reference;  // one iteration; returns the objective
};

// Parameters on the scale of the generated tasks (points in [0, 1]^32).
const std::vector<Variant>& Variants() {
  static const std::vector<Variant> variants = {
      {"soft-kmeans",
       {.beta = 100},
       [](const Data& p) {
         return ReferenceSoftKMeans(p.points, p.init, 100, 1).back().objective;
       }},
      {"trimmed-kmeans",
       {.tau = 1.0},
       [](const Data& p) {
         return ReferenceTrimmedKMeans(p.points, p.init, 1.0, 1).back().objective;
       }},
      {"robust-kmeans",
       {.beta = 1},
       [](const Data& p) {
         return ReferenceRobustKMeans(p.points, p.init, 1.0, 1).back().objective;
       }},
      {"kmedoids",
       {.seed = 3, .gamma = 20},
       [](const Data& p) {
         return ReferenceKMedoids(p.points, p.init, 20, 3, 1).back().objective;
       }},
      {"spherical-kmeans",
       {},
       [](const Data& p) {
         return ReferenceSphericalKMeans(p.points, p.init, 1).back().objective;
       }},
  };
  return variants;
}

void SetPerLayer(benchmark::State& state, int per_run, int n) {
  state.counters["s_per_layer"] = benchmark::Counter(
      per_run, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n) * per_run);
}

void BM_VariantFastPathLayer(benchmark::State& state) {
  const Variant& v = Variants()[state.range(0)];
  const int n = state.range(1);
  const Data& data = Problem(n, 32, 64);
  state.SetLabel(v.model);
  const ServedModel<float>* model = nullptr;
  static const std::vector<ServedModel<float>> models = ExactModels<float>();
  for (const ServedModel<float>& m : models) {
    if (m.name() == v.model) model = &m;
  }
  BatchSpec<float> spec = v.parameters;
  spec.points = data.points;
  spec.k = 64;
  spec.layers = kLayers;
  spec.given_centers = data.init;
  const Batch<float> batch = *Batch<float>::Validate(std::move(spec));
  for (auto _ : state) {
    auto run = Cluster(*model, batch);
    benchmark::DoNotOptimize(run->objective);
  }
  SetPerLayer(state, kLayers, n);
}

void BM_VariantReferenceIteration(benchmark::State& state) {
  const Variant& v = Variants()[state.range(0)];
  const int n = state.range(1);
  const Data& data = Problem(n, 32, 64);
  state.SetLabel(v.model);
  for (auto _ : state) benchmark::DoNotOptimize(v.reference(data));
  SetPerLayer(state, 1, n);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int v = 0; v < static_cast<int>(Variants().size()); ++v) {
    for (int n : {100000, 1000000}) b->Args({v, n});
  }
}

BENCHMARK(BM_VariantFastPathLayer)->Apply(Args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_VariantReferenceIteration)
    ->Apply(Args)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace kmt

BENCHMARK_MAIN();
