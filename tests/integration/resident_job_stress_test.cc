// Resident jobs run back to back, from this process's own driver (the one
// `kmt cluster --mode=whole` runs), over three real kmt-server replicas,
// while another thread drains (SIGTERM) or kills (SIGKILL) one replica at a
// time at random moments and starts it again on the same port. Only one
// replica is ever down, so a job can always reach a live one; but the
// driver takes a replica that failed as gone for the rest of its job, so a
// job that sees all three fail runs out of replicas. Each job either ends
// with the result of a run without faults on the same points and seed, to
// the bit, or fails UNAVAILABLE naming the replica it ran out on; any other
// end (another code, a wrong bit, a job past its deadline, a crash or a
// sanitizer report in a replica) fails the test. KMT_STRESS_SECONDS sets the
// length (a short run by default); scripts/sanitize.sh stress-ci and stress
// run it under AddressSanitizer and ThreadSanitizer, the driver instrumented
// as well as the replicas.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/resident_job.h"
#include "core/random.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

constexpr int kD = 8, kK = 6, kIterations = 4, kReplicas = 3;

// The test's length: KMT_STRESS_SECONDS, else long enough for a few dozen
// jobs and faults.
absl::Duration StressDuration() {
  double seconds = 10;
  const char* env = std::getenv("KMT_STRESS_SECONDS");
  if (env != nullptr && *env != '\0') {
    EXPECT_TRUE(absl::SimpleAtod(env, &seconds) && seconds > 0) << "KMT_STRESS_SECONDS=" << env;
  }
  return absl::Seconds(seconds);
}

// Points around 16 centers, the same on every run.
const Matrix<float>& Points() {
  static const Matrix<float>* points = [] {
    constexpr int kN = 48000, kBlobs = 16;
    Rng rng(21);
    Matrix<float> centers(kD, kBlobs);
    for (int64_t i = 0; i < centers.size(); ++i) {
      centers.data()[i] = static_cast<float>(rng.Uniform() * 10);
    }
    auto* p = new Matrix<float>(kD, kN);
    for (int i = 0; i < kN; ++i) {
      const int64_t blob = static_cast<int64_t>(rng.Below(kBlobs));
      for (int j = 0; j < kD; ++j) {
        (*p)(j, i) = centers(j, blob) + static_cast<float>(0.3 * rng.Normal());
      }
    }
    return p;
  }();
  return *points;
}

absl::Status CopyPoints(int64_t first, int64_t count, std::vector<float>* values) {
  const float* at = Points().col(first).data();
  values->insert(values->end(), at, at + count * kD);
  return absl::OkStatus();
}

// The jobs run in turn: both seedings' steps (k-means++'s two round trips
// per center, k-means‖'s sampling rounds) meet faults.
struct Config {
  ResidentSeeding seeding;
  uint64_t seed;
};
constexpr Config kConfigs[] = {{ResidentSeeding::kGreedyKMeansPlusPlus, 4},
                               {ResidentSeeding::kKMeansParallel, 5}};

// A bound on one job for a loaded machine under a sanitizer, not a
// measure: a job still running after it is hung.
constexpr absl::Duration kJobDeadline = absl::Minutes(3);

absl::StatusOr<ResidentJobResult> RunJob(const std::vector<std::string>& servers,
                                         const Config& config,
                                         std::function<void(const std::string&)> log) {
  const absl::Time deadline = absl::Now() + kJobDeadline;
  ResidentJobOptions job{
      .k = kK, .iterations = kIterations, .seed = config.seed, .seeding = config.seeding};
  job.log = log;
  job.check = [deadline] {
    return absl::Now() < deadline ? absl::OkStatus()
                                  : absl::DeadlineExceededError("the job's deadline passed");
  };
  return RunResidentJobOnReplicas({.servers = servers,
                                   .streams_per_server = 2,
                                   .chunk_bytes = 64 << 10,
                                   .stream_timeout = kJobDeadline,
                                   .log = log},
                                  std::move(job), 0, Points().cols(), kD, CopyPoints);
}

// The flags of every replica: one worker each, and a drain that refuses
// new streams at once.
std::vector<std::string> ReplicaFlags(int port) {
  std::vector<std::string> flags = {"--workers=1", "--not_serving_delay=0s"};
  if (port > 0) flags.push_back(absl::StrCat("--listen=127.0.0.1:", port));
  return flags;
}

// Three replicas on fixed ports and the thread that takes them down: one at
// a time, after a random pause of up to twice a clean job's length, drained
// or killed at random, then started again on its port before the next.
class Chaos {
 public:
  // False (and a failure) if a replica does not start.
  bool Start() {
    for (int r = 0; r < kReplicas; ++r) {
      replicas_.push_back(ServerProcess::Start(ReplicaFlags(0)));
      if (replicas_.back() == nullptr) {
        ADD_FAILURE() << "replica " << r << " did not start";
        return false;
      }
      ports_.push_back(replicas_.back()->port());
    }
    return true;
  }

