// A replica drained (SIGTERM, as a rolling update does) or killed (SIGKILL)
// in the middle of a resident job on real kmt-server processes: during
// k-means++ and k-means‖ seeding, in an early iteration and before the
// labels step, on two and on three replicas, from the client library and
// from the kmt CLI. A drained replica ends each job stream UNAVAILABLE at
// its next request; the driver moves the shards to the live replicas and
// the result equals a run without the fault, to the bit. Each moment is
// taken from the driver's own log, and the fault is complete (the port
// refuses connections, or the process is gone) before the driver's next
// step. A replica holding more shards than a shard may make moves is
// drained without failing the job; a job that runs out of replicas names
// the last one's own failure, and a failure to read the points during a
// move is the job's, not the replica's.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/resident_job.h"
#include "core/random.h"
#include "learn/task_generator.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

constexpr int kD = 8, kK = 6, kIterations = 4;

const Matrix<float>& Points() {
  static const Matrix<float>* points = new Matrix<float>(
      GenerateTask<float>({.n = 12000, .d = kD, .k = 16, .scale = 0.3}, 21).points);
  return *points;
}

absl::Status CopyPoints(int64_t first, int64_t count, float* out) {
  const float* at = Points().col(first).data();
  std::copy(at, at + count * kD, out);
  return absl::OkStatus();
}

// Stops `victim` by `signal` and returns once it is stopped: drained, it
// refuses new connections and answers each stream's next request
// UNAVAILABLE; killed, it is gone.
void Stop(ServerProcess* victim, int signal) {
  if (signal == SIGTERM) {
    ASSERT_TRUE(victim->Drain(absl::Seconds(30))) << victim->Log();
  } else {
    victim->Signal(SIGKILL);
    victim->Wait(absl::Seconds(30));
  }
}

std::vector<std::string> Addresses(const std::vector<std::unique_ptr<ServerProcess>>& servers) {
  std::vector<std::string> addresses;
  for (const auto& server : servers) addresses.push_back(server->address());
  return addresses;
}

// Replicas of their own for each test; the last one is the victim.
std::vector<std::unique_ptr<ServerProcess>> StartReplicas(int count) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int r = 0; r < count; ++r) {
    servers.push_back(
        ServerProcess::Start({"--model_dir=", "--workers=1", "--not_serving_delay=0s"}));
    EXPECT_NE(servers.back(), nullptr);
  }
  return servers;
}

// A job of Points() on `servers`, `streams` shards per replica, `log`
// taking both the driver's and the shards' lines.
absl::StatusOr<ResidentJobResult> RunJob(const std::vector<std::string>& servers,
                                         ResidentSeeding seeding,
                                         std::function<void(const std::string&)> log,
                                         PointSource source = CopyPoints, int streams = 2) {
  ResidentJobOptions job{.k = kK, .iterations = kIterations, .seed = 4, .seeding = seeding};
  job.log = log;
  return RunResidentJobOnReplicas(
      {.servers = servers, .streams_per_server = streams, .chunk_bytes = 64 << 10, .log = log},
      std::move(job), 0, Points().cols(), kD, std::move(source));
}

struct Moment {
  const char* name;
  ResidentSeeding seeding;
  const char* after;  // the fault comes once a log line starts with this
};

// During each seeding, after the first iteration, and before the labels
// step (the last iteration's line comes just before it).
constexpr Moment kMoments[] = {
    {"KMeansPlusPlus", ResidentSeeding::kGreedyKMeansPlusPlus, "k-means++: 4 of"},
    {"KMeansParallel", ResidentSeeding::kKMeansParallel, "k-means||: round 1 "},
    {"EarlyIteration", ResidentSeeding::kGreedyKMeansPlusPlus, "step 1 "},
    {"LabelsStep", ResidentSeeding::kGreedyKMeansPlusPlus, "step 3 "},
};

struct Case {
  int signal;
  int replicas;
  Moment moment;
};

// As ctest lists the case.
void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.signal == SIGTERM ? "SIGTERM" : "SIGKILL") << " after '" << c.moment.after << "' on "
      << c.replicas << " replicas";
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return absl::StrCat(info.param.signal == SIGTERM ? "Drained" : "Killed", info.param.moment.name,
                      "On", info.param.replicas, "Replicas");
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const int signal : {SIGTERM, SIGKILL}) {
    for (const int replicas : {2, 3}) {
      for (const Moment& moment : kMoments) cases.push_back({signal, replicas, moment});
    }
  }
  return cases;
}

