// Speed of the core on one machine, in one process: the fast path per layer
// against reference Lloyd's per iteration, FAISS k-means per iteration and
// the GEMM bound of an iteration (its multiply-adds in sgemm) on the same
// data, the dense evaluator per layer, and each variant of Lloyd's
// on the fast path against its reference; the sparse assignment on TF-IDF
// documents. Float throughout.
//   build/bench/core_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <omp.h>

#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/constructions.h"
#include "core/engine.h"
#include "core/init.h"
#include "core/minibatch.h"
#include "core/numpy_random.h"
#include "core/random.h"
#include "core/simd.h"
#include "core/sparse.h"
#include "core/transformer.h"
#include "reference/lloyd.h"
#include "reference/variant_reference.h"
#include "tests/support/gaussian_clusters.h"
#include "tests/support/random_weights.h"
#include "tests/support/sparse_documents.h"

#ifdef KMT_HAVE_FAISS
#include "bench/faiss_kmeans.h"
#endif

namespace kmt {
namespace {

constexpr int kLayers = 10;

struct Data {
  Matrix<float> points;
  Matrix<float> init;
};

const Data& Problem(int n, int d, int k) {
  static std::map<std::tuple<int, int, int>, Data> cache;
  Data& data = cache[{n, d, k}];
  if (data.points.size() == 0) {
    data.points = GaussianClusters<float>({.n = n, .d = d, .k = k}, 1).points;
    data.init = *InitialCenters(data.points, k, InitMethod::kRandomSubset, 1);
  }
  return data;
}

// Reported as seconds per layer (or iteration): the counter divides the
// run time by `per_run` units.
void SetPerUnit(benchmark::State& state, const char* name, int per_run, int n) {
  state.counters[name] = benchmark::Counter(
      per_run, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n) * per_run);
}

// The Lloyd construction on one evaluator, `layers` layers per run.
void RunLayers(benchmark::State& state, Path path, int layers) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const Data& data = Problem(n, d, k);
  const Model<float> model = *LloydConstruction<float>(d, k, {});
  for (auto _ : state) {
    auto run = RunTransformer(model, data.points, data.init, {.layers = layers, .path = path});
    benchmark::DoNotOptimize(run->objective);
  }
  SetPerUnit(state, "s_per_layer", layers, n);
}

void BM_FastPathLayer(benchmark::State& state) { RunLayers(state, Path::kFast, kLayers); }

void BM_ReferenceLloydIteration(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const Data& data = Problem(n, d, k);
  for (auto _ : state) {
    auto history = ReferenceLloyd(data.points, data.init, 1);
    benchmark::DoNotOptimize(history.back().objective);
  }
  SetPerUnit(state, "s_per_layer", 1, n);
}

void BM_DensePathLayer(benchmark::State& state) { RunLayers(state, Path::kDense, 1); }

// One Lloyd's iteration as a resident job's shard runs it (and the fast path
// each layer): the assignment with its counts and sums in one pass, then the
// means.
void BM_LloydIteration(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const Data& data = Problem(n, d, k);
  Matrix<float> centers = data.init;
  Labels labels;
  for (auto _ : state) {
    ClusterSums sums(d, k);
    benchmark::DoNotOptimize(AssignNearest(data.points, centers, &labels, nullptr, &sums));
    ApplyMeans(sums, &centers);
  }
  SetPerUnit(state, "s_per_layer", 1, n);
}

