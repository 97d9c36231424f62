// Overload: clients that keep more large batches in flight than the server's
// budget of requests held (--max_held_bytes) while one client sends small
// batches one at a time, against a running kmt-server. First the small
// client alone (idle), then with the large clients for --duration. A large
// client is the client library (kmt::Client) with --large_window batches in
// flight on one stream: it honours the server's pushbacks. Prints the small batches'
// latency idle and under overload, what the large batches got, and the
// server's peak resident memory (VmHWM). With --check it fails (exit 1)
// unless every large batch was answered OK or RESOURCE_EXHAUSTED with a
// pushback, every stream ended OK, every small batch was answered OK, and
// the peak memory is within --rss_margin of the budget; timings are
// reported, not checked.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "base/command_line.h"
#include "client/cluster_client.h"
#include "core/engine_flags.h"
#include "proto/batch_error.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/raw_payload.h"

ABSL_FLAG(std::string, server, "localhost:50051", "the server's address");
ABSL_FLAG(int, pid, 0, "the server's process id, for its peak memory");
ABSL_FLAG(int64_t, budget, 0, "the server's --max_held_bytes, for the offer and the check");
ABSL_FLAG(absl::Duration, idle, absl::Seconds(5), "how long the small client runs alone first");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(30), "how long the large clients run");
ABSL_FLAG(bool, small, true, "run the small client (--idle alone first, then for --duration)");
ABSL_FLAG(double, idle_p99_ms, 0,
          "the small batches' idle p99 measured by another run, for the ratio when --idle=0");
ABSL_FLAG(int, large_clients, 3, "large clients, each a kmt::Client; 0: none");
ABSL_FLAG(int, large_window, 256, "large batches each large client keeps in flight");
ABSL_FLAG(int, large_n, 16384, "points per large batch");
ABSL_FLAG(int, large_d, 64, "dimensions of a large batch");
ABSL_FLAG(int, large_k, 10, "clusters of a large batch");
ABSL_FLAG(int, large_layers, 3, "layers of a large batch");
ABSL_FLAG(int, small_n, 512, "points per small batch");
ABSL_FLAG(int, small_d, 32, "dimensions of a small batch");
ABSL_FLAG(int, small_k, 10, "clusters of a small batch");
ABSL_FLAG(int, small_layers, 20, "layers of a small batch");
ABSL_FLAG(bool, check, false, "exit 1 unless the properties above hold");
ABSL_FLAG(double, rss_margin, 0.10, "peak memory allowed over the budget, as a fraction of it");

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;

int64_t PeakRssBytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

v1::ClusterRequest Batch(const std::string& id, int n, int d, int k, int layers) {
  std::mt19937_64 rng(n * 31 + d);
  std::normal_distribution<float> normal;
  std::vector<float> points(static_cast<size_t>(n) * d);
  for (float& x : points) x = normal(rng);
  v1::ClusterRequest r;
  r.set_request_id(id);
  r.set_model("lloyd-onehot");
  r.set_n(n);
  r.set_d(d);
  r.set_k(k);
  r.set_iterations(layers);
  r.set_seed(1);
  r.set_omit_labels(true);
  EncodeFloat32(points, r.mutable_points_f32());
  return r;
}

std::unique_ptr<v1::KMeansTransformer::Stub> Connect(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  // A channel each: gRPC would otherwise share one connection.
  args.SetInt("kmt.overload.channel", static_cast<int>(std::random_device()()));
  return v1::KMeansTransformer::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
}

struct LargeTally {
  std::atomic<int64_t> sent{0}, ok{0}, refused{0}, other{0}, answered{0}, resent{0},
      calls_failed{0};
  std::mutex mu;
  std::string first_other;  // the first answer neither OK nor a refusal with a pushback
};

