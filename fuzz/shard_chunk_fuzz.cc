// Bytes -> a resident shard's chunks -> ResidentShard::Load, then, if the
// shard filled, one of each step on it. The input is a sequence of chunks,
// each a 2-byte little-endian length and that many bytes parsed as a
// ShardChunk (dense or sparse, float32 or float64), loaded in order until
// one is refused (which ends a job). Small limits keep each input fast;
// whatever the bytes, every call returns a status, and an OK step (an
// assign step with sparse sums too, on a sparse shard) answers finite
// numbers alone.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fuzz/fuzz_limits.h"
#include "proto/kmeans_transformer.pb.h"
#include "proto/raw_payload.h"
#include "server/resident_memory.h"
#include "server/resident_shard.h"

namespace {

// k = 2 centers in the shard's d and precision: the origin and all ones.
void PutCenters(const kmt::ResidentShard& shard, int d, std::string* f32, std::string* f64) {
  std::vector<double> centers(2 * d, 0.0);
  for (int l = 0; l < d; ++l) centers[d + l] = 1;
  if (shard.float64()) {
    kmt::EncodeFloat64(centers, f64);
  } else {
    kmt::EncodeFloat32(std::vector<float>(centers.begin(), centers.end()), f32);
  }
}

// An OK step's answer holds no infinite or NaN number (an omitted
// objective is NaN: none is omitted here).
bool Finite(const kmt::v1::JobResponse& out) {
  const auto finite = [](const auto& values) {
    return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
  };
  return std::isfinite(out.objective()) && std::isfinite(out.potential()) &&
         finite(out.center_sums()) && finite(out.center_weights()) &&
         finite(out.candidate_potentials()) && finite(out.candidate_weights());
}

// Aborts where an OK step answered a non-finite number.
void Check(const absl::Status& status, const kmt::v1::JobResponse& out) {
  if (status.ok() && !Finite(out)) std::abort();
}

void Steps(kmt::ResidentShard& shard, int64_t n, int d) {
  kmt::v1::JobResponse out;
  kmt::v1::AssignStep assign;
  assign.set_k(2);
  assign.set_farthest(1);
  assign.set_return_labels(true);
  PutCenters(shard, d, assign.mutable_centers_f32(), assign.mutable_centers_f64());
  Check(shard.Assign(assign, &out), out);
  if (shard.sparse()) {
    assign.set_sparse_sums(true);
    out.Clear();
    Check(shard.Assign(assign, &out), out);
  }

  kmt::v1::KMeansParallelStep parallel;
  PutCenters(shard, d, parallel.mutable_add_centers_f32(), parallel.mutable_add_centers_f64());
  out.Clear();
  const absl::Status added = shard.KMeansParallel(parallel, &out);
  Check(added, out);
  if (added.ok()) {
    kmt::v1::KMeansParallelStep sample;
    sample.set_oversampling(2);
    sample.set_potential(out.potential());
    sample.set_seed(1);
    out.Clear();
    Check(shard.KMeansParallel(sample, &out), out);
  }
  kmt::v1::CandidateWeightsStep weigh;
  PutCenters(shard, d, weigh.mutable_candidates_f32(), weigh.mutable_candidates_f64());
  out.Clear();
  Check(shard.CandidateWeights(weigh, &out), out);

  kmt::v1::SampleSumsStep sums;
  sums.set_k(2);
  PutCenters(shard, d, sums.mutable_centers_f32(), sums.mutable_centers_f64());
  sums.add_rows(0);
  sums.add_rows(n - 1);
  sums.add_fetch_rows(n - 1);
  out.Clear();
  Check(shard.SampleSums(sums, &out), out);

  kmt::v1::LloydStepsStep lloyd;
  lloyd.mutable_start()->set_k(2);
  lloyd.mutable_start()->set_return_labels(true);
  PutCenters(shard, d, lloyd.mutable_start()->mutable_centers_f32(),
             lloyd.mutable_start()->mutable_centers_f64());
  lloyd.set_iterations(3);
  lloyd.set_relocate(true);
  out.Clear();
  Check(shard.LloydSteps(lloyd, nullptr, &out), out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kmt::ResidentMemory memory(1 << 16);
  kmt::ResidentShard shard(&memory, kmt::kFuzzLimits);
  kmt::v1::ShardChunk chunk;
  size_t at = 0;
  while (at + 2 <= size) {
    const size_t length = data[at] | (size_t{data[at + 1]} << 8);
    at += 2;
    if (length > size - at) return 0;
    if (!chunk.ParseFromArray(data + at, static_cast<int>(length))) return 0;
    at += length;
    kmt::v1::JobResponse out;
    if (!shard.Load(chunk, &out).ok()) return 0;
  }
  if (shard.complete()) Steps(shard, chunk.n(), chunk.d());
  return 0;
}
