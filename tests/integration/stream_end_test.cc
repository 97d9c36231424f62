// How the real server counts the end of a stream in kmt_streams_total and
// kmt_jobs_total: a stream the client's deadline ended is DEADLINE_EXCEEDED
// whether it was idle or a batch was running, even though the client gives
// up (and cancels the call) a little before the server's copy of the
// deadline; a stream the client cancelled is CANCELLED.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

using Series = std::map<std::string, double>;

constexpr int kStreams = 8;
constexpr char kStreamsTotal[] = "kmt_streams_total";

std::unique_ptr<v1::KMeansTransformer::Stub> Stub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  return v1::KMeansTransformer::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

std::chrono::system_clock::time_point In(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

// `count` streams opened at once on one channel, each with its own deadline
// `timeout` away, on which the client writes nothing: the status each ends
// with.
template <typename Request, typename Response>
std::vector<grpc::StatusCode> IdleStreams(
    const std::string& address, int count, absl::Duration timeout,
    std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (
        v1::KMeansTransformer::Stub::*open)(grpc::ClientContext*)) {
  const auto stub = Stub(address);
  std::vector<grpc::StatusCode> codes(count);
  std::vector<std::thread> threads;
  for (int s = 0; s < count; ++s) {
    threads.emplace_back([&, s] {
      grpc::ClientContext context;
      context.set_deadline(In(timeout));
      auto stream = ((*stub).*open)(&context);
      for (Response r; stream->Read(&r);) {
      }
      codes[s] = stream->Finish().error_code();
    });
  }
  for (std::thread& t : threads) t.join();
  return codes;
}

// `counter`'s series for `code`, e.g. kmt_streams_total{code="OK"}.
std::string Ended(const std::string& counter, const char* code) {
  return absl::StrCat(counter, "{code=\"", code, "\"}");
}

// The server's series once `counter` (kmt_streams_total or kmt_jobs_total)
// has counted `streams` ended by a deadline or a cancellation (the server
// counts a stream as it ends, after the client has seen it end), or after a
// minute.
Series AfterStreamsEnded(const ServerProcess& server, const std::string& counter, int streams) {
  Series series;
  for (int scrape = 0; scrape < 600; ++scrape) {
    series = ScrapeMetrics(server.metrics_port());
    double ended = 0;
    for (const char* code : {"DEADLINE_EXCEEDED", "CANCELLED"}) {
      const auto it = series.find(Ended(counter, code));
      if (it != series.end()) ended += it->second;
    }
    if (ended >= streams) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return series;
}

std::unique_ptr<ServerProcess> StartServer(std::vector<std::string> flags = {}) {
  flags.insert(flags.end(), {"--model_dir=", "--not_serving_delay=0s"});
  return ServerProcess::Start(flags);
}

// Idle streams opened by `open` and ended by their 1 s deadline, as the
// client and `counter` see them.
template <typename Open>
void ExpectIdleStreamsEndedByTheirDeadline(Open open, const std::string& counter) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  for (grpc::StatusCode code : IdleStreams(server->address(), kStreams, absl::Seconds(1), open)) {
    EXPECT_EQ(code, grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  const Series series = AfterStreamsEnded(*server, counter, kStreams);
  EXPECT_EQ(series.at(Ended(counter, "DEADLINE_EXCEEDED")), kStreams);
  EXPECT_EQ(series.at(Ended(counter, "CANCELLED")), 0);
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

TEST(StreamEnd, IdleClusterStreamsEndedByTheirDeadlineCountAsDeadlineExceeded) {
  ExpectIdleStreamsEndedByTheirDeadline(&v1::KMeansTransformer::Stub::Cluster, "kmt_streams_total");
}

TEST(StreamEnd, IdleJobStreamsEndedByTheirDeadlineCountAsDeadlineExceeded) {
  ExpectIdleStreamsEndedByTheirDeadline(&v1::KMeansTransformer::Stub::Job, "kmt_jobs_total");
}

// A batch of many cheap layers: it checks the call between layers every few
// microseconds, so it sees the client's cancellation as soon as it comes.
v1::ClusterRequest ManyCheapLayers() {
  v1::ClusterRequest r;
  r.set_request_id("cheap-layers");
  r.set_model("lloyd-onehot");
  r.set_n(1000);
  r.set_d(2);
  for (int i = 0; i < 1000; ++i) {
    r.add_points(static_cast<float>(i % 7));
    r.add_points(static_cast<float>(i % 11));
  }
  r.set_k(2);
  r.set_iterations(1000000);
  return r;
}

TEST(StreamEnd, ABatchCutShortByTheDeadlineCountsAsDeadlineExceeded) {
  auto server = StartServer({"--workers=1", "--max_iterations=1000000"});
  ASSERT_NE(server, nullptr);
  {
    const auto stub = Stub(server->address());
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(1)));
    auto stream = stub->Cluster(&context);
    ASSERT_TRUE(stream->Write(ManyCheapLayers()));
    for (v1::ClusterResponse r; stream->Read(&r);) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  const Series series = AfterStreamsEnded(*server, kStreamsTotal, 1);
  EXPECT_EQ(series.at(Ended(kStreamsTotal, "DEADLINE_EXCEEDED")), 1);
  EXPECT_EQ(series.at("kmt_errors_total{code=\"DEADLINE_EXCEEDED\"}"), 1);
  EXPECT_EQ(series.at("kmt_errors_total{code=\"CANCELLED\"}"), 0);
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

// The CLI's --timeout is the deadline of each of its streams.
TEST(StreamEnd, TheClisTimeoutCountsAsDeadlineExceeded) {
  auto server = StartServer({"--workers=1", "--max_iterations=1000000"});
  ASSERT_NE(server, nullptr);
  const std::string input = TempDir("cli-timeout") + "/points.csv";
  {
    std::ofstream out(input);
    for (int i = 0; i < 1000; ++i) out << i % 7 << "," << i % 11 << "\n";
  }
  std::string err;
  EXPECT_NE(RunProgram({KMT_CLI_BINARY, "cluster", "--server=" + server->address(),
                        "--input=" + input, "--k=2", "--iterations=1000000", "--timeout=1s"},
                       nullptr, &err),
            0);
  EXPECT_NE(err.find("DEADLINE_EXCEEDED"), std::string::npos) << err;
  const Series series = AfterStreamsEnded(*server, kStreamsTotal, 1);
  EXPECT_EQ(series.at(Ended(kStreamsTotal, "DEADLINE_EXCEEDED")), 1);
  EXPECT_EQ(series.at(Ended(kStreamsTotal, "CANCELLED")), 0);
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

// The client's own cancellation stays CANCELLED, well before its deadline.
TEST(StreamEnd, AStreamTheClientCancelsCountsAsCancelled) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  {
    const auto stub = Stub(server->address());
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(60)));
    auto stream = stub->Cluster(&context);
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      context.TryCancel();
    });
    for (v1::ClusterResponse r; stream->Read(&r);) {
    }
    canceller.join();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  const Series series = AfterStreamsEnded(*server, kStreamsTotal, 1);
  EXPECT_EQ(series.at(Ended(kStreamsTotal, "CANCELLED")), 1);
  EXPECT_EQ(series.at(Ended(kStreamsTotal, "DEADLINE_EXCEEDED")), 0);
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kmt
