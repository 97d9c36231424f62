// A server under abuse, each test on a server of its own: thousands of idle
// streams, a client that never reads, a message that trickles in.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"

namespace kmt {
namespace {

// A field of /proc/PID/status ("VmRSS", "Threads"), as a number.
int64_t ProcStatus(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, field + ":")) {
      return std::stoll(line.substr(field.size() + 1));
    }
  }
  return -1;
}

TEST(ServiceAbuse, TwoThousandIdleStreamsHoldNeitherThreadsNorMuchMemory) {
  const auto server = ServerProcess::Start({"--workers=2"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Client({.target = server->address()}).ListModels().ok());
  const int64_t threads_before = ProcStatus(server->pid(), "Threads");
  const int64_t rss_before = ProcStatus(server->pid(), "VmRSS");
  // Streams opened and left idle: no thread of the client waits on them.
  constexpr int kStreams = 2000;
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<
      std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::ClusterRequest, v1::ClusterResponse>>>
      streams;
  for (int i = 0; i < kStreams; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub->AsyncCluster(contexts.back().get(), &queue, contexts.back().get()));
  }
  for (int i = 0; i < kStreams; ++i) {
    void* tag;
    bool ok;
    ASSERT_TRUE(queue.Next(&tag, &ok));
    EXPECT_TRUE(ok);
  }
  // Give the server time to take every stream in.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const int64_t threads = ProcStatus(server->pid(), "Threads");
  const int64_t rss = ProcStatus(server->pid(), "VmRSS");
  std::printf("%d idle streams: server threads %lld -> %lld, RSS %lld -> %lld kB\n", kStreams,
              static_cast<long long>(threads_before), static_cast<long long>(threads),
              static_cast<long long>(rss_before), static_cast<long long>(rss));
  // Streams wait in gRPC's completion queues, not on threads; each holds a
  // few tens of kilobytes of buffers.
  EXPECT_LE(threads, threads_before + 8);
  EXPECT_LE(rss - rss_before, kStreams * 100);  // kB: at most 100 kB a stream
  // The server still answers a new client at once.
  EXPECT_TRUE(Client({.target = server->address()}).ListModels().ok());
  for (auto& context : contexts) context->TryCancel();
  streams.clear();
  queue.Shutdown();
  void* tag;
  bool ok;
  while (queue.Next(&tag, &ok)) {
  }
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

TEST(ServiceAbuse, AClientThatNeverReadsIsHeldByTheStreamWindow) {
  const auto server =
      ServerProcess::Start({"--workers=2", "--not_serving_delay=0s", "--shutdown_grace=5s"});
  ASSERT_NE(server, nullptr);
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateCustomChannel(server->address(), grpc::InsecureChannelCredentials(), args));
  const int64_t rss_before = ProcStatus(server->pid(), "VmRSS");
  // 256 KiB batches written as fast as they are taken; no response is read.
  const v1::ClusterRequest request =
      Request("r", "lloyd-onehot", Matrix<float>::Random(8, 8192), 6, 5);
  grpc::ClientContext context;
  grpc::CompletionQueue queue;
  void* tag;
  bool ok;
  auto stream = stub->AsyncCluster(&context, &queue, &context);
  ASSERT_TRUE(queue.Next(&tag, &ok) && ok);
  constexpr int kOffered = 2000;  // 500 MiB if nothing held the client back
  int taken = 0;
  for (; taken < kOffered; ++taken) {
    stream->Write(request, &context);
    const auto status =
        queue.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + std::chrono::seconds(3));
    if (status != grpc::CompletionQueue::NextStatus::GOT_EVENT) break;  // the write is held
    ASSERT_TRUE(ok);
  }
  const int64_t grown_kb = ProcStatus(server->pid(), "VmRSS") - rss_before;
  std::printf("a client that never reads: %d of %d batches of 256 KiB taken, server RSS +%lld kB\n",
              taken, kOffered, static_cast<long long>(grown_kb));
  // The client's writes stop completing: what the server does not take
  // waits in the client's own buffers. The server holds 16 batches in
  // flight, its 16 MiB stream window and the responses the client does not
  // read: tens of MiB, not the hundreds of MiB written.
  EXPECT_LT(taken, kOffered);
  EXPECT_LT(grown_kb, 128 * 1024);
  // The server is not stuck: a new client is served.
  EXPECT_TRUE(Client({.target = server->address()}).ListModels().ok());
  context.TryCancel();
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  stream.reset();
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0) << server->Log();
}

