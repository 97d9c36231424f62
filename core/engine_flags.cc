#include "core/engine_flags.h"

#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "core/simd.h"

ABSL_FLAG(std::string, simd, "",
          "SIMD level of the kernels: auto (by this CPU), x86-64, v2, v3 or v4; "
          "empty: the KMT_SIMD environment variable, else auto");

ABSL_FLAG(std::string, low_precision, "auto",
          "the assignment's low-precision candidate filter: auto (bfloat16 products on AMX "
          "where the CPU has them, the points they leave in doubt decided again in float32: "
          "the same labels, distances and sums as without), off, or one the CPU has by name "
          "(amx-bf16, avx512-bf16)");

namespace kmt {
namespace {

// --simd, else KMT_SIMD, else auto.
std::string SimdSetting() {
  std::string setting = absl::GetFlag(FLAGS_simd);
  if (setting.empty()) {
    const char* env = std::getenv("KMT_SIMD");
    setting = env != nullptr && *env != '\0' ? env : "auto";
  }
  return setting;
}

}  // namespace

ProgramSettings EngineFlags() {
  return {.apply =
              [] {
                absl::Status status = UseSimdLevel(SimdSetting());
                status.Update(UseLowPrecisionFilter(absl::GetFlag(FLAGS_low_precision)));
                return status;
              },
          .describe = [] { return DescribeSimd(); }};
}

}  // namespace kmt
