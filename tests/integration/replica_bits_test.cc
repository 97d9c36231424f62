// Two replicas on the same machine give the same bits: a learned model's
// answer (whose attention sums run in another order at another SIMD level)
// is the same from two servers started side by side, start after start, as
// every process on one CPU chooses its levels alike (core/simd.h,
// AutoChoiceOf).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "proto/kmeans_transformer.pb.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

constexpr int kD = 32, kK = 10, kN = 2000;

// A learned model's request: points of touching clusters, its default
// initialisation from a fixed seed, the answer as raw bytes.
v1::ClusterRequest LearnedRequest() {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> noise(0, 1);
  std::uniform_real_distribution<float> site(-3, 3);
  std::vector<float> sites(kK * kD);
  for (float& s : sites) s = site(rng);
  v1::ClusterRequest request;
  request.set_request_id("same-bits");
  request.set_model("learned-onehot-d32-k10");
  request.set_n(kN);
  request.set_d(kD);
  request.set_k(kK);
  request.set_iterations(10);
  request.set_seed(11);
  request.set_raw_response(true);
  request.set_return_distances(v1::DISTANCES_NEAREST);
  for (int i = 0; i < kN; ++i) {
    const int s = static_cast<int>(rng() % kK);
    for (int l = 0; l < kD; ++l) request.add_points(sites[s * kD + l] + noise(rng));
  }
  return request;
}

// One request on a session of the client library (the server's answer,
// or the stream's failure).
absl::StatusOr<v1::ClusterResponse> Send(const std::string& address,
                                         const v1::ClusterRequest& request) {
  Client client({.target = address});
  ClusterSession session(&client);
  return session.Send(request);
}

TEST(ReplicaBits, TwoServersAnswerALearnedModelWithTheSameBytesStartAfterStart) {
  const v1::ClusterRequest request = LearnedRequest();
  std::string first;
  for (int start = 0; start < 20; ++start) {
    SCOPED_TRACE(start);
    std::unique_ptr<ServerProcess> a =
        ServerProcess::Start({"--model_dir=" KMT_SOURCE_DIR "/models", "--workers=1"});
    std::unique_ptr<ServerProcess> b =
        ServerProcess::Start({"--model_dir=" KMT_SOURCE_DIR "/models", "--workers=1"});
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    for (ServerProcess* server : {a.get(), b.get()}) {
      absl::StatusOr<v1::ClusterResponse> got = Send(server->address(), request);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_FALSE(got->has_error()) << got->error().message();
      ASSERT_EQ(got->centers_f32().size(), sizeof(float) * kK * kD);
      // The request id and the timings aside, every byte of the answer.
      got->clear_request_id();
      got->clear_timing();
      std::string bytes;
      ASSERT_TRUE(got->SerializeToString(&bytes));
      if (first.empty()) first = bytes;
      EXPECT_EQ(bytes, first) << "server " << server->address() << " log:\n" << server->Log();
    }
    EXPECT_EQ(a->Terminate(absl::Seconds(30)), 0);
    EXPECT_EQ(b->Terminate(absl::Seconds(30)), 0);
  }
}

}  // namespace
}  // namespace kmt
