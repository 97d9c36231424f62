// Paper B's cost table ("Leaner Transformers Can Easily Learn to Cluster",
// arXiv 2610.09760): the learned layer's forward and backward passes as the
// trainer runs them (learn/learned_layer.h), one-hot registers (d_emb = d + k)
// against binary ones (d + ceil(log2 k)), d = 32, n = 1,024, batches of 32
// tasks, k in {6, 25, 100, 400, 1000}. Float, random weights of the trainer's
// initial scale.
//   build/bench/learned_cost_bench
//
// Time, per batch: the 32 tasks spread over the threads, as the trainer
// spreads them, as wall-clock time and as the CPU time of all threads; each
// thread keeps one cache and reuses its buffers, as the trainer does.
// Forward: LayerForward of every task, filling its cache. Backward:
// LayerBackward of every task from its cache and its loss gradient; the
// forward passes and the loss run untimed, one task per thread at a time,
// so that one cache per thread is alive, as in training.
// Memory, per task, from the heap counter (bench/heap_counter.h; not in
// sanitizer builds), with a fresh cache: kept = bytes allocated after the
// forward pass and not before (the activations cached for the backward
// pass, and the d x k output); peak = the most bytes allocated at once
// during the forward and backward passes beyond what was allocated before
// them (the loss runs before, uncounted), the buffers the backward pass
// adds to the cache included. A batch computed as one tensor, as on a GPU, holds 32
// tasks' worth; the trainer holds one per thread.
// After the benchmarks, a table of one-hot against binary at each k.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/embedding.h"
#include "core/random.h"
#include "learn/learned_layer.h"
#include "learn/smoothed_objective.h"
#include "learn/task_generator.h"
#include "tests/support/random_weights.h"

#ifdef KMT_COUNT_HEAP
#include "bench/heap_counter.h"
#endif

namespace kmt {
namespace {

constexpr int kD = 32, kN = 1024, kBatch = 32;
constexpr double kTau = 0.1;  // the training loss's temperature
constexpr Embedding kEmbeddings[] = {Embedding::kOneHot, Embedding::kBinary};

// Weights as the trainer starts them, the same for every pass measured.
LayerWeights<float> StartingWeights(Embedding embedding, int k) {
  Rng rng(1);
  return RandomSoftmaxLayer<float>(kD + RegisterDim(embedding, k), rng);
}

struct Problem {
  std::vector<Matrix<float>> points;   // kBatch tasks, d x n
  std::vector<Matrix<float>> centers;  // their initial centers, d x k
};

const Problem& Tasks(int k) {
  static std::map<int, Problem> cache;
  Problem& p = cache[k];
  if (p.points.empty()) {
    for (int t = 0; t < kBatch; ++t) {
      p.points.push_back(GenerateTask<float>({.n = kN, .d = kD, .k = k}, 100 + t).points);
      p.centers.push_back(p.points.back().leftCols(k));
    }
  }
  return p;
}

// Wall-clock time and the CPU time of all the process's threads, which a
// shared machine disturbs less.
struct Clock {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  double cpu = ProcessCpuSeconds();

