// The SIMD level the engine's kernels run at. The kernels (the assignment's
// products, scan and register kernel, the bound passes, the cluster sums,
// seeding's distances, attention) are compiled once per x86-64 level into
// the same binary (core/simd_kernels.h says how) and one level is chosen
// for the process: by default the fastest the CPU runs, or one named by a
// setting. Every level gives the same labels and cluster sums, to the bit.
#ifndef KMT_CORE_SIMD_H_
#define KMT_CORE_SIMD_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kmt {

// The x86-64 micro-architecture levels, lowest first, and the build's own
// flags for a build that compiles its kernels once (KMT_NATIVE, sanitizer
// and fuzzing builds, other architectures).
enum class SimdLevel {
  kBaseline,  ///< x86-64: SSE2
  kV2,        ///< x86-64-v2: SSE4.2, POPCNT
  kV3,        ///< x86-64-v3: AVX2, FMA, BMI2
  kV4,        ///< x86-64-v4: AVX-512 F, BW, CD, DQ, VL
  kBuild,     ///< the compiler's flags of a build without per-level kernels
};

// "x86-64", "v2", "v3", "v4", or "native" / "default" for kBuild.
std::string SimdLevelName(SimdLevel level);

// The levels compiled into this binary, lowest first.
std::vector<SimdLevel> CompiledSimdLevels();
// Of those, the ones this CPU runs (its instructions and the operating
// system's saving of their registers), lowest first.
std::vector<SimdLevel> SupportedSimdLevels();
// The highest x86-64 level of this CPU, whatever the binary holds
// (kBaseline on another architecture).
SimdLevel CpuSimdLevel();

// What `auto` chooses on this CPU: the highest supported level, except
// where a lower one is measured faster (simd.cc).
SimdLevel AutoSimdLevel();

// Makes the kernels of `setting` the process's: "auto", or a level's name
// (SimdLevelName; "x86-64-v3" is taken for "v3"). A level that this binary
// lacks or this CPU cannot run is refused with INVALID_ARGUMENT naming what
// the CPU and the binary have, and the level in use stays. Safe to call
// from several threads, but a run in progress may see a change between
// its kernel calls; programs call it once, at start, and tests between
// runs.
absl::Status UseSimdLevel(absl::string_view setting);

// The level whose kernels run now.
SimdLevel ActiveSimdLevel();

// One line for logs and --version: the level in use, and the levels
// compiled and supported, e.g. "simd v3 (auto; compiled x86-64 v2 v3 v4;
// cpu v4)".
std::string DescribeSimd();

}  // namespace kmt

#endif  // KMT_CORE_SIMD_H_
