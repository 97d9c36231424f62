// Bytes -> ClusterRequest -> the path a worker runs for it: limits,
// validation, the engine and the response. Small limits keep each input
// fast; whatever the bytes, the result is a response, OK or an error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz/fuzz_limits.h"
#include "server/batch_runner.h"
#include "server/model_registry.h"

namespace {

const kmt::ModelRegistry& Registry() {
  static const kmt::ModelRegistry* registry = [] {
    std::vector<std::string> refused;
    return new kmt::ModelRegistry(kmt::ModelRegistry::Load("", &refused));
  }();
  return *registry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kmt::v1::ClusterRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const kmt::v1::ClusterResponse response =
      kmt::RunBatch(Registry(), kmt::kFuzzLimits, request, /*check=*/{});
  // No non-finite number leaves the server.
  if (!response.has_error() && !std::isfinite(response.objective())) std::abort();
  return 0;
}
