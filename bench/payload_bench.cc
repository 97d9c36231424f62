// The server's per-batch cost of the wire format: one 4,096 x 32 request
// parsed from its bytes into a validated batch, and one response (labels and
// centers, k = 16) filled and serialized, with repeated fields against raw
// float32 / int32 bytes (proto/raw_payload.h).
//   build/bench/payload_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include "core/random.h"
#include "proto/raw_payload.h"
#include "proto/request.h"

namespace kmt {
namespace {

constexpr int kN = 4096, kD = 32, kK = 16;

std::string SerializedRequest(bool raw) {
  Rng rng(1);
  std::vector<float> values(kN * kD);
  for (float& v : values) v = static_cast<float>(rng.Normal());
  v1::ClusterRequest r;
  r.set_model("lloyd-onehot");
  r.set_n(kN);
  r.set_d(kD);
  r.set_k(kK);
  r.set_iterations(10);
  if (raw) {
    EncodeFloat32(values, r.mutable_points_f32());
  } else {
    r.mutable_points()->Add(values.begin(), values.end());
  }
  r.set_raw_response(raw);
  return r.SerializeAsString();
}

void BM_ParseRequest(benchmark::State& state) {
  const bool raw = state.range(0) != 0;
  const std::string bytes = SerializedRequest(raw);
  for (auto _ : state) {
    v1::ClusterRequest r;
    if (!r.ParseFromString(bytes)) state.SkipWithError("parse failed");
    absl::StatusOr<Batch<float>> batch = BatchFromRequest(r);
    if (!batch.ok()) state.SkipWithError(std::string(batch.status().message()).c_str());
    benchmark::DoNotOptimize(batch);
  }
  state.SetLabel(raw ? "raw bytes" : "repeated");
  state.counters["message_bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_ParseRequest)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_FillResponse(benchmark::State& state) {
  const bool raw = state.range(0) != 0;
  v1::ClusterRequest request;
  request.set_raw_response(raw);
  RunResult<float> run;
  run.labels.resize(kN);
  for (int i = 0; i < kN; ++i) run.labels[i] = i % kK;
  run.centers = Matrix<float>::Random(kD, kK);
  size_t size = 0;
  for (auto _ : state) {
    v1::ClusterResponse response;
    FillResponse(request, run, &response);
    const std::string bytes = response.SerializeAsString();
    size = bytes.size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetLabel(raw ? "raw bytes" : "repeated");
  state.counters["message_bytes"] = static_cast<double>(size);
}
BENCHMARK(BM_FillResponse)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kmt

BENCHMARK_MAIN();
