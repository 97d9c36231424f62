// Lloyd's on the fast path with the bound-based assignment against the same
// run with every distance through the products (the fast path before the
// bounds), in one process: to convergence (an assignment that changes no
// label) and per layer, on well-separated Gaussian blobs and on uniform
// random points, with the GEMM bound of one iteration (its 2 n k d
// multiply-adds in sgemm) beside. Float.
//   build/bench/bounds_bench --benchmark_counters_tabular=true
// Arguments: n, d, k, data (0: blobs from greedy k-means++, the engine's
// default, 1: uniform from a random subset, 2: blobs from a random subset),
// assignment (0: products,
// 1: automatic, 2: bounds forced), layer cap, sums (0: double, added again
// at every layer, the sums before exact ones; 1: the automatic choice, exact
// where the bounds may pay), objectives (0: the last layer's alone, as a
// request that asks for no trajectory runs, so that the bounds need not read
// the points they settle; 1: every layer's). BOUNDS_BENCH_N and
// BOUNDS_BENCH_CAP, if set, replace n = 10^6 and the cap of 300 layers (a
// loaded machine, a quick look). BOUNDS_BENCH_DUMP, if set, is a folder the
// data and initial centers of each problem are written to as .npy (points
// n x d, centers k x d, float32), for the peers' runs of
// bench/bounds_peers.py; BM_Faiss runs FAISS's k-means from the same
// centers, where it is installed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/exact_sums.h"
#include "core/init.h"
#include "core/random.h"
#include "core/transformer.h"
#include "tests/support/gaussian_clusters.h"

#ifdef KMT_HAVE_FAISS
#include "bench/faiss_kmeans.h"
#endif