// A TCP relay on a free loopback port to `port`, passing the client's bytes
// on at `bytes_per_second` and the server's at full speed; one connection.
class SlowRelay {
 public:
  SlowRelay(int port, int bytes_per_second) : port_(port), rate_(bytes_per_second) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), length);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    listen(listener_, 1);
    listen_port_ = ntohs(address.sin_port);
    accepter_ = std::thread([this] { Relay(); });
  }
  ~SlowRelay() {
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    for (int fd : {client_.load(), server_.load()}) {
      if (fd >= 0) shutdown(fd, SHUT_RDWR);
    }
    accepter_.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", listen_port_); }

 private:
  void Relay() {
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port_);
    if (connect(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return;
    client_ = client;
    server_ = server;
    // 4 KiB pieces, each followed by the pause that keeps to the rate. A
    // peer that has closed ends the piping, not the test (no SIGPIPE).
    const auto pipe = [](int from, int to, int rate) {
      char buffer[4096];
      for (;;) {
        const ssize_t got = read(from, buffer, sizeof(buffer));
        if (got <= 0 || send(to, buffer, got, MSG_NOSIGNAL) != got) break;
        if (rate > 0) std::this_thread::sleep_for(std::chrono::microseconds(got * 1000000 / rate));
      }
      shutdown(to, SHUT_WR);
    };
    std::thread down(pipe, server, client, 0);
    pipe(client, server, rate_);
    down.join();
    // Forgotten before closed, so the destructor never touches a reused fd.
    client_ = -1;
    server_ = -1;
    close(client);
    close(server);
  }

  int port_, rate_, listener_, listen_port_ = 0;
  std::atomic<int> client_{-1}, server_{-1};
  std::thread accepter_;
};

TEST(ServiceAbuse, ATricklingMessageDoesNotHoldTheWorker) {
  // One worker; a 2 MiB batch arrives at 256 KiB/s, about 8 s. Messages are
  // read by gRPC's threads, so the worker serves another client meanwhile.
  const auto server = ServerProcess::Start({"--workers=1", "--not_serving_delay=0s"});
  ASSERT_NE(server, nullptr);
  SlowRelay relay(server->port(), 256 << 10);
  std::atomic<bool> trickled{false};
  int trickle_answered = 0;
  absl::Status trickle_status;
  std::thread slow([&] {
    Client client({.target = relay.address(), .max_attempts = 1});
    const v1::ClusterRequest big =
        Request("big", "lloyd-onehot", Matrix<float>::Random(8, 65536), 4, 3);
    bool sent = false;
    trickle_status = client.Cluster(
        [&](v1::ClusterRequest* r) {
          if (sent) return false;
          *r = big;
          return sent = true;
        },
        [&](v1::ClusterResponse&& response) { trickle_answered += !response.has_error(); });
    trickled = true;
  });
  // Once the trickle is under way, a direct client's batch is answered.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Client direct({.target = server->address()});
  const Matrix<float> points = Matrix<float>::Random(8, 1000);
  int answered = 0;
  bool sent = false;
  const absl::Status status = direct.Cluster(
      [&](v1::ClusterRequest* r) {
        if (sent) return false;
        *r = Request("small", "lloyd-onehot", points, 4, 3);
        return sent = true;
      },
      [&](v1::ClusterResponse&& response) { answered += !response.has_error(); });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(answered, 1);
  EXPECT_FALSE(trickled) << "the trickle ended before the direct batch was answered";
  slow.join();
  EXPECT_TRUE(trickle_status.ok()) << trickle_status;
  EXPECT_EQ(trickle_answered, 1);
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kmt