// A mini-batch fit's steps as a resident shard runs them in one request
// (server/resident_shard.cc): batch_size rows drawn from numpy's stream,
// assigned where they are (AssignRows) on range(3) threads, Sculley's
// update; 3 n / 4,096 steps of 4,096, as bench/minibatch_bench.py's fits.
void BM_MiniBatchSteps(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const int threads = state.range(3);
  const Data& data = Problem(n, d, k);
  const MiniBatchRules rules{
      .k = k, .batch_size = 4096, .steps = 3 * int64_t{n} / 4096, .max_no_improvement = -1};
  const MiniBatchSums sums = [&](const std::vector<int64_t>& rows, const Matrix<double>& centers,
                                 double* objective) -> absl::StatusOr<ClusterSums> {
    ClusterSums batch(d, k);
    Labels labels;
    *objective = AssignRows(data.points, Matrix<float>(centers.cast<float>()), rows.data(),
                            static_cast<Eigen::Index>(rows.size()), &labels, &batch);
    return batch;
  };
  const MiniBatchRows fetch = [&](const std::vector<int64_t>& rows) {
    Matrix<double> points(d, static_cast<Eigen::Index>(rows.size()));
    for (size_t i = 0; i < rows.size(); ++i)
      points.col(i) = data.points.col(rows[i]).cast<double>();
    return absl::StatusOr<Matrix<double>>(std::move(points));
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  for (auto _ : state) {
    MiniBatchState fit{.centers = data.init.cast<double>(),
                       .counts = std::vector<double>(k, 0.0),
                       .random = NumpyRandomState(0)};
    benchmark::DoNotOptimize(RunMiniBatchSteps(rules, n, sums, fetch, nullptr, &fit).ok());
  }
  omp_set_num_threads(saved);
  SetPerUnit(state, "s_per_fit", 1, n);
}
BENCHMARK(BM_MiniBatchSteps)
    ->Args({100000, 32, 16, 1})
    ->Args({200000, 768, 256, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The bound of one Lloyd's iteration: its 2·n·k·d multiply-adds as Eigen's
// sgemm computes them, in the blocks of points the assignment uses, on every
// CPU. s_per_layer is directly comparable with BM_FastPathLayer's; GFLOPs
// is the rate reached.
void BM_GemmBoundOfALayer(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const Data& data = Problem(n, d, k);
  constexpr Eigen::Index kBlock = 1024;
  const Eigen::Index blocks = (n + kBlock - 1) / kBlock;
  for (auto _ : state) {
    float checksum = 0;
#pragma omp parallel reduction(+ : checksum)
    {
      Matrix<float> cross(kBlock, k);
#pragma omp for schedule(static)
      for (Eigen::Index b = 0; b < blocks; ++b) {
        const Eigen::Index rows = std::min<Eigen::Index>(kBlock, n - b * kBlock);
        cross.topRows(rows).noalias() =
            data.points.middleCols(b * kBlock, rows).transpose() * data.init;
        checksum += cross(0, 0);
      }
    }
    benchmark::DoNotOptimize(checksum);
  }
  SetPerUnit(state, "s_per_layer", 1, n);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * n * k * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The shapes of embeddings the engine is measured on (n, d, k): n scaled
// down from the embeddings benchmark's (docs/core.md, "Embeddings") to keep
// each run to seconds.
constexpr std::array<std::array<int, 3>, 4> kEmbeddingShapes = {
    {{100000, 768, 256}, {200000, 128, 1024}, {50000, 1536, 100}, {50000, 384, 4096}}};
void EmbeddingShapes(benchmark::internal::Benchmark* b) {
  for (const auto& [n, d, k] : kEmbeddingShapes) b->Args({n, d, k});
}

// Embedding-like points: unit vectors around `directions` random
// directions (a tenth of their norm of noise per unit of spread), and k of
// them as the centers.
const Data& Embeddings(int n, int d, int k) {
  static std::map<std::tuple<int, int, int>, Data> cache;
  Data& data = cache[{n, d, k}];
  if (data.points.size() == 0) {
    Rng rng(7);
    const int directions = 2 * k;
    Matrix<float> axes(d, directions);
    for (Eigen::Index i = 0; i < axes.size(); ++i) axes.data()[i] = rng.Normal();
    data.points.resize(d, n);
    for (int i = 0; i < n; ++i) {
      Vector<float> x = axes.col(static_cast<Eigen::Index>(rng.Below(directions)));
      for (int l = 0; l < d; ++l) x[l] += static_cast<float>(0.3 * rng.Normal());
      data.points.col(i) = x / x.norm();
    }
    data.init = data.points.leftCols(k);
  }
  return data;
}

// One Lloyd's iteration's assignment with its sums on embedding-like points,
// without the low-precision filter (range(3) = 0) or with one of the CPU's
// (1: AMX's tiles, 2: AVX512-BF16's dot products; skipped where the CPU
// lacks it): `open` is the share of points its scores leave in doubt
// (decided again in float32 among their candidates), `full` the share whose
// candidates were too many (the float32 products over every center).
void BM_EmbeddingAssignment(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const LowPrecisionFilter kind = static_cast<LowPrecisionFilter>(state.range(3));
  const bool filter = kind != LowPrecisionFilter::kNone;
  const std::vector<LowPrecisionFilter> cpu = CpuLowPrecisionFilters();
  if (filter && std::find(cpu.begin(), cpu.end(), kind) == cpu.end()) {
    state.SkipWithError("this CPU lacks the filter");
    return;
  }
  const Data& data = Embeddings(n, d, k);
  if (!UseLowPrecisionFilter(filter ? LowPrecisionFilterName(kind) : "off").ok()) std::abort();
  Labels labels;
  for (auto _ : state) {
    ClusterSums sums(d, k);
    benchmark::DoNotOptimize(AssignNearest(data.points, data.init, &labels, nullptr, &sums));
  }
  if (filter) {
    const NearestCenterScan<float> scan(data.init);
    typename NearestCenterScan<float>::Scratch scratch;
    Labels part(scan.block());
    Vector<float> sq(scan.block());
    for (Eigen::Index first = 0; first < n; first += scan.block()) {
      const Eigen::Index rows = std::min<Eigen::Index>(scan.block(), n - first);
      scan.Scan(data.points.middleCols(first, rows), &scratch, part.data(), sq.data());
    }
    state.counters["open"] = static_cast<double>(scratch.reopened) / n;
    state.counters["full"] = static_cast<double>(scratch.full) / n;
  }
  if (!UseLowPrecisionFilter("auto").ok()) std::abort();
  SetPerUnit(state, "s_per_layer", 1, n);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * n * k * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_EmbeddingAssignment)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (const auto& [n, d, k] : kEmbeddingShapes) {
        for (int filter : {0, 1, 2}) b->Args({n, d, k, filter});
      }
    })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One Lloyd's iteration's assignment with its sums on sparse points:
// TF-IDF documents (n = 100,000, d = 2^17, about 100 terms a row, unit
// norm), the centers two iterations from k of them, the squared distances
// by range(1) (0: SparseDistances::kDense, the dense path's bits at O(d) a
// point; 1: kProduct, O(1) a point), the kernels at the SIMD level range(2)
// (0: auto; 2, 3, 4: x86-64-v2, v3, v4; skipped where the CPU or the binary
// lacks it). GMACs counts scikit-learn's cost model of a sparse iteration,
// nnz k multiply-adds, as a rate.
void BM_SparseAssignment(benchmark::State& state) {
  const int k = state.range(0);
  const SparseDistances distances =
      state.range(1) == 0 ? SparseDistances::kDense : SparseDistances::kProduct;
  const std::string level = state.range(2) == 0 ? "auto" : "v" + std::to_string(state.range(2));
  if (const absl::Status status = UseSimdLevel(level); !status.ok()) {
    state.SkipWithError(std::string(status.message()).c_str());
    return;
  }
  static const CsrMatrix<float> docs =
      TfIdfDocuments<float>({.n = 100000, .d = 1 << 17, .terms = 100}, 21);
  // The centers of a run under way: two Lloyd's iterations from the first
  // k documents.
  Matrix<float> centers = Matrix<float>::Zero(docs.cols(), k);
  for (int j = 0; j < k; ++j) {
    for (int64_t p = docs.indptr()[j]; p < docs.indptr()[j + 1]; ++p) {
      centers(docs.indices()[p], j) = docs.values()[p];
    }
  }
  for (int t = 0; t < 2; ++t) {
    Labels step;
    AssignNearestSparse(docs, centers, &step, nullptr, nullptr, nullptr, SparseDistances::kProduct);
    ClusterSums step_sums(static_cast<int>(docs.cols()), k);
    AccumulateSparseClusterSums(docs, step, &step_sums);
    ApplyMeans(step_sums, &centers);
  }
  Labels labels;
  for (auto _ : state) {
    ClusterSums sums(static_cast<int>(docs.cols()), k);
    benchmark::DoNotOptimize(
        AssignNearestSparse(docs, centers, &labels, nullptr, &sums, nullptr, distances));
  }
  state.SetLabel(absl::StrCat(
      distances == SparseDistances::kDense ? "dense distances, " : "product distances, ",
      SimdChoiceName(ActiveSimdChoice())));
  SetPerUnit(state, "s_per_iteration", 1, static_cast<int>(docs.rows()));
  state.counters["nnz_per_row"] = static_cast<double>(docs.nnz()) / docs.rows();
  state.counters["GMACs"] = benchmark::Counter(static_cast<double>(docs.nnz()) * k * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
  UseSimdLevel("auto").IgnoreError();
}
BENCHMARK(BM_SparseAssignment)
    ->ArgsProduct({{20, 256}, {0, 1}, {0, 2, 3, 4}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#ifdef KMT_HAVE_BLAS
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);

// The bound of BM_EmbeddingAssignment: its 2·n·k·d multiply-adds in the
// system BLAS's sgemm (OpenBLAS, on its own threads, as FAISS runs it), the
// points a block of 1,024 at a time, nothing else. GFLOPs is the rate.
void BM_BlasGemmOfAnAssignment(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const Data& data = Embeddings(n, d, k);
  constexpr int kBlock = 1024;
  Matrix<float> cross(k, kBlock);
  const float one = 1, zero = 0;
  for (auto _ : state) {
    for (int first = 0; first < n; first += kBlock) {
      const int rows = std::min(kBlock, n - first);
      sgemm_("T", "N", &k, &rows, &d, &one, data.init.data(), &d, data.points.col(first).data(), &d,
             &zero, cross.data(), &k);
    }
    benchmark::DoNotOptimize(cross.data());
  }
  SetPerUnit(state, "s_per_layer", 1, n);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * n * k * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BlasGemmOfAnAssignment)
    ->Apply(EmbeddingShapes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif

#ifdef KMT_HAVE_FAISS
void BM_FaissKMeansIteration(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const Data& data = Problem(n, d, k);
  for (auto _ : state) benchmark::DoNotOptimize(FaissKMeans(data.points, data.init, kLayers));
  SetPerUnit(state, "s_per_layer", kLayers, n);
}
BENCHMARK(BM_FaissKMeansIteration)
    ->Args({100000, 32, 64})
    ->Args({1000000, 32, 64})
    ->Apply(EmbeddingShapes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif

void BM_LearnedModelRun(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2), layers = state.range(3);
  const Data& data = Problem(n, d, k);
  // A learned model as the service runs it (paper B's main setting: one-hot,
  // d = 32, k = 10, n = 512, T = 20 layers with re-embedding, softmax at
  // beta = 1/sqrt(d_emb)), with random weights of the shipped model's shapes:
  // the work does not depend on their values.
  const Model<float> model = RandomSoftmaxModel<float>(d, k, InputScaling::kGlobalMinMax, 5);
  for (auto _ : state) {
    auto run = RunTransformer(model, data.points, data.init, {.layers = layers});
    benchmark::DoNotOptimize(run->objective);
  }
  SetPerUnit(state, "s_per_run", 1, n);
}

// The same run guarded (Model::guard): each layer also takes one exact
// Lloyd's step from the same centers and keeps the better of the two; the
// difference from BM_LearnedModelRun is what the guard costs.
void BM_GuardedLearnedModelRun(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2), layers = state.range(3);
  const Data& data = Problem(n, d, k);
  Model<float> model = RandomSoftmaxModel<float>(d, k, InputScaling::kGlobalMinMax, 5);
  model.guard = true;
  for (auto _ : state) {
    auto run = RunTransformer(model, data.points, data.init, {.layers = layers});
    benchmark::DoNotOptimize(run->objective);
  }
  SetPerUnit(state, "s_per_run", 1, n);
}

// The guarded answer as the server gives it (core/engine.h): the per-layer
// guarded run, then exact Lloyd's from the same initial centers for the same
// layers, the lower final objective answering. Against BM_GuardedLearnedModelRun
// and BM_LloydRunOfTheSameShape it is what the answer's guarantee costs.
void BM_GuardedAnswer(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2), layers = state.range(3);
  const Data& data = Problem(n, d, k);
  const ServedModel<float> served = *ServedModel<float>::FromWeights(
      RandomSoftmaxModel<float>(d, k, InputScaling::kGlobalMinMax, 5), "");
  const Batch<float> batch = *Batch<float>::Validate(
      {.points = data.points, .k = k, .layers = layers, .given_centers = data.init, .guard = true});
  for (auto _ : state) benchmark::DoNotOptimize(Cluster(served, batch)->objective);
  SetPerUnit(state, "s_per_run", 1, n);
}

// Exact Lloyd's alone at that shape, from the same centers, for the same
// layers: what the answer's guard adds to the guarded run.
void BM_LloydRunOfTheSameShape(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2), layers = state.range(3);
  const Data& data = Problem(n, d, k);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        RunLloyd<float>({}, data.points, data.init, {.layers = layers})->objective);
  }
  SetPerUnit(state, "s_per_run", 1, n);
}