  std::vector<std::string> Addresses() const {
    std::vector<std::string> addresses;
    for (const int port : ports_) addresses.push_back(absl::StrCat("127.0.0.1:", port));
    return addresses;
  }

  // Starts the faults. Most wait for a job past its load (`job_running`),
  // so that the random pause falls in its seeding or its steps; the others
  // fall anywhere, loads and the gaps between jobs among them.
  void Run(absl::Duration max_pause, std::function<bool()> job_running) {
    thread_ = std::thread([this, max_pause, job_running] { Loop(max_pause, job_running); });
  }

  ~Chaos() { Halt(); }

  // Stops the faults; then each drained replica must have exited 0 by
  // itself once its jobs' streams ended, and each running one must exit 0
  // on SIGTERM (a crash or a sanitizer's abort does neither).
  void Stop() {
    Halt();
    for (const auto& server : draining_) {
      ExpectExitedCleanly(*server, server->Wait(absl::Seconds(120)));
    }
    for (const auto& server : replicas_) {
      if (server != nullptr) ExpectExitedCleanly(*server, server->Terminate(absl::Seconds(120)));
    }
  }

  // Whether a replica is down (stopped, and not yet listening again).
  bool down() const { return down_; }

  int drains() const { return drains_; }
  int kills() const { return kills_; }
  const std::string& failure() const { return failure_; }

 private:
  static std::string Tail(const std::string& log) {
    return log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  }

  static void ExpectExitedCleanly(const ServerProcess& server, int code) {
    EXPECT_EQ(code, 0) << server.address() << " exited " << code << " (-1: by a signal, or not "
                       << "at all); its log ends:\n"
                       << Tail(server.Log());
  }

  void Halt() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void Loop(absl::Duration max_pause, const std::function<bool()>& job_running) {
    std::mt19937 random(51);
    for (;;) {
      if (std::uniform_int_distribution<int>(0, 3)(random) != 0) {
        std::unique_lock<std::mutex> lock(mu_);
        while (!stop_ && !job_running()) wake_.wait_for(lock, std::chrono::milliseconds(1));
      }
      const auto pause = std::chrono::microseconds(
          std::uniform_int_distribution<int64_t>(0, absl::ToInt64Microseconds(max_pause))(random));
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (wake_.wait_for(lock, pause, [this] { return stop_; })) return;
      }
      const int r = std::uniform_int_distribution<int>(0, kReplicas - 1)(random);
      down_ = true;
      std::unique_ptr<ServerProcess>& victim = replicas_[r];
      if (std::uniform_int_distribution<int>(0, 1)(random) == 0) {
        // Drained: once the port refuses connections, every open stream
        // is answered UNAVAILABLE at its next request, and the process
        // exits 0 by itself once they have ended.
        if (!victim->Drain(absl::Seconds(60))) {
          failure_ = absl::StrCat(victim->address(), " did not stop listening on SIGTERM; log:\n",
                                  Tail(victim->Log()));
          return;
        }
        ++drains_;
        draining_.push_back(std::move(victim));
      } else {
        victim->Signal(SIGKILL);
        victim->Wait(absl::Seconds(60));
        ++kills_;
      }
      // The drained replicas that have exited 0 are let go; the others are
      // checked at the end.
      draining_.erase(std::remove_if(draining_.begin(), draining_.end(),
                                     [](const std::unique_ptr<ServerProcess>& server) {
                                       return server->Wait(absl::Milliseconds(1)) == 0;
                                     }),
                      draining_.end());
      victim = ServerProcess::Start(ReplicaFlags(ports_[r]));
      if (victim == nullptr || victim->port() != ports_[r]) {
        failure_ = absl::StrCat("replica ", r, " did not start again on port ", ports_[r]);
        return;
      }
      down_ = false;
    }
  }

  std::vector<int> ports_;
  std::vector<std::unique_ptr<ServerProcess>> replicas_;  // the chaos thread's while it runs
  std::vector<std::unique_ptr<ServerProcess>> draining_;  // drained, maybe still running
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<bool> down_{false};
  // Read after the thread has ended.
  int drains_ = 0, kills_ = 0;
  std::string failure_;
};

// The last lines the driver logged, for a failure's message; and the moves
// it announced, in jobs that failed as well as those that completed, by the
// job's phase as its last line before the move tells: loading (or the first
// seeding round, which logs after it), seeding (or the first step), and
// Lloyd's steps (the labels step among them).
class News {
 public:
  enum Phase { kLoad, kSeeding, kSteps, kPhases };