  static double ProcessCpuSeconds() {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  double WallSeconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  }
  double CpuSeconds() const { return ProcessCpuSeconds() - cpu; }
};

// Per batch (times) and per task (bytes).
struct Figures {
  double forward_wall = 0, forward_cpu = 0, backward_wall = 0, backward_cpu = 0;
  double kept_bytes = 0, peak_bytes = 0;
};
std::map<std::pair<Embedding, int>, Figures> figures;

void Label(benchmark::State& state, Embedding embedding, int k) {
  state.SetLabel(absl::StrCat("d_emb=", kD + RegisterDim(embedding, k)));
}

void Forward(benchmark::State& state, Embedding embedding, int k) {
  const Problem& p = Tasks(k);
  const LayerWeights<float> w = StartingWeights(embedding, k);
  // One cache per thread, its buffers reused from task to task.
  std::vector<LayerCache<float>> caches(omp_get_max_threads());
  double wall = 0, cpu = 0;
  for (auto _ : state) {
    const Clock start;
#pragma omp parallel for schedule(dynamic)
    for (int t = 0; t < kBatch; ++t) {
      LayerCache<float>* cache = &caches[omp_get_thread_num()];
      benchmark::DoNotOptimize(LayerForward(w, embedding, p.points[t], p.centers[t], cache));
    }
    wall += start.WallSeconds();
    cpu += start.CpuSeconds();
  }
  Figures& f = figures[{embedding, k}];
  f.forward_wall = wall / state.iterations();
  f.forward_cpu = cpu / state.iterations();
  state.counters["cpu_ms"] = 1e3 * f.forward_cpu;
  Label(state, embedding, k);
}

void Backward(benchmark::State& state, Embedding embedding, int k) {
  const Problem& p = Tasks(k);
  const LayerWeights<float> w = StartingWeights(embedding, k);
  const int threads = omp_get_max_threads();
  std::vector<LayerCache<float>> caches(threads);
  std::vector<Matrix<float>> d_centers(threads);
  std::vector<LayerWeights<float>> grads(threads, ZeroLike(w));
  double wall = 0, cpu = 0;
  for (auto _ : state) {
    double seconds = 0;
    for (int first = 0; first < kBatch; first += threads) {
      const int wave = std::min(threads, kBatch - first);
#pragma omp parallel for
      for (int i = 0; i < wave; ++i) {
        const int t = first + i;
        const Matrix<float> centers =
            LayerForward(w, embedding, p.points[t], p.centers[t], &caches[i]);
        d_centers[i] = Matrix<float>::Zero(kD, k);
        SmoothedObjective<float>(p.points[t], centers, kTau, LossForm::kSoftmax, 1.0f / kBatch,
                                 &d_centers[i]);
      }
      const Clock start;
#pragma omp parallel for
      for (int i = 0; i < wave; ++i) LayerBackward(w, d_centers[i], &caches[i], &grads[i]);
      seconds += start.WallSeconds();
      cpu += start.CpuSeconds();
    }
    state.SetIterationTime(seconds);
    wall += seconds;
  }
  Figures& f = figures[{embedding, k}];
  f.backward_wall = wall / state.iterations();
  f.backward_cpu = cpu / state.iterations();
  state.counters["cpu_ms"] = 1e3 * f.backward_cpu;
  Label(state, embedding, k);
}

#ifdef KMT_COUNT_HEAP
// One task's passes on this thread alone, counted by the heap counter. The
// loss gradient is computed first, outside the count.
void Memory(benchmark::State& state, Embedding embedding, int k) {
  const Problem& p = Tasks(k);
  const LayerWeights<float> w = StartingWeights(embedding, k);
  LayerWeights<float> grad = ZeroLike(w);
  Matrix<float> d_centers = Matrix<float>::Zero(kD, k);
  {
    LayerCache<float> cache;
    const Matrix<float> centers = LayerForward(w, embedding, p.points[0], p.centers[0], &cache);
    SmoothedObjective<float>(p.points[0], centers, kTau, LossForm::kSoftmax, 1.0f, &d_centers);
  }
  int64_t kept = 0, peak = 0;
  for (auto _ : state) {
    const int64_t before = HeapLiveBytes();
    ResetHeapPeak();
    {
      LayerCache<float> cache;
      benchmark::DoNotOptimize(LayerForward(w, embedding, p.points[0], p.centers[0], &cache));
      kept = HeapLiveBytes() - before;
      LayerBackward(w, d_centers, &cache, &grad);
    }
    peak = HeapPeakBytes() - before;
  }
  state.counters["kept_MB"] = static_cast<double>(kept) / 1e6;
  state.counters["peak_MB"] = static_cast<double>(peak) / 1e6;
  figures[{embedding, k}].kept_bytes = static_cast<double>(kept);
  figures[{embedding, k}].peak_bytes = static_cast<double>(peak);
  Label(state, embedding, k);
}
#endif

constexpr int kClusters[] = {6, 25, 100, 400, 1000};

// forward/onehot/k:6, ...: a few seconds each; the one-hot layer at k = 1000
// takes seconds per batch.
void Register() {
  for (const auto& [name, pass] :
       {std::pair{"forward", &Forward}, std::pair{"backward", &Backward}}) {
    for (int k : kClusters) {
      for (Embedding e : kEmbeddings) {
        auto* b = benchmark::RegisterBenchmark(
            absl::StrCat(name, "/", EmbeddingName(e), "/k:", k).c_str(), pass, e, k);
        b->Unit(benchmark::kMillisecond)->MinTime(1.0);
        if (pass == &Forward) {
          b->UseRealTime();
        } else {
          b->UseManualTime();
        }
      }
    }
  }
#ifdef KMT_COUNT_HEAP
  for (int k : kClusters) {
    for (Embedding e : kEmbeddings) {
      benchmark::RegisterBenchmark(absl::StrCat("memory/", EmbeddingName(e), "/k:", k).c_str(),
                                   &Memory, e, k)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1);
    }
  }
#endif
}

double Ratio(double one_hot, double binary) { return binary > 0 ? one_hot / binary : 0.0; }

void PrintTable() {
  std::printf(
      "\nOne-hot against binary registers, d = %d, n = %d, batches of %d tasks on %d threads.\n"
      "Times per batch in ms, as CPU time of all threads (wall-clock time in brackets);\n"
      "memory per task in MB; x = one-hot / binary.\n"
      "%5s | %21s %21s %6s | %21s %21s %6s | %8s %8s %5s | %8s %8s %5s\n",
      kD, kN, kBatch, omp_get_max_threads(), "k", "forward one-hot", "forward binary", "x",
      "backward one-hot", "backward binary", "x", "kept 1h", "kept bin", "x", "peak 1h", "peak bin",
      "x");
  for (int k : kClusters) {
    const Figures& one = figures[{Embedding::kOneHot, k}];
    const Figures& bin = figures[{Embedding::kBinary, k}];
    if (one.forward_cpu == 0 && one.backward_cpu == 0 && one.peak_bytes == 0) continue;
    const auto time = [](double cpu, double wall) {
      return absl::StrFormat("%9.0f (%9.0f)", 1e3 * cpu, 1e3 * wall);
    };
    std::printf(
        "%5d | %21s %21s %5.1fx | %21s %21s %5.1fx | %8.1f %8.1f %4.1fx | %8.1f %8.1f %4.1fx\n", k,
        time(one.forward_cpu, one.forward_wall).c_str(),
        time(bin.forward_cpu, bin.forward_wall).c_str(), Ratio(one.forward_cpu, bin.forward_cpu),
        time(one.backward_cpu, one.backward_wall).c_str(),
        time(bin.backward_cpu, bin.backward_wall).c_str(),
        Ratio(one.backward_cpu, bin.backward_cpu), one.kept_bytes / 1e6, bin.kept_bytes / 1e6,
        Ratio(one.kept_bytes, bin.kept_bytes), one.peak_bytes / 1e6, bin.peak_bytes / 1e6,
        Ratio(one.peak_bytes, bin.peak_bytes));
  }
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  kmt::PrintTable();
  return 0;
}
