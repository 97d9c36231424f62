// Soak: a mix of traffic at saturation for a given time against a running
// kmt-server: batches of several sizes for exact and learned models, bad
// batches, and streams whose deadline passes before or during the compute
// (the server's cancellation path). Every second it samples the server's
// resident memory (/proc/PID/status) and the p99 latency of the good
// batches answered in that second, and writes them as CSV. It fails (exit
// 1) if a batch of a stream that ended OK went unanswered, if a stream ended
// with a status its scenario cannot explain, or if the server's memory after
// the warm-up grows past the bound.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/command_line.h"
#include "client/cluster_client.h"
#include "core/engine_flags.h"

ABSL_FLAG(std::string, server, "localhost:50051", "the server's address");
ABSL_FLAG(int, pid, 0, "the server's process id, for its memory");
ABSL_FLAG(absl::Duration, duration, absl::Minutes(10), "how long to run");
ABSL_FLAG(absl::Duration, warm_up, absl::Seconds(0),
          "memory growth is measured after this (default: a fifth of --duration)");
ABSL_FLAG(int, clients, 4, "client threads, each with its own channel");
ABSL_FLAG(std::string, csv, "", "per-second samples: second,rss_kb,ok,p99_ms");
ABSL_FLAG(double, rss_growth_mb, 32, "allowed growth of the memory after the warm-up, MiB");

