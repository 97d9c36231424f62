#include "client/in_process_bench.h"

#include <omp.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "base/cpus.h"
#include "core/engine.h"
#include "proto/request.h"

namespace kmt {

double ProcessCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return t.tv_sec + 1e-6 * t.tv_usec; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

absl::StatusOr<Throughput> InProcessThroughput(const std::vector<v1::ClusterRequest>& batches,
                                               int64_t count) {
  std::optional<ServedModel<float>> model;
  for (ServedModel<float>& m : ExactModels<float>()) {
    if (m.name() == batches[0].model()) model = std::move(m);
  }
  if (!model) {
    return absl::InvalidArgumentError(
        "--in_process compares exact models only (kmt models lists them)");
  }
  // What a server's worker does with a batch, less the response.
  const auto one = [&model](const v1::ClusterRequest& r) -> absl::Status {
    absl::StatusOr<Batch<float>> batch = BatchFromRequest(r);
    if (!batch.ok()) return batch.status();
    return Cluster(*model, *batch).status();
  };
  const int threads = UsableCpus();
  std::atomic<int64_t> next{0};
  std::mutex mu;
  absl::Status failure;
  const double cpu_start = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      omp_set_num_threads(1);
      for (int64_t i; (i = next++) < count;) {
        if (absl::Status s = one(batches[i % batches.size()]); !s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          failure.Update(s);
          return;
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (!failure.ok()) return failure;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Throughput{count / seconds, (ProcessCpuSeconds() - cpu_start) / count};
}

}  // namespace kmt
