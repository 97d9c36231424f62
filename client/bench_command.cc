// kmt bench: --concurrency streams, one batch in flight on each, send a few
// synthetic batches round robin for --duration or --count batches; prints
// latency percentiles, throughput, status counts and the client's CPU time,
// and with --in_process the core's throughput on the same batches.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli_flags.h"
#include "client/cluster_client.h"
#include "client/commands.h"
#include "client/in_process_bench.h"
#include "core/random.h"
#include "proto/batch_error.h"

ABSL_FLAG(int, concurrency, 1, "bench: streams at once, one batch in flight on each");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "bench: how long to run (unless --count)");
ABSL_FLAG(int64_t, count, 0, "bench: batches to send in all (0: run for --duration)");
ABSL_FLAG(int64_t, n, 4096, "bench: points per generated batch");
ABSL_FLAG(bool, in_process, false,
          "bench: also run the same batches through the core in this process and compare");
ABSL_FLAG(int, rounds, 1,
          "bench: with --in_process, alternate service and in-process runs this many times "
          "(--duration or --count is split among them) and compare the totals");

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;

// n points, row-major n x d, from k Gaussian blobs: centers uniform in
// [0, 1]^d, standard deviation 0.1 in every dimension, each point's blob
// drawn uniformly. The same seed gives the same points.
std::vector<float> BlobPoints(int64_t n, int d, int k, uint64_t seed) {
  Rng rng(seed);
  const int blobs = std::max(1, k);
  std::vector<double> centers(static_cast<size_t>(blobs) * d);
  for (double& c : centers) c = rng.Uniform();
  std::vector<float> points(static_cast<size_t>(n) * d);
  for (int64_t i = 0; i < n; ++i) {
    const double* center = centers.data() + rng.Below(blobs) * d;
    for (int l = 0; l < d; ++l) {
      points[i * d + l] = static_cast<float>(center[l] + 0.1 * rng.Normal());
    }
  }
  return points;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// What the streams of a bench run recorded.
struct BenchRecord {
  std::mutex mu;
  std::vector<double> latencies;  // seconds, one per answered batch
  std::map<std::string, int64_t> codes;
};

// `concurrency` streams, one batch in flight on each, send `batches` round
// robin, numbered from `first`: up to `last` if given, else until
// `deadline`. Returns the wall-clock seconds taken.
double ServicePass(const std::vector<v1::ClusterRequest>& batches, const ClientOptions& options,
                   int concurrency, int64_t first, std::optional<int64_t> last,
                   Clock::time_point deadline, BenchRecord* record) {
  std::atomic<int64_t> issued{first};
  const auto start = Clock::now();
  std::vector<std::thread> streams;
  for (int c = 0; c < concurrency; ++c) {
    streams.emplace_back([&] {
      Client client(options);
      Clock::time_point sent;
      const absl::Status status = client.Cluster(
          [&](v1::ClusterRequest* r) {
            const int64_t i = issued++;
            if (last ? i >= *last : Clock::now() >= deadline) return false;
            *r = batches[i % batches.size()];
            r->set_request_id(absl::StrCat("bench-", i));
            sent = Clock::now();
            return true;
          },
          [&](v1::ClusterResponse&& r) {
            const double latency = std::chrono::duration<double>(Clock::now() - sent).count();
            const absl::StatusCode code = FromBatchError(r.error()).code();
            std::lock_guard<std::mutex> lock(record->mu);
            record->latencies.push_back(latency);
            ++record->codes[absl::StatusCodeToString(code)];
          });
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(record->mu);
        ++record->codes["stream " + absl::StatusCodeToString(status.code())];
      }
    });
  }
  for (std::thread& t : streams) t.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

absl::Status RunBench() {
  const int concurrency = std::max(1, absl::GetFlag(FLAGS_concurrency));
  const int64_t n = absl::GetFlag(FLAGS_n), count = absl::GetFlag(FLAGS_count);
  const int d = absl::GetFlag(FLAGS_d) > 0 ? absl::GetFlag(FLAGS_d) : 32;
  absl::StatusOr<v1::ClusterRequest> base = Template(d);
  if (!base.ok()) return base.status();
  // A few distinct batches, reused round robin.
  std::vector<v1::ClusterRequest> batches;
  for (int b = 0; b < 8; ++b) {
    const std::vector<float> points = BlobPoints(n, d, base->k(), b + 1);
    v1::ClusterRequest r = *base;
    r.set_n(n);
    r.set_seed(b + 1);
    r.mutable_points()->Add(points.begin(), points.end());
    batches.push_back(std::move(r));
  }
  // With --rounds, the service and the in-process core take turns, so a
  // machine that speeds up or slows down during the run affects both alike.
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const bool in_process = absl::GetFlag(FLAGS_in_process);
  absl::StatusOr<ClientOptions> flags = Options();
  if (!flags.ok()) return flags.status();
  ClientOptions options = *std::move(flags);
  options.window = 1;
  options.streams = 1;
  BenchRecord record;
  const std::vector<double>& latencies = record.latencies;
  double seconds = 0, client_cpu = 0, local_seconds = 0, local_cpu = 0;
  int64_t sent_before = 0;
  std::vector<std::string> round_ratios;
  for (int round = 0; round < rounds; ++round) {
    const std::optional<int64_t> last =
        count > 0 ? std::optional<int64_t>(count * (round + 1) / rounds) : std::nullopt;
    const auto deadline =
        Clock::now() + absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_duration) / rounds);
    const size_t answered_before = latencies.size();
    const double cpu_start = ProcessCpuSeconds();
    const double round_seconds =
        ServicePass(batches, options, concurrency, sent_before, last, deadline, &record);
    seconds += round_seconds;
    client_cpu += ProcessCpuSeconds() - cpu_start;
    const auto answered = static_cast<int64_t>(latencies.size() - answered_before);
    sent_before = last ? *last : sent_before + answered;
    if (in_process && answered > 0) {
      const absl::StatusOr<Throughput> local =
          InProcessThroughput(batches, std::max<int64_t>(answered, 16));
      if (!local.ok()) return local.status();
      // Counted as if it had run `answered` batches at its measured pace.
      local_seconds += answered / local->batches_per_second;
      local_cpu += local->cpu_seconds_per_batch * answered;
      round_ratios.push_back(
          absl::StrFormat("%.3f", (answered / round_seconds) / local->batches_per_second));
    }
  }
  const double rate = latencies.size() / seconds;
  std::printf("batches %zu (n=%lld d=%d k=%d iterations=%d model=%s) concurrency %d\n",
              latencies.size(), static_cast<long long>(n), d, base->k(), base->iterations(),
              base->model().c_str(), concurrency);
  std::printf("latency p50 %.3f ms  p90 %.3f ms  p99 %.3f ms\n", 1e3 * Percentile(latencies, 0.5),
              1e3 * Percentile(latencies, 0.9), 1e3 * Percentile(latencies, 0.99));
  std::printf("throughput %.1f batches/s  %.0f points/s\n", rate, rate * n);
  std::vector<std::string> code_counts;
  for (const auto& [code, c] : record.codes) code_counts.push_back(absl::StrCat(code, " ", c));
  std::printf("status %s\n", absl::StrJoin(code_counts, ", ").c_str());
  if (latencies.empty()) {
    return absl::UnavailableError("no batch was answered; is the server at --server running?");
  }
  std::printf("client CPU %.3f ms per batch\n", 1e3 * client_cpu / latencies.size());
  if (in_process) {
    const double local_rate = latencies.size() / local_seconds;
    if (rounds > 1) {
      std::printf("service/in-process by round %s\n", absl::StrJoin(round_ratios, " ").c_str());
    }
    std::printf(
        "in-process core %.1f batches/s, CPU %.3f ms per batch; "
        "service/in-process = %.3f\n",
        local_rate, 1e3 * local_cpu / latencies.size(), rate / local_rate);
  }
  return absl::OkStatus();
}

}  // namespace kmt