// The bound of that run: its matrix products alone, in Eigen's sgemm at the
// same shapes (per layer and block: the three projections, the scores and
// the weighted values), on every CPU.
void BM_GemmBoundOfALearnedRun(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2), layers = state.range(3);
  const int dim = d + k;
  const Matrix<float> w = Matrix<float>::Random(dim, dim);
  const Matrix<float> x = Matrix<float>::Random(dim, n), c = Matrix<float>::Random(dim, k);
  // (queries, keys) of theta1..theta4.
  const std::pair<const Matrix<float>*, const Matrix<float>*> blocks[] = {
      {&x, &c}, {&x, &x}, {&c, &x}, {&c, &c}};
  double flops = 0;
  for (const auto& [q, kv] : blocks) {
    flops += 2.0 * dim * dim * (q->cols() + 2 * kv->cols()) + 4.0 * dim * q->cols() * kv->cols();
  }
  for (auto _ : state) {
    for (int t = 0; t < layers; ++t) {
      for (const auto& [q, kv] : blocks) {
        const Matrix<float> queries = w * *q, keys = w * *kv, values = w * *kv;
        const Matrix<float> scores = keys.transpose() * queries;
        const Matrix<float> out = values * scores;
        benchmark::DoNotOptimize(out.data());
      }
    }
  }
  SetPerUnit(state, "s_per_run", 1, n);
  state.counters["GFLOPs"] =
      benchmark::Counter(flops * layers * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_LearnedModelRun)
    ->Args({512, 32, 10, 20})
    ->Args({1024, 32, 10, 20})
    ->Args({2048, 32, 10, 20})
    ->Args({4096, 32, 10, 20})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_GuardedAnswer)
    ->Args({512, 32, 10, 20})
    ->Args({2048, 32, 10, 20})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LloydRunOfTheSameShape)
    ->Args({512, 32, 10, 20})
    ->Args({2048, 32, 10, 20})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_GuardedLearnedModelRun)
    ->Args({512, 32, 10, 20})
    ->Args({2048, 32, 10, 20})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_GemmBoundOfALearnedRun)
    ->Args({512, 32, 10, 20})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_FastPathLayer)
    ->Args({100000, 32, 64})
    ->Args({1000000, 32, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LloydIteration)
    ->Args({4096, 32, 16})
    ->Args({100000, 32, 64})
    ->Args({1000000, 32, 64})
    ->Apply(EmbeddingShapes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_GemmBoundOfALayer)
    ->Args({4096, 32, 16})
    ->Args({100000, 32, 64})
    ->Args({1000000, 32, 64})
    ->Apply(EmbeddingShapes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ReferenceLloydIteration)
    ->Args({100000, 32, 64})
    ->Args({1000000, 32, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_DensePathLayer)
    ->Args({256, 32, 64})
    ->Args({1024, 32, 64})
    ->Args({4096, 32, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Paper A's variants (docs/variants.md): the engine's fast path per layer
// against the plain reference per iteration.
struct Variant {
  const char* model;
  BatchSpec<float> parameters;                   // the parameters and seed
  std::function<double(const Data&)> reference;  // one iteration; returns the objective
};

// Parameters on the scale of the generated tasks (points in [0, 1]^32).
const std::vector<Variant>& Variants() {
  static const std::vector<Variant> variants = {
      {"soft-kmeans",
       {.parameters = {{"beta", 100}}},
       [](const Data& p) {
         return ReferenceSoftKMeans(p.points, p.init, 100, 1).back().objective;
       }},
      {"trimmed-kmeans",
       {.parameters = {{"tau", 1.0}}},
       [](const Data& p) {
         return ReferenceTrimmedKMeans(p.points, p.init, 1.0, 1).back().objective;
       }},
      {"robust-kmeans",
       {.parameters = {{"beta", 1}}},
       [](const Data& p) {
         return ReferenceRobustKMeans(p.points, p.init, 1.0, 1).back().objective;
       }},
      {"kmedoids",
       {.seed = 3, .parameters = {{"gamma", 20}}},
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

void BM_VariantFastPathLayer(benchmark::State& state) {
  const Variant& v = Variants()[state.range(0)];  // lifetime: a static table
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
  SetPerUnit(state, "s_per_layer", kLayers, n);
}

void BM_VariantReferenceIteration(benchmark::State& state) {
  const Variant& v = Variants()[state.range(0)];  // lifetime: a static table
  const int n = state.range(1);
  const Data& data = Problem(n, 32, 64);
  state.SetLabel(v.model);
  for (auto _ : state) benchmark::DoNotOptimize(v.reference(data));
  SetPerUnit(state, "s_per_layer", 1, n);
}

void VariantArgs(benchmark::internal::Benchmark* b) {
  for (int v = 0; v < static_cast<int>(Variants().size()); ++v) {
    for (int n : {100000, 1000000}) b->Args({v, n});
  }
}

BENCHMARK(BM_VariantFastPathLayer)
    ->Apply(VariantArgs)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_VariantReferenceIteration)
    ->Apply(VariantArgs)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace kmt

BENCHMARK_MAIN();
