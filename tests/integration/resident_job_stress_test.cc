// Resident jobs run back to back, from this process's own driver (the one
// `kmt cluster --mode=whole` runs), over three real kmt-server replicas,
// while another thread drains (SIGTERM) or kills (SIGKILL) a replica at
// random moments and starts it again on the same port. Two replicas are
// down at most, so a job can always reach a live one; but the driver takes
// a replica that failed as gone for the rest of its job, so a job that sees
// all three fail runs out of replicas. Each job either ends
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
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/resident_job.h"
#include "core/random.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

constexpr int kD = 8, kK = 6, kIterations = 4, kReplicas = 3;

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

absl::Status CopyPoints(int64_t first, int64_t count, float* out) {
  const float* at = Points().col(first).data();
  std::copy(at, at + count * kD, out);
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

// Three replicas on fixed ports and the thread that takes them down: after
// a random pause of up to a clean job's length, one replica drained or
// killed at random and started again on its port, or now and then each in
// turn (Loop).
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
  // Each fault is told to `note` as it happens, for a failure's message.
  void Run(absl::Duration max_pause, std::function<bool()> job_running,
           std::function<void(const std::string&)> note) {
    note_ = std::move(note);
    thread_ = std::thread([this, max_pause, job_running] { Loop(max_pause, job_running); });
  }

  ~Chaos() { Halt(); }

  // Stops the faults; then each drained replica must have exited 0 by
  // itself once its jobs' streams ended, and each running one must exit 0
  // on SIGTERM (a crash or a sanitizer's abort does neither).
  void Stop() {
    Halt();
    for (const auto& server : draining_) {
      const int code = server->Wait(absl::Seconds(120));
      note_(absl::StrCat("(", server->address(), " exited ", code, ": ", DrainLine(server->Log()),
                         ")"));
      ExpectExitedCleanly(*server, code);
    }
    for (const auto& server : replicas_) {
      if (server != nullptr) ExpectExitedCleanly(*server, server->Terminate(absl::Seconds(120)));
    }
  }

  // Whether a replica is down (stopped, and not yet listening again).
  bool down() const { return down_ > 0; }

  int drains() const { return drains_; }
  int bursts() const { return bursts_; }
  int kills() const { return kills_; }
  const std::string& failure() const { return failure_; }

 private:
  static std::string Tail(const std::string& log) {
    return log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  }

  // What a drained replica's log says it did on SIGTERM.
  static std::string DrainLine(const std::string& log) {
    const size_t at = log.find("signal 15: ");
    if (at == std::string::npos) return "no line for the signal";
    return log.substr(at, log.find('\n', at) - at);
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
    const auto pick = [&random](int n) {
      return std::uniform_int_distribution<int>(0, n - 1)(random);
    };
    for (;;) {
      if (pick(4) != 0) {
        std::unique_lock<std::mutex> lock(mu_);
        while (!stop_ && !job_running()) wake_.wait_for(lock, std::chrono::milliseconds(1));
      }
      const auto pause = std::chrono::microseconds(
          std::uniform_int_distribution<int64_t>(0, absl::ToInt64Microseconds(max_pause))(random));
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (wake_.wait_for(lock, pause, [this] { return stop_; })) return;
      }
      // One time in eight, a burst: every replica stopped in turn, the next
      // before the last is back (two down at most), so that a job that sees
      // all three fail runs out of them.
      const int first = pick(kReplicas);
      const auto take_down = [&](int f) { return TakeDown((first + f) % kReplicas, pick(2) == 0); };
      const auto bring_up = [&](int f) { return BringUp((first + f) % kReplicas); };
      if (pick(8) != 0) {
        if (!take_down(0) || !bring_up(0)) return;
        continue;
      }
      if (!take_down(0) || !take_down(1) || !bring_up(0) || !take_down(2) || !bring_up(1) ||
          !bring_up(2)) {
        return;
      }
      ++bursts_;
    }
  }

  // Drains or kills replica r; false (and failure_ says why) if it does not
  // stop listening.
  bool TakeDown(int r, bool drain) {
    ++down_;
    std::unique_ptr<ServerProcess>& victim = replicas_[r];
    if (drain) {
      // Once the port refuses connections, every open stream is answered
      // UNAVAILABLE at its next request, and the process exits 0 by itself
      // once they have ended.
      if (!victim->Drain(absl::Seconds(60))) {
        failure_ = absl::StrCat(victim->address(), " did not stop listening on SIGTERM; log:\n",
                                Tail(victim->Log()));
        return false;
      }
      ++drains_;
      note_(absl::StrCat("(", victim->address(), " drained)"));
      draining_.push_back(std::move(victim));
    } else {
      victim->Signal(SIGKILL);
      victim->Wait(absl::Seconds(60));
      note_(absl::StrCat("(", victim->address(), " killed)"));
      victim.reset();
      ++kills_;
    }
    return true;
  }

  // Starts replica r again on its port; false (and failure_ says why) if it
  // does not start.
  bool BringUp(int r) {
    // The drained replicas that have exited 0 are let go; the others are
    // checked at the end.
    draining_.erase(std::remove_if(draining_.begin(), draining_.end(),
                                   [this](const std::unique_ptr<ServerProcess>& server) {
                                     if (server->Wait(absl::Milliseconds(1)) != 0) return false;
                                     note_(absl::StrCat("(", server->address(), " exited 0: ",
                                                        DrainLine(server->Log()), ")"));
                                     return true;
                                   }),
                    draining_.end());
    replicas_[r] = ServerProcess::Start(ReplicaFlags(ports_[r]));
    if (replicas_[r] == nullptr || replicas_[r]->port() != ports_[r]) {
      failure_ = absl::StrCat("replica ", r, " did not start again on port ", ports_[r]);
      return false;
    }
    note_(absl::StrCat("(", replicas_[r]->address(), " started again)"));
    --down_;
    return true;
  }

  std::vector<int> ports_;
  std::function<void(const std::string&)> note_;
  std::vector<std::unique_ptr<ServerProcess>> replicas_;  // the chaos thread's while it runs
  std::vector<std::unique_ptr<ServerProcess>> draining_;  // drained, maybe still running
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<int> down_{0};  // replicas stopped and not yet started again
  // Read after the thread has ended.
  int drains_ = 0, kills_ = 0, bursts_ = 0;
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
      if (absl::StrContains(line, " failed (CANCELLED")) ++cancelled_;
    } else if (absl::StartsWith(line, "k-means")) {
      phase_ = std::max(phase_, kSeeding);
    } else if (absl::StartsWith(line, "step ")) {
      phase_ = kSteps;
    }
    lines_.push_back(line);
    if (lines_.size() > 60) lines_.pop_front();
  }
  std::string Told() const {
    std::lock_guard<std::mutex> lock(mu_);
    return absl::StrJoin(lines_, "\n");
  }
  std::string Moves() const {
    std::lock_guard<std::mutex> lock(mu_);
    return absl::StrCat(moves_[kLoad] + moves_[kSeeding] + moves_[kSteps], " shard moves (",
                        moves_[kLoad], " loading, ", moves_[kSeeding], " seeding, ", moves_[kSteps],
                        " stepping; ", cancelled_, " after a stream ended CANCELLED)");
  }

 private:
  mutable std::mutex mu_;
  std::deque<std::string> lines_;
  Phase phase_ = kLoad;
  int64_t moves_[kPhases] = {};
  int64_t cancelled_ = 0;
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