class ResidentJobDrain : public ::testing::TestWithParam<Case> {};

TEST_P(ResidentJobDrain, TheShardsMoveAndTheResultDoesNotChange) {
  const Case& c = GetParam();
  std::vector<std::unique_ptr<ServerProcess>> servers = StartReplicas(c.replicas);
  ASSERT_FALSE(HasFailure());
  const std::vector<std::string> addresses = Addresses(servers);
  const absl::StatusOr<ResidentJobResult> clean = RunJob(addresses, c.moment.seeding, nullptr);
  ASSERT_TRUE(clean.ok()) << clean.status();
  // The labels step comes after the last iteration, not after convergence.
  ASSERT_EQ(clean->iterations_run, kIterations);
  ASSERT_EQ(clean->convergence, Convergence::kNone);

  std::vector<std::string> news;
  bool stopped = false;
  const absl::StatusOr<ResidentJobResult> got =
      RunJob(addresses, c.moment.seeding, [&](const std::string& line) {
        news.push_back(line);
        if (!stopped && absl::StartsWith(line, c.moment.after)) {
          stopped = true;
          Stop(servers.back().get(), c.signal);
        }
      });
  const std::string told = absl::StrJoin(news, "\n");
  ASSERT_TRUE(got.ok()) << got.status() << "\n" << told;
  ASSERT_TRUE(stopped) << told;
  EXPECT_EQ(got->shard_moves, 2) << told;  // the victim held two shards
  EXPECT_EQ(got->centers, clean->centers);
  EXPECT_EQ(got->labels, clean->labels);
  EXPECT_EQ(got->objective, clean->objective);
  EXPECT_EQ(got->initial_objective, clean->initial_objective);
  EXPECT_EQ(got->objectives, clean->objectives);
  EXPECT_EQ(got->iterations_run, clean->iterations_run);
  EXPECT_EQ(got->init_candidates, clean->init_candidates);
  if (c.signal == SIGTERM) {
    EXPECT_NE(told.find(absl::StrCat(servers.back()->address(),
                                     " failed (UNAVAILABLE: server is shutting down")),
              std::string::npos)
        << told;
  }
}

INSTANTIATE_TEST_SUITE_P(Moments, ResidentJobDrain, ::testing::ValuesIn(AllCases()), CaseName);

TEST(ResidentJobDrainMoves, AReplicaHoldingMoreShardsThanMaxMovesIsDrainedWithoutFailingTheJob) {
  std::vector<std::unique_ptr<ServerProcess>> servers = StartReplicas(2);
  ASSERT_FALSE(HasFailure());
  const std::vector<std::string> addresses = Addresses(servers);
  constexpr int kStreams = 5;  // more than the 3 moves a shard may make
  const absl::StatusOr<ResidentJobResult> clean =
      RunJob(addresses, ResidentSeeding::kGreedyKMeansPlusPlus, nullptr, CopyPoints, kStreams);
  ASSERT_TRUE(clean.ok()) << clean.status();
  const absl::StatusOr<ResidentJobResult> got = RunJob(
      addresses, ResidentSeeding::kGreedyKMeansPlusPlus,
      [&](const std::string& line) {
        if (absl::StartsWith(line, "step 1 ")) Stop(servers[1].get(), SIGTERM);
      },
      CopyPoints, kStreams);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->shard_moves, kStreams);
  EXPECT_EQ(got->centers, clean->centers);
  EXPECT_EQ(got->labels, clean->labels);
  EXPECT_EQ(got->objectives, clean->objectives);
}

TEST(ResidentJobDrainFailure, AJobWithoutReplicasLeftNamesTheLastReplicasOwnFailure) {
  std::vector<std::unique_ptr<ServerProcess>> servers = StartReplicas(2);
  ASSERT_FALSE(HasFailure());
  // Both killed: the first shard's move to the other replica fails there,
  // and that failure, not the first replica's, ends the job.
  const absl::StatusOr<ResidentJobResult> got = RunJob(
      Addresses(servers), ResidentSeeding::kGreedyKMeansPlusPlus, [&](const std::string& line) {
        if (!absl::StartsWith(line, "step 1 ")) return;
        for (const auto& server : servers) Stop(server.get(), SIGKILL);
      });
  ASSERT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  const std::string message(got.status().message());
  const std::string last = servers[1]->address();
  EXPECT_TRUE(absl::StartsWith(message, absl::StrCat("shard 0 on ", last, ": no replica left: ")))
      << message;
  EXPECT_NE(message.find(last, message.find("no replica left")), std::string::npos) << message;
  EXPECT_EQ(message.find(servers[0]->address()), std::string::npos) << message;
}