namespace kmt {
namespace {

struct Data {
  Matrix<float> points;
  Matrix<float> init;
  double gemm_seconds = 0;  // one iteration's products alone
};

// One iteration's products alone, in blocks of points, on every CPU; the
// best of a few runs.
double GemmSeconds(const Matrix<float>& points, const Matrix<float>& centers) {
  constexpr Eigen::Index kBlock = 1024;
  const Eigen::Index n = points.cols(), blocks = (n + kBlock - 1) / kBlock;
  double best = 1e300;
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    float checksum = 0;
#pragma omp parallel reduction(+ : checksum)
    {
      Matrix<float> cross(kBlock, centers.cols());
#pragma omp for schedule(static)
      for (Eigen::Index b = 0; b < blocks; ++b) {
        const Eigen::Index rows = std::min<Eigen::Index>(kBlock, n - b * kBlock);
        cross.topRows(rows).noalias() = points.middleCols(b * kBlock, rows).transpose() * centers;
        checksum += cross(0, 0);
      }
    }
    benchmark::DoNotOptimize(checksum);
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// A d x m column-major matrix as an m x d row-major float32 .npy (version 1).
void WriteNpy(const std::string& path, const Matrix<float>& m) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(m.cols()) + ", " + std::to_string(m.rows()) + "), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  const uint16_t length = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(m.data()),
            static_cast<std::streamsize>(m.size() * sizeof(float)));
}

const Data& Problem(int n, int d, int k, int kind) {
  static std::map<std::tuple<int, int, int, int>, Data> cache;
  Data& data = cache[{n, d, k, kind}];
  const bool uniform = kind == 1;
  if (data.points.size() == 0) {
    if (uniform) {
      Rng rng(1);
      data.points.resize(d, n);
      for (Eigen::Index i = 0; i < data.points.size(); ++i) {
        data.points.data()[i] = static_cast<float>(rng.Uniform());
      }
    } else {
      data.points = GaussianClusters<float>({.n = n, .d = d, .k = k, .scale = 0.02}, 1).points;
    }
    data.init = *InitialCenters(
        data.points, k, kind == 0 ? InitMethod::kKMeansPlusPlus : InitMethod::kRandomSubset, 1);
    data.gemm_seconds = GemmSeconds(data.points, data.init);
    if (const char* dump = std::getenv("BOUNDS_BENCH_DUMP")) {
      const std::string name = std::string(dump) + "/n" + std::to_string(n) + "_d" +
                               std::to_string(d) + "_k" + std::to_string(k) + "_data" +
                               std::to_string(kind);
      WriteNpy(name + "_points.npy", data.points);
      WriteNpy(name + "_init.npy", data.init);
    }
  }
  return data;
}

void BM_Lloyd(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const AssignmentPath path = state.range(4) == 0   ? AssignmentPath::kProducts
                              : state.range(4) == 1 ? AssignmentPath::kAuto
                                                    : AssignmentPath::kBounds;
  const SumsPath sums = state.range(6) == 0 ? SumsPath::kDouble : SumsPath::kAuto;
  const Data& data = Problem(n, d, k, static_cast<int>(state.range(3)));
  // shift_tolerance 0: the run stops at the first layer whose assignment
  // changed no label (or whose centers did not move), or at the cap.
  const RunOptions options{.layers = static_cast<int>(state.range(5)),
                           .layer_objectives = state.range(7) == 1,
                           .shift_tolerance = 0.0,
                           .assignment = path,
                           .sums = sums};
  int layers = 0;
  double settled = 0, bounded = 0, from_moves = 0, unread = 0;
  std::vector<AssignmentStats> run_stats;
  for (auto _ : state) {
    auto run = RunLloyd<float>({}, data.points, data.init, options);
    benchmark::DoNotOptimize(run->objective);
    layers = run->layers_run;
    run_stats = run->assignments;
    settled = bounded = from_moves = unread = 0;
    for (const AssignmentStats& a : run->assignments) {
      settled += static_cast<double>(a.settled) / n;
      bounded += a.bounded ? 1 : 0;
      from_moves += a.sums_from_moves ? 1 : 0;
      unread += static_cast<double>(a.unread) / n;
    }
  }
  state.counters["layers"] = layers;
  state.counters["s_per_layer"] = benchmark::Counter(
      layers, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  // The assignments (layers + 1 of them) the bounds decided, and the mean
  // fraction of points they settled (or would have, in a products pass).
  state.counters["bounded"] = bounded;
  // The assignments whose sums followed the moved points alone.
  state.counters["from_moves"] = from_moves;
  double grouped = 0;
  if (!run_stats.empty()) {
    for (const AssignmentStats& a : run_stats) grouped += static_cast<double>(a.grouped) / n;
    grouped /= static_cast<double>(run_stats.size());
  }
  state.counters["grouped"] = grouped;
  state.counters["settled"] = settled / (layers + 1);
  // The mean fraction of the points settled without being read (their upper
  // bound on the distance to their own center proved their label).
  state.counters["unread"] = unread / (layers + 1);
  state.counters["gemm_s"] = data.gemm_seconds;
  state.counters["GFLOPs"] = 2.0 * n * k * d * 1e-9 / data.gemm_seconds;
}

// What a settled iteration's sums cost against what they replace, on the
// blobs' points (n x d, k centers) under their initial labels: 0, double
// sums of every point (AccumulateClusterSums, what each layer added before
// exact sums); 1, exact sums of every point (the first assignment, or one
// that moved more than half the points); 2, exact sums updated by 1% of the
// points moving; 3, one pass over the labels and a bound per point (read,
// drift subtracted, compared), the floor of any bound-based iteration; 4,
// one pass over every point's coordinates (a squared distance to its
// center), the floor of an iteration that computes each point's distance to
// its own center, as the objective and the filters here do; 5, the exact
// sums' fixed point made (ExactClusterSums::Make: the span of every
// coordinate), once per run. At d = 768 the blobs' terms take two pieces
// (core/exact_sums.h), as embeddings' do.
void BM_Sums(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), d = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  const Data& data = Problem(n, d, k, 2);
  Labels labels;
  AssignNearest(data.points, data.init, &labels);
  std::unique_ptr<ExactClusterSums<float>> exact =
      ExactClusterSums<float>::Make(data.points, nullptr, k);
  exact->Recompute(labels);
  std::vector<ExactClusterSums<float>::Move> moves;
  Rng rng(3);
  for (Eigen::Index i = 0; i < n; i += 100) {
    const int to = static_cast<int>(rng.Below(k));
    if (to != labels[i]) moves.push_back({i, labels[i], to});
  }
  std::vector<ExactClusterSums<float>::Move> back = moves;
  for (auto& m : back) std::swap(m.from, m.to);
  std::vector<float> bounds(n, 1.0f);
  int round = 0;
  state.counters["pieces"] = exact->pieces();
  for (auto _ : state) {
    switch (state.range(3)) {
      case 0: {
        ClusterSums sums(d, k);
        AccumulateClusterSums(data.points, labels, &sums);
        benchmark::DoNotOptimize(sums.sums.data());
        break;
      }
      case 1:
        exact->Recompute(labels);
        break;
      case 2:
        exact->Apply(round++ % 2 == 0 ? moves : back);
        break;
      case 5:
        benchmark::DoNotOptimize(ExactClusterSums<float>::Make(data.points, nullptr, k));
        break;
      case 4: {
        double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
        for (int i = 0; i < n; ++i) {
          total += AssignedSquaredDistance(data.points.col(i).data(),
                                           data.init.col(labels[i]).data(), d);
        }
        benchmark::DoNotOptimize(total);
        break;
      }
      default: {
        int64_t settled = 0;
        const double drift = 0.25;
#pragma omp parallel for reduction(+ : settled) schedule(static)
        for (int i = 0; i < n; ++i) {
          settled += static_cast<double>(bounds[i]) - drift > 0.5 * labels[i] / k;
        }
        benchmark::DoNotOptimize(settled);
      }
    }
  }
}
BENCHMARK(BM_Sums)
    ->ArgsProduct({{1000000}, {32}, {64}, {0, 1, 2, 3, 4, 5}})
    ->ArgsProduct({{200000}, {768}, {256}, {0, 1, 2, 5}})
    ->ArgNames({"n", "d", "k", "what"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#ifdef KMT_HAVE_FAISS
// FAISS's k-means (flat L2 index, every point at every iteration) from the
// same initial centers, for a fixed number of iterations (it has no
// convergence test): the last argument.
void BM_Faiss(benchmark::State& state) {
  const int n = state.range(0), d = state.range(1), k = state.range(2);
  const Data& data = Problem(n, d, k, static_cast<int>(state.range(3)));
  const int iterations = static_cast<int>(state.range(4));
  for (auto _ : state) {
    benchmark::DoNotOptimize(FaissKMeans(data.points, data.init, iterations));
  }
  state.counters["layers"] = iterations;
  state.counters["s_per_layer"] = benchmark::Counter(
      iterations, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
// The targets' shape on both data, and the large one on separated blobs, at
// the n of BM_Lloyd's runs of them.
void FaissShapes(benchmark::internal::Benchmark* b) {
  const char* n_env = std::getenv("BOUNDS_BENCH_N");
  const int full = n_env != nullptr ? std::atoi(n_env) : 1000000;
  b->Args({full, 32, 64, 2, 20})->Args({full, 32, 64, 1, 20});
  b->Args({std::min(full, 200000), 128, 1024, 2, 10});
}
BENCHMARK(BM_Faiss)
    ->Apply(FaissShapes)
    ->ArgNames({"n", "d", "k", "data", "iterations"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();
#endif

// Each shape on both data, the products, the automatic choice with double
// sums and the automatic choice next to each other; n = 10^6 but for the
// shapes whose products take longest.
void Shapes(benchmark::internal::Benchmark* b) {
  const char* n_env = std::getenv("BOUNDS_BENCH_N");
  const char* cap_env = std::getenv("BOUNDS_BENCH_CAP");
  const int full = n_env != nullptr ? std::atoi(n_env) : 1000000;
  const int full_cap = cap_env != nullptr ? std::atoi(cap_env) : 300;
  // The shape of the targets first.
  std::vector<std::pair<int, int>> shapes = {{32, 64}};
  for (const int d : {2, 8, 32, 128}) {
    for (const int k : {8, 64, 1024}) {
      if (d != 32 || k != 64) shapes.emplace_back(d, k);
    }
  }
  for (const auto& [d, k] : shapes) {
    const bool large = d * k >= 32 * 1024;
    const int n = large ? std::min(full, 200000) : full;
    const int cap = large ? std::min(full_cap, 30) : full_cap;
    for (const int kind : {0, 1, 2}) {
      b->Args({n, d, k, kind, 0, cap, 1, 0});
      b->Args({n, d, k, kind, 1, cap, 0, 1});
      b->Args({n, d, k, kind, 1, cap, 1, 1});
      b->Args({n, d, k, kind, 1, cap, 1, 0});
    }
  }
}

BENCHMARK(BM_Lloyd)
    ->Apply(Shapes)
    ->ArgNames({"n", "d", "k", "data", "path", "cap", "sums", "objectives"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace
}  // namespace kmt

BENCHMARK_MAIN();