// The code of the last replica's failure in an out-of-replicas message.
std::string LastCode(const absl::Status& status) {
  const std::string message(status.message());
  for (const char* before : {": no replica left: ", " moves of this shard: "}) {
    const size_t at = message.find(before);
    if (at == std::string::npos) continue;
    const size_t from = at + std::strlen(before);
    return message.substr(from, message.find(':', from) - from);
  }
  return "?";
}

// The first part of a faulty job's result that differs from the clean
// run's; empty if none does.
std::string Differs(const ResidentJobResult& got, const ResidentJobResult& want) {
  if (got.centers != want.centers) return "the centers differ";
  if (got.labels != want.labels) return "the labels differ";
  if (got.objective != want.objective) {
    return absl::StrCat("objective ", got.objective, ", clean ", want.objective);
  }
  if (got.initial_objective != want.initial_objective) return "the initial objective differs";
  if (got.objectives != want.objectives) return "the iterations' objectives differ";
  if (got.iterations_run != want.iterations_run) {
    return absl::StrCat(got.iterations_run, " iterations, clean ", want.iterations_run);
  }
  if (got.init_candidates != want.init_candidates) return "k-means||'s candidates differ";
  return "";
}

TEST(ResidentJobStress, JobsBackToBackWhileReplicasAreDrainedAndKilledAtRandom) {
  News news;  // declared first: the chaos thread writes to it until it ends
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

  // Long enough by default for a few dozen jobs and faults.
  const absl::StatusOr<absl::Duration> stress = StressDuration();
  ASSERT_TRUE(stress.ok()) << stress.status();
  const absl::Duration length = *stress;
  chaos.Run(
      clean_time, [&news] { return news.PastLoad(); },
      [&news](const std::string& line) { news.Add(line); });
  int jobs = 0, identical = 0, out_of_replicas = 0, moves_in_completed = 0;
  std::string first_out_of_replicas, failure;
  std::map<std::string, int> out_by_last_code;  // the last replica's failure: its code
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
      if (!OutOfReplicas(got.status(), servers)) {
        failure = absl::StrCat("job ", jobs, ": ", got.status().ToString());
        break;
      }
      if (out_of_replicas++ == 0) first_out_of_replicas = got.status().ToString();
      ++out_by_last_code[LastCode(got.status())];
      continue;
    }
    failure = Differs(*got, want);
    if (!failure.empty()) {
      failure = absl::StrCat("job ", jobs, ": ", failure);
      break;
    }
    ++identical;
    moves_in_completed += got->shard_moves;
  }
  const absl::Duration ran = absl::Now() - start;
  // The drained replicas' own account (their line for the signal) is noted
  // as they exit, so the failure's message comes after they have.
  chaos.Stop();
  ASSERT_EQ(failure, "") << "\nthe driver's and the faults' last lines:\n" << news.Told();
  ASSERT_EQ(chaos.failure(), "");

  std::cout << "in " << absl::FormatDuration(ran) << " (clean job "
            << absl::FormatDuration(clean_time) << "): " << jobs << " jobs, " << identical
            << " identical to their reference, " << out_of_replicas << " out of replicas; "
            << chaos.drains() << " replicas drained and " << chaos.kills() << " killed ("
            << chaos.bursts() << " bursts of all three in turn); " << news.Moves() << ", "
            << moves_in_completed << " in completed jobs" << std::endl;
  if (out_of_replicas > 0) {
    std::vector<std::string> codes;
    for (const auto& [code, count] : out_by_last_code)
      codes.push_back(absl::StrCat(code, " ", count));
    std::cout << "out of replicas after the last one's " << absl::StrJoin(codes, ", ")
              << "; the first: " << first_out_of_replicas << std::endl;
  }
  // Not vacuous: jobs completed, faults hit them, and shards moved.
  EXPECT_GT(identical, 0);
  EXPECT_GT(chaos.drains(), 0);
  EXPECT_GT(chaos.kills(), 0);
  EXPECT_GT(moves_in_completed, 0);
}

}  // namespace
}  // namespace kmt
