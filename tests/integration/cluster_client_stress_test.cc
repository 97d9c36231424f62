// Cluster calls of the client library (client/cluster_client.h) from four
// threads at once, over two real kmt-server replicas, while another thread
// drains one replica (SIGTERM) or kills it (SIGKILL) at random moments and
// starts it again on its port. Each call has its own window, streams and batches per stream, and
// a sink that now and then takes its time, so that the streams wait for
// it. Every call must hand its answers to the sink on the calling thread,
// one per request in request order, never while its source runs, with at
// most window × (streams + 1) requests taken and not yet through the sink;
// and end OK with no batch in error (each batch may be sent 20 times). A
// crash, a hang (the test's timeout) or a sanitizer report fails it too.
// KMT_STRESS_SECONDS sets the length (a short run by default);
// scripts/sanitize.sh stress-ci and stress run it under AddressSanitizer and
// ThreadSanitizer, the client instrumented as well as the replicas.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cluster_client.h"
#include "core/random.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

constexpr int kD = 4, kK = 3, kReplicas = 2, kCallers = 4;

// A batch of 2,000 points in 4 dimensions, its id `id`, clustered with
// `iterations` (a few: answered at once; many: in flight for milliseconds,
// as a kill finds them).
v1::ClusterRequest Batch(int64_t id, int iterations) {
  v1::ClusterRequest r;
  r.set_request_id(absl::StrCat(id));
  r.set_model("lloyd-onehot");
  r.set_k(kK);
  r.set_iterations(iterations);
  constexpr int kN = 2000;
  r.set_n(kN);
  r.set_d(kD);
  Rng rng(static_cast<uint64_t>(id) + 1);
  for (int i = 0; i < kN * kD; ++i) r.add_points(static_cast<float>(rng.Normal()));
  return r;
}

std::vector<std::string> ReplicaFlags(int port) {
  std::vector<std::string> flags = {"--workers=1", "--not_serving_delay=0s", "--model_dir="};
  if (port > 0) flags.push_back(absl::StrCat("--listen=127.0.0.1:", port));
  return flags;
}

// What one call saw; the checks are made in the test's thread.
struct Call {
  absl::Status status;
  int window = 0, streams = 0;
  int64_t requests = 0, answers = 0, errors = 0, most_unsunk = 0;
  bool foreign_thread = false, overlapped = false, out_of_order = false;
};

Call RunCall(const std::string& target, std::mt19937* random) {
  const auto pick = [random](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(*random);
  };
  Call call;
  call.window = pick(1, 4);
  call.streams = pick(1, 4);
  const int batches = pick(10, 40);
  const int slow_one_in = pick(2, 6);
  const int iterations = pick(0, 1) == 0 ? 3 : 300;
  Client client({.target = target,
                 .max_attempts = 20,
                 .window = call.window,
                 .streams = call.streams,
                 .batches_per_stream = pick(2, 8)});
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> inside{false};
  std::atomic<int64_t> taken{0}, sunk{0};
  std::atomic<bool> overlapped{false};
  std::mt19937 sink_random((*random)());
  call.status = client.Cluster(
      [&](v1::ClusterRequest* r) {
        if (inside.exchange(true)) overlapped = true;
        const int64_t i = taken.load();
        const bool more = i < batches;
        if (more) {
          *r = Batch(i, iterations);
          call.most_unsunk = std::max(call.most_unsunk, i + 1 - sunk.load());
          taken = i + 1;
        }
        inside = false;
        return more;
      },
      [&](v1::ClusterResponse&& response) {
        if (inside.exchange(true)) overlapped = true;
        if (std::this_thread::get_id() != caller) call.foreign_thread = true;
        if (response.request_id() != absl::StrCat(call.answers)) call.out_of_order = true;
        if (response.has_error()) ++call.errors;
        ++call.answers;
        if (sink_random() % slow_one_in == 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(sink_random() % 3000));
        }
        ++sunk;
        inside = false;
      });
  call.requests = taken.load();
  call.overlapped = overlapped.load();
  return call;
}