  void StartJob() {
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = kLoad;
  }
  bool PastLoad() const {
    std::lock_guard<std::mutex> lock(mu_);
    return phase_ != kLoad;
  }
  void Add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::StrContains(line, "and repeating the step")) {
      ++moves_[phase_];
    } else if (absl::StartsWith(line, "k-means")) {
      phase_ = std::max(phase_, kSeeding);
    } else if (absl::StartsWith(line, "step ")) {
      phase_ = kSteps;
    }
    lines_.push_back(line);
    if (lines_.size() > 40) lines_.pop_front();
  }
  std::string Told() const {
    std::lock_guard<std::mutex> lock(mu_);
    return absl::StrJoin(lines_, "\n");
  }
  std::string Moves() const {
    std::lock_guard<std::mutex> lock(mu_);
    return absl::StrCat(moves_[kLoad] + moves_[kSeeding] + moves_[kSteps], " shard moves (",
                        moves_[kLoad], " loading, ", moves_[kSeeding], " seeding, ", moves_[kSteps],
                        " stepping)");
  }

 private:
  mutable std::mutex mu_;
  std::deque<std::string> lines_;
  Phase phase_ = kLoad;
  int64_t moves_[kPhases] = {};
};

// A job out of replicas, as the driver says it: UNAVAILABLE, the shard and
// the replica it last failed on named, and why it gave up.
bool OutOfReplicas(const absl::Status& status, const std::vector<std::string>& servers) {
  if (status.code() != absl::StatusCode::kUnavailable) return false;
  const std::string message(status.message());
  bool named = false;
  for (const std::string& server : servers) {
    named = named || absl::StrContains(message, absl::StrCat(" on ", server, ": "));
  }
  return named && absl::StartsWith(message, "shard ") &&
         (absl::StrContains(message, ": no replica left: ") ||
          absl::StrContains(message, ": gave up after "));
}

TEST(ResidentJobStress, JobsBackToBackWhileReplicasAreDrainedAndKilledAtRandom) {
  News news;  // before the chaos thread, which reads it, and after it ends
  Chaos chaos;
  ASSERT_TRUE(chaos.Start());
  const std::vector<std::string> servers = chaos.Addresses();

  // The references, without faults; and a clean job's length, which sets
  // the pauses between faults so that most jobs meet one.
  std::vector<ResidentJobResult> clean;
  absl::Duration clean_time;
  for (const Config& config : kConfigs) {
    const absl::Time start = absl::Now();
    absl::StatusOr<ResidentJobResult> reference = RunJob(servers, config, nullptr);
    clean_time += absl::Now() - start;
    ASSERT_TRUE(reference.ok()) << reference.status();
    ASSERT_EQ(reference->shard_moves, 0);
    clean.push_back(*std::move(reference));
  }
  clean_time /= static_cast<int64_t>(std::size(kConfigs));

  const absl::Duration length = StressDuration();
  chaos.Run(clean_time, [&news] { return news.PastLoad(); });
  int jobs = 0, identical = 0, out_of_replicas = 0, moves_in_completed = 0;
  const absl::Time start = absl::Now(), end = start + length;
  while (absl::Now() < end) {
    const Config& config = kConfigs[jobs % std::size(kConfigs)];
    const ResidentJobResult& want = clean[jobs % std::size(kConfigs)];
    ++jobs;
    // Three jobs in four start with every replica up, so that most faults
    // fall in the middle of a job rather than before its load.
    news.StartJob();
    while (jobs % 4 != 0 && chaos.down()) absl::SleepFor(absl::Milliseconds(1));
    const absl::StatusOr<ResidentJobResult> got =
        RunJob(servers, config, [&news](const std::string& line) { news.Add(line); });
    if (!got.ok()) {
      ASSERT_TRUE(OutOfReplicas(got.status(), servers))
          << "job " << jobs << ": " << got.status() << "\nthe driver's last lines:\n"
          << news.Told();
      ++out_of_replicas;
      continue;
    }
    SCOPED_TRACE(absl::StrCat("job ", jobs, "; the driver's last lines:\n", news.Told()));
    ASSERT_EQ(got->centers, want.centers);
    ASSERT_EQ(got->labels, want.labels);
    ASSERT_EQ(got->objective, want.objective);
    ASSERT_EQ(got->initial_objective, want.initial_objective);
    ASSERT_EQ(got->objectives, want.objectives);
    ASSERT_EQ(got->iterations_run, want.iterations_run);
    ASSERT_EQ(got->init_candidates, want.init_candidates);
    ++identical;
    moves_in_completed += got->shard_moves;
  }
  const absl::Duration ran = absl::Now() - start;
  chaos.Stop();
  ASSERT_EQ(chaos.failure(), "");

  std::cout << "in " << absl::FormatDuration(ran) << " (clean job "
            << absl::FormatDuration(clean_time) << "): " << jobs << " jobs, " << identical
            << " identical to their reference, " << out_of_replicas << " out of replicas; "
            << chaos.drains() << " replicas drained and " << chaos.kills() << " killed; "
            << news.Moves() << ", " << moves_in_completed << " in completed jobs" << std::endl;
  // Not vacuous: jobs completed, faults hit them, and shards moved.
  EXPECT_GT(identical, 0);
  EXPECT_GT(chaos.drains(), 0);
  EXPECT_GT(chaos.kills(), 0);
  EXPECT_GT(moves_in_completed, 0);
}

}  // namespace
}  // namespace kmt