// One large client: kmt::Client over one stream at a time with `window`
// batches in flight, new batches until `end`, then every answer read. The
// client sends a batch the server pushed back again after the pause it
// asked for; one still refused after its pushbacks is answered so.
void RunLarge(const std::string& target, const v1::ClusterRequest& request, int window,
              Clock::time_point end, LargeTally* tally) {
  Client client({.target = target,
                 .max_message_bytes = std::numeric_limits<int>::max(),
                 .window = window,
                 .batches_per_stream = std::numeric_limits<int>::max()});
  const absl::Status status = client.Cluster(
      [&](v1::ClusterRequest* r) {
        if (Clock::now() >= end) return false;
        *r = request;
        ++tally->sent;
        return true;
      },
      [&](v1::ClusterResponse&& response) {
        ++tally->answered;
        const absl::Status answer = FromBatchError(response.error());
        const std::optional<int64_t> pushback = RetryPushbackMs(answer);
        if (answer.ok()) {
          ++tally->ok;
        } else if (absl::IsResourceExhausted(answer) && pushback && *pushback >= 0) {
          ++tally->refused;
        } else {
          ++tally->other;
          std::lock_guard<std::mutex> lock(tally->mu);
          if (tally->first_other.empty()) tally->first_other = answer.ToString();
        }
      });
  tally->resent += client.resent();
  if (!status.ok()) {
    ++tally->calls_failed;
    std::lock_guard<std::mutex> lock(tally->mu);
    if (tally->first_other.empty()) tally->first_other = status.ToString();
  }
}

struct SmallTally {
  std::vector<double> ms;
  int64_t pushed_back = 0, failed = 0;
  std::string first_failure;
};

// One batch at a time until `stop`; each latency from its first send to its
// answer, pushbacks included.
SmallTally RunSmall(const std::string& target, const v1::ClusterRequest& request,
                    const std::atomic<bool>& stop) {
  SmallTally tally;
  auto stub = Connect(target);
  grpc::ClientContext context;
  auto stream = stub->Cluster(&context);
  v1::ClusterResponse response;
  while (!stop) {
    const Clock::time_point start = Clock::now();
    for (;;) {
      if (!stream->Write(request) || !stream->Read(&response)) {
        ++tally.failed;
        tally.first_failure = stream->Finish().error_message();
        return tally;
      }
      const absl::Status status = FromBatchError(response.error());
      const std::optional<int64_t> pushback = RetryPushbackMs(status);
      if (!absl::IsResourceExhausted(status) || !pushback || *pushback < 0) {
        if (!status.ok()) {
          ++tally.failed;
          if (tally.first_failure.empty()) tally.first_failure = status.ToString();
        }
        break;
      }
      ++tally.pushed_back;
      std::this_thread::sleep_for(std::chrono::milliseconds(*pushback));
    }
    tally.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  stream->WritesDone();
  if (!stream->Finish().ok()) ++tally.failed;
  return tally;
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * values.size()))];
}