TEST(ResidentJobDrainFailure, APointSourceFailingDuringAMoveFailsTheJobWithItsOwnError) {
  std::vector<std::unique_ptr<ServerProcess>> servers = StartReplicas(2);
  ASSERT_FALSE(HasFailure());
  // The points can be read once (by the loads, at once): the moved shard
  // cannot be read again, which is no fault of the replica it was to go to.
  // The error is INTERNAL, as the CLI's reader's is, a code a broken stream
  // also ends with.
  std::atomic<int64_t> read{0};
  const PointSource once = [&](int64_t first, int64_t count, float* out) {
    if (read >= Points().cols()) return absl::InternalError("the points are gone");
    read += count;
    return CopyPoints(first, count, out);
  };
  const absl::StatusOr<ResidentJobResult> got = RunJob(
      Addresses(servers), ResidentSeeding::kGreedyKMeansPlusPlus,
      [&](const std::string& line) {
        if (absl::StartsWith(line, "step 1 ")) Stop(servers[1].get(), SIGTERM);
      },
      once);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInternal) << got.status();
  EXPECT_TRUE(
      absl::StartsWith(got.status().message(),
                       absl::StrCat("shard 1 on ", servers[0]->address(), ": the points are gone")))
      << got.status();
}

// The points of the CLI's job: uniform noise, on which Lloyd's iterations
// go on changing labels for longer than the job runs.
std::string WriteNoise(const std::string& dir, int64_t n) {
  Rng rng(5);
  std::vector<float> values(n * kD);
  for (float& v : values) v = static_cast<float>(rng.Uniform());
  const std::string path = dir + "/points.f32";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ResidentJobDrainCli, AReplicaDrainedMidJobChangesNoByteOfTheCliOutputs) {
  std::vector<std::unique_ptr<ServerProcess>> servers = StartReplicas(2);
  ASSERT_FALSE(HasFailure());
  const std::string dir = TempDir("resident-drain-cli");
  const std::string input = WriteNoise(dir, 100000);
  const auto argv = [&](const std::string& out) {
    return std::vector<std::string>{KMT_CLI_BINARY,
                                    "cluster",
                                    "--mode=whole",
                                    "--server=ipv4:" + absl::StrJoin(Addresses(servers), ","),
                                    "--input=" + input,
                                    absl::StrCat("--d=", kD),
                                    absl::StrCat("--k=", kK),
                                    "--iterations=200",
                                    "--tol=0",
                                    "--streams=2",
                                    "--labels_out=" + out + ".labels",
                                    "--centers_out=" + out + ".centers"};
  };
  std::string clean_out, err;
  ASSERT_EQ(RunProgram(argv(dir + "/clean"), &clean_out, &err), 0) << err;
  ASSERT_NE(clean_out.find("after 200 iterations"), std::string::npos) << clean_out;

  // The CLI is held still while the replica drains after its first
  // iteration, so that the drain falls in the middle of its job.
  std::unique_ptr<ProgramProcess> cli = ProgramProcess::Start(argv(dir + "/drained"));
  ASSERT_NE(cli, nullptr);
  while (cli->Err().find("\nstep 1,") == std::string::npos) {
    ASSERT_EQ(cli->Wait(absl::Milliseconds(1)), -1) << cli->Err();
  }
  cli->Signal(SIGSTOP);
  Stop(servers[1].get(), SIGTERM);
  cli->Signal(SIGCONT);
  ASSERT_EQ(cli->Wait(absl::Seconds(120)), 0) << cli->Err();
  EXPECT_NE(cli->Err().find(absl::StrCat("shard 1: ", servers[1]->address(),
                                         " failed (UNAVAILABLE: server is shutting down")),
            std::string::npos)
      << cli->Err();
  EXPECT_NE(cli->Out().find(", 2 moved;"), std::string::npos) << cli->Out();
  EXPECT_EQ(ReadAll(dir + "/drained.labels"), ReadAll(dir + "/clean.labels"));
  EXPECT_EQ(ReadAll(dir + "/drained.centers"), ReadAll(dir + "/clean.centers"));
  const auto objectives = [](const std::string& out) {
    return out.substr(0, out.find("resident:"));
  };
  EXPECT_EQ(objectives(cli->Out()), objectives(clean_out));
}

}  // namespace
}  // namespace kmt