namespace kmt {
namespace {

int64_t RssKb(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

struct Tally {
  std::mutex mu;
  std::vector<double> latencies_ms;  // good batches answered since the last sample
  int64_t ok = 0, refused = 0, deadlines = 0, unanswered = 0, unexplained = 0;
  std::string last_unexplained;
};

v1::ClusterRequest Batch(std::mt19937_64& rng, const std::string& model, int n, int d, int k) {
  std::normal_distribution<float> normal;
  v1::ClusterRequest r;
  r.set_model(model);
  r.set_n(n);
  r.set_d(d);
  r.set_k(k);
  r.set_iterations(10);
  r.set_seed(rng());
  r.mutable_points()->Reserve(n * d);
  for (int i = 0; i < n * d; ++i) r.add_points(normal(rng) + static_cast<float>(i % (d * 3)));
  return r;
}

// One client thread's loop until `end`.
void Drive(int id, absl::Time end, const std::vector<v1::ModelInfo>& learned, Tally* tally) {
  std::mt19937_64 rng(1000 + id);
  const std::string target = absl::GetFlag(FLAGS_server);
  Client steady({.target = target, .max_attempts = 1, .stream_timeout = absl::Seconds(60)});
  const int sizes[] = {256, 1024, 4096, 16384};
  const char* exact[] = {"lloyd-onehot", "lloyd-binary", "soft-kmeans", "kmedoids",
                         "trimmed-kmeans"};
  while (absl::Now() < end) {
    const int scenario = static_cast<int>(rng() % 10);
    std::vector<v1::ClusterRequest> requests;
    absl::Duration timeout = absl::Seconds(60);
    if (scenario < 7) {  // good batches, 1 to 3 on a stream
      const int count = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < count; ++i) {
        if (!learned.empty() && rng() % 4 == 0) {
          const v1::ModelInfo& m = learned[rng() % learned.size()];
          requests.push_back(Batch(rng, m.name(), 512, m.d(), m.k()));
        } else {
          requests.push_back(Batch(rng, exact[rng() % 5], sizes[rng() % 4], 8, 6));
        }
      }
    } else if (scenario == 7) {  // a bad batch: NaN in a point
      requests.push_back(Batch(rng, "lloyd-onehot", 1024, 8, 6));
      requests[0].set_points(17, std::nanf(""));
    } else {  // a deadline before arrival or during the compute
      requests.push_back(Batch(rng, "soft-kmeans", 16384, 8, 6));
      requests[0].set_iterations(200);
      timeout = scenario == 8 ? absl::Microseconds(100) : absl::Milliseconds(20);
    }
    Client deadline_client({.target = target, .max_attempts = 1, .stream_timeout = timeout});
    Client& client = timeout == absl::Seconds(60) ? steady : deadline_client;
    size_t sent = 0, answered = 0;
    std::vector<double> latencies;
    std::vector<std::chrono::steady_clock::time_point> sent_at;
    const absl::Status status = client.Cluster(
        [&](v1::ClusterRequest* r) {
          if (sent == requests.size()) return false;
          *r = requests[sent++];
          sent_at.push_back(std::chrono::steady_clock::now());
          return true;
        },
        [&](v1::ClusterResponse&& response) {
          const double ms = std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - sent_at[answered])
                                .count();
          ++answered;
          std::lock_guard<std::mutex> lock(tally->mu);
          if (response.has_error()) {
            ++tally->refused;
          } else {
            ++tally->ok;
            tally->latencies_ms.push_back(ms);
          }
        });
    std::lock_guard<std::mutex> lock(tally->mu);
    if (status.ok()) {
      tally->unanswered += static_cast<int64_t>(sent - answered);
    } else if (status.code() == absl::StatusCode::kDeadlineExceeded && timeout < absl::Seconds(1)) {
      ++tally->deadlines;
    } else {
      ++tally->unexplained;
      tally->last_unexplained = std::string(status.message());
    }
  }
}

int Run() {
  const int pid = absl::GetFlag(FLAGS_pid);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  absl::Duration warm_up = absl::GetFlag(FLAGS_warm_up);
  if (warm_up == absl::ZeroDuration()) warm_up = duration / 5;
  Client probe({.target = absl::GetFlag(FLAGS_server)});
  absl::StatusOr<std::vector<v1::ModelInfo>> models = probe.ListModels();
  if (!models.ok()) {
    std::fprintf(stderr, "soak: %s\n", std::string(models.status().message()).c_str());
    return 1;
  }
  std::vector<v1::ModelInfo> learned;
  for (const v1::ModelInfo& m : *models) {
    if (m.kind() == "learned") learned.push_back(m);
  }
  Tally tally;
  const absl::Time start = absl::Now(), end = start + duration;
  std::vector<std::thread> clients;
  for (int i = 0; i < absl::GetFlag(FLAGS_clients); ++i) {
    clients.emplace_back(Drive, i, end, std::cref(learned), &tally);
  }
  std::FILE* csv = nullptr;
  if (!absl::GetFlag(FLAGS_csv).empty()) {
    csv = std::fopen(absl::GetFlag(FLAGS_csv).c_str(), "w");
    if (csv != nullptr) std::fprintf(csv, "second,rss_kb,ok,p99_ms\n");
  }
  int64_t warm_max = 0, after_max = 0, ok_before = 0;
  std::vector<double> p99s;
  for (int second = 1; absl::Now() < end; ++second) {
    absl::SleepFor(start + absl::Seconds(second) - absl::Now());
    std::vector<double> latencies;
    int64_t ok;
    {
      std::lock_guard<std::mutex> lock(tally.mu);
      latencies.swap(tally.latencies_ms);
      ok = tally.ok;
    }
    std::sort(latencies.begin(), latencies.end());
    const double p99 = latencies.empty() ? 0 : latencies[(latencies.size() * 99) / 100];
    const int64_t rss = pid > 0 ? RssKb(pid) : -1;
    (absl::Seconds(second) <= warm_up ? warm_max : after_max) =
        std::max(absl::Seconds(second) <= warm_up ? warm_max : after_max, rss);
    if (absl::Seconds(second) > warm_up && !latencies.empty()) p99s.push_back(p99);
    if (csv != nullptr) {
      std::fprintf(csv, "%d,%lld,%lld,%.2f\n", second, static_cast<long long>(rss),
                   static_cast<long long>(ok - ok_before), p99);
      std::fflush(csv);
    }
    ok_before = ok;
  }
  for (std::thread& t : clients) t.join();
  if (csv != nullptr) std::fclose(csv);
  std::sort(p99s.begin(), p99s.end());
  const auto at = [&](double q) { return p99s.empty() ? 0 : p99s[(p99s.size() - 1) * q]; };
  const double growth_mb = (after_max - warm_max) / 1024.0;
  std::printf("batches OK %lld, refused %lld, streams past their deadline %lld\n",
              static_cast<long long>(tally.ok), static_cast<long long>(tally.refused),
              static_cast<long long>(tally.deadlines));
  std::printf("unanswered batches %lld, unexplained stream ends %lld%s%s\n",
              static_cast<long long>(tally.unanswered), static_cast<long long>(tally.unexplained),
              tally.unexplained > 0 ? ": " : "", tally.last_unexplained.c_str());
  std::printf("server RSS: warm-up max %.1f MiB, after warm-up max %.1f MiB (growth %+.1f MiB)\n",
              warm_max / 1024.0, after_max / 1024.0, growth_mb);
  std::printf(
      "per-second p99 after warm-up: median %.1f ms, 90th percentile %.1f ms, max %.1f ms\n",
      at(0.5), at(0.9), at(1.0));
  const bool bad = tally.unanswered > 0 || tally.unexplained > 0 || tally.ok == 0 ||
                   (pid > 0 && growth_mb > absl::GetFlag(FLAGS_rss_growth_mb));
  return bad ? 1 : 0;
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::ParseCommandLine(
      "Soaks a running kmt-server with mixed traffic; prints what was answered, the server's "
      "memory growth and per-second p99 latency.",
      argc, argv, kmt::EngineFlags());
  return kmt::Run();
}