int Run() {
  const std::string target = absl::GetFlag(FLAGS_server);
  const v1::ClusterRequest small =
      Batch("small", absl::GetFlag(FLAGS_small_n), absl::GetFlag(FLAGS_small_d),
            absl::GetFlag(FLAGS_small_k), absl::GetFlag(FLAGS_small_layers));
  const v1::ClusterRequest large =
      Batch("large", absl::GetFlag(FLAGS_large_n), absl::GetFlag(FLAGS_large_d),
            absl::GetFlag(FLAGS_large_k), absl::GetFlag(FLAGS_large_layers));

  const bool small_client = absl::GetFlag(FLAGS_small);
  const int large_clients = absl::GetFlag(FLAGS_large_clients);
  std::atomic<bool> stop{false};
  SmallTally idle;
  if (small_client && absl::GetFlag(FLAGS_idle) > absl::ZeroDuration()) {
    std::thread stopper([&] {
      absl::SleepFor(absl::GetFlag(FLAGS_idle));
      stop = true;
    });
    idle = RunSmall(target, small, stop);
    stopper.join();
  }

  stop = false;
  const Clock::time_point end =
      Clock::now() + absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_duration));
  LargeTally large_tally;
  std::vector<std::thread> threads;
  for (int i = 0; i < large_clients; ++i) {
    threads.emplace_back(RunLarge, target, std::cref(large), absl::GetFlag(FLAGS_large_window), end,
                         &large_tally);
  }
  SmallTally loaded;
  if (small_client) threads.emplace_back([&] { loaded = RunSmall(target, small, stop); });
  std::this_thread::sleep_until(end);
  stop = true;
  for (std::thread& t : threads) t.join();

  const int64_t budget = absl::GetFlag(FLAGS_budget);
  const int pid = absl::GetFlag(FLAGS_pid);
  const int64_t peak = pid > 0 ? PeakRssBytes(pid) : -1;
  constexpr double kMiB = 1 << 20;
  if (large_clients > 0) {
    const int64_t offered = static_cast<int64_t>(large.ByteSizeLong()) *
                            absl::GetFlag(FLAGS_large_window) * large_clients;
    std::printf("large batches of %.1f MiB, %d clients, in flight %.0f MiB (%.1fx the budget)\n",
                large.ByteSizeLong() / kMiB, large_clients, offered / kMiB,
                budget > 0 ? static_cast<double>(offered) / budget : 0);
    std::printf(
        "large batches: sent %ld, answered OK %ld, refused with a pushback after the client's "
        "pushbacks %ld, other %ld, unanswered %ld; sent again after a pushback %ld; calls failed "
        "%ld\n",
        static_cast<long>(large_tally.sent.load()), static_cast<long>(large_tally.ok.load()),
        static_cast<long>(large_tally.refused.load()), static_cast<long>(large_tally.other.load()),
        static_cast<long>(large_tally.sent - large_tally.answered),
        static_cast<long>(large_tally.resent.load()),
        static_cast<long>(large_tally.calls_failed.load()));
    if (!large_tally.first_other.empty()) {
      std::printf("first other: %s\n", large_tally.first_other.c_str());
    }
  }
  const double idle_p99 =
      idle.ms.empty() ? absl::GetFlag(FLAGS_idle_p99_ms) : Quantile(idle.ms, 0.99);
  if (!idle.ms.empty()) {
    std::printf("small batches idle: %zu, p50 %.2f ms, p99 %.2f ms\n", idle.ms.size(),
                Quantile(idle.ms, 0.5), idle_p99);
  }
  if (small_client && !loaded.ms.empty()) {
    const double loaded_p99 = Quantile(loaded.ms, 0.99);
    std::printf(
        "small batches %s: %zu, p50 %.2f ms, p99 %.2f ms (%.1fx idle p99), max %.2f ms, "
        "pushed back %ld, failed %ld%s%s\n",
        large_clients > 0 || absl::GetFlag(FLAGS_idle_p99_ms) > 0 ? "under load" : "idle",
        loaded.ms.size(), Quantile(loaded.ms, 0.5), loaded_p99,
        idle_p99 > 0 ? loaded_p99 / idle_p99 : 0, Quantile(loaded.ms, 1.0),
        static_cast<long>(loaded.pushed_back), static_cast<long>(idle.failed + loaded.failed),
        loaded.first_failure.empty() ? "" : ": ", loaded.first_failure.c_str());
  }
  if (peak > 0) {
    std::printf("server peak resident memory %.0f MiB (%.2fx the budget of %.0f MiB)\n",
                peak / kMiB, budget > 0 ? static_cast<double>(peak) / budget : 0, budget / kMiB);
  }
  if (!absl::GetFlag(FLAGS_check)) return 0;
  const bool large_ok = large_clients == 0 ||
                        (large_tally.sent > 0 && large_tally.other == 0 &&
                         large_tally.calls_failed == 0 && large_tally.sent == large_tally.answered);
  const bool small_ok =
      !small_client || (idle.failed == 0 && loaded.failed == 0 && !loaded.ms.empty());
  const bool rss_ok =
      pid <= 0 || (peak > 0 && budget > 0 &&
                   peak <= static_cast<int64_t>(budget * (1 + absl::GetFlag(FLAGS_rss_margin))));
  std::printf("check: large %s, small %s, memory %s\n", large_ok ? "ok" : "FAILED",
              small_ok ? "ok" : "FAILED", rss_ok ? "ok" : "FAILED");
  return large_ok && small_ok && rss_ok ? 0 : 1;
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::ParseCommandLine(
      "Overloads a running kmt-server with large batches past its budget of requests held while "
      "one client sends small batches one at a time; prints what each got and the server's peak "
      "memory.",
      argc, argv, kmt::EngineFlags());
  return kmt::Run();
}