TEST(ClusterClientStress, CallsKeepOrderThreadsAndBoundsWhileReplicasDrainOrDie) {
  const absl::StatusOr<absl::Duration> length = StressDuration();
  ASSERT_TRUE(length.ok()) << length.status();
  std::vector<std::unique_ptr<ServerProcess>> replicas;
  std::vector<int> ports;
  for (int r = 0; r < kReplicas; ++r) {
    replicas.push_back(ServerProcess::Start(ReplicaFlags(0)));
    ASSERT_NE(replicas.back(), nullptr);
    ports.push_back(replicas.back()->port());
  }
  const std::string target = absl::StrCat("ipv4:127.0.0.1:", ports[0], ",127.0.0.1:", ports[1]);
  const absl::Time end = absl::Now() + *length;

  // One replica at a time drained, or killed, and started again on its
  // port. A stream to a killed replica breaks with its batches in flight.
  std::mutex mu;
  std::string chaos_failure;
  int drains = 0, kills = 0;
  std::vector<std::unique_ptr<ServerProcess>> drained, killed;
  std::atomic<bool> stop{false};
  std::thread chaos([&] {
    std::mt19937 random(7);
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % 400));
      if (stop) break;
      const int r = static_cast<int>(random() % kReplicas);
      if (random() % 2 == 0) {
        replicas[r]->Signal(SIGKILL);
        replicas[r]->Wait(absl::Seconds(60));
        killed.push_back(std::move(replicas[r]));
        ++kills;
      } else if (!replicas[r]->Drain(absl::Seconds(60))) {
        std::lock_guard<std::mutex> lock(mu);
        chaos_failure = absl::StrCat(replicas[r]->address(), " did not stop listening");
        return;
      } else {
        drained.push_back(std::move(replicas[r]));
        ++drains;
      }
      replicas[r] = ServerProcess::Start(ReplicaFlags(ports[r]));
      if (replicas[r] == nullptr || replicas[r]->port() != ports[r]) {
        std::lock_guard<std::mutex> lock(mu);
        chaos_failure = absl::StrCat("replica ", r, " did not start again on port ", ports[r]);
        return;
      }
    }
  });

  std::vector<std::vector<Call>> calls(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      std::mt19937 random(100 + c);
      while (absl::Now() < end) calls[c].push_back(RunCall(target, &random));
    });
  }
  for (std::thread& t : callers) t.join();
  stop = true;
  chaos.join();
  EXPECT_EQ(chaos_failure, "");

  int total = 0;
  for (const std::vector<Call>& one : calls) {
    for (const Call& call : one) {
      ++total;
      SCOPED_TRACE(testing::Message() << "window " << call.window << ", streams " << call.streams);
      EXPECT_TRUE(call.status.ok()) << call.status;
      EXPECT_EQ(call.answers, call.requests);
      EXPECT_EQ(call.errors, 0);
      EXPECT_FALSE(call.foreign_thread) << "a response handed over on another thread";
      EXPECT_FALSE(call.overlapped) << "the source and the sink called at once";
      EXPECT_FALSE(call.out_of_order);
      EXPECT_LE(call.most_unsunk, int64_t{call.window} * (call.streams + 1));
    }
  }
  EXPECT_GT(total, kCallers);
  std::cout << total << " calls, " << drains << " drains, " << kills << " kills\n";
  for (std::unique_ptr<ServerProcess>& server : replicas) {
    if (server != nullptr) {
      EXPECT_EQ(server->Terminate(absl::Seconds(120)), 0) << server->Log();
    }
  }
  for (std::unique_ptr<ServerProcess>& server : drained) {
    EXPECT_EQ(server->Wait(absl::Seconds(120)), 0) << server->Log();
  }
}

}  // namespace
}  // namespace kmt
