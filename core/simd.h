// The SIMD level the engine's kernels run at. The kernels (the assignment's
// products, scan and register kernel, the bound passes, the cluster sums, the
// passes over a batch's values, seeding's distances, the sparse assignment and
// sums, attention) are compiled once per x86-64 level into the same binary
// (core/simd_kernels.h says how) and one level is chosen for the process: by
// default the fastest the CPU runs, or one named by a setting. Every level
// gives the same labels and cluster sums, to the bit; attention's sums (learned
// models) differ in their last bits from level to level, and auto chooses its
// level by the CPU model alone (AutoChoiceOf).
#ifndef KMT_CORE_SIMD_H_
#define KMT_CORE_SIMD_H_

#include <optional>
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

// The level of each group of kernels that may come from different levels:
// the assignment (the products, scan and register kernel, bound passes,
// seeding's distances and the sparse scores), the cluster sums and means
// with the passes over a batch's values (and the sparse sums), and
// attention.
struct SimdChoice {
  SimdLevel assignment = SimdLevel::kBaseline;
  SimdLevel sums = SimdLevel::kBaseline;
  SimdLevel attention = SimdLevel::kBaseline;

  // Every group at `level`.
  static SimdChoice All(SimdLevel level) { return {level, level, level}; }
  bool operator==(const SimdChoice& o) const {
    return assignment == o.assignment && sums == o.sums && attention == o.attention;
  }
  bool operator!=(const SimdChoice& o) const { return !(*this == o); }
};

// "v4" when every group has one level, else each group's, e.g.
// "assignment v4, sums v4, attention v3".
std::string SimdChoiceName(const SimdChoice& choice);

// What `auto` chooses on this CPU (AutoChoiceOf): the highest level it
// runs for every group, except where the CPU has AVX-512 (v4), whose 512-bit
// units are split in two on some CPUs and lower the clock on others. There a
// table of measured CPUs (MeasuredChoice) gives each group's level; a CPU
// not in it has its assignment and sums timed at v3 and at v4
// once per process (a few milliseconds, reported by DescribeSimd) when
// first asked for: by the first kernel call under auto, or a report of the
// levels.
SimdChoice AutoSimdChoice();

// A CPU as the table of measured CPUs knows it: CPUID's vendor string, its
// family and model with the extended fields folded in as the vendors'
// manuals define them, and the features that tell its generation apart
// where the model does not (a hypervisor may report a model that is not
// the silicon's: one Xeon with AMX here reports Rocket Lake's, 0xa7).
struct CpuModel {
  std::string vendor;  ///< "GenuineIntel", "AuthenticAMD", ...; empty off x86-64
  int family = 0;
  int model = 0;
  bool amx = false;  ///< AMX-TILE (Intel Sapphire Rapids and later)
};

// This CPU's.
CpuModel DetectCpuModel();

// The assignment's low-precision candidate filter (NearestCenterScan,
// core/assign.h): its scores from bfloat16 products, decided again in float32
// where their error bound leaves the nearest center in doubt. The labels,
// distances, objective and sums are those of the float32 scan to the bit,
// with or without it.
enum class LowPrecisionFilter {
  kNone,        ///< every score in the working precision
  kAmxBf16,     ///< bfloat16 products on AMX tiles (AMX-TILE, AMX-BF16)
  kAvx512Bf16,  ///< bfloat16 dot products in AVX-512 registers (AVX512-BF16, vdpbf16ps)
};

// CPUs whose groups were timed at v3 and at v4 (bench/simd_bench's Group
// benchmarks, docs/core.md), and whose low-precision filters were timed
// against none (core_bench's EmbeddingAssignment): auto takes the level of
// each group and the filter from here, without timing. An entry matches a
// vendor and family, and the CPUs with AMX only if it says so.
struct MeasuredCpu {
  const char* vendor;
  int family;
  bool needs_amx;
  const char* name;  ///< for the log line, e.g. "Intel Xeon with AMX"
  SimdChoice choice;
  LowPrecisionFilter filter;  ///< taken where the CPU allows it (CpuLowPrecisionFilters)
};

// The table's entry for `cpu`, or null.
const MeasuredCpu* MeasuredChoice(const CpuModel& cpu);

// auto's choice on a CPU whose highest level is `highest`: the table's
// `measured` choice where the CPU model is in it; else every group at
// `highest` but the assignment and the sums, at the levels `timed` found
// faster (if timed). The assignment and the sums give the same bits at every
// level; attention does not (its sums run in another order at another
// width), so its level is never a timing's: every process on one CPU model
// runs it at the same level, and two replicas on the same hardware answer a
// learned model's request with the same bits.
SimdChoice AutoChoiceOf(const std::optional<SimdChoice>& measured, SimdLevel highest,
                        const std::optional<SimdChoice>& timed);

// Makes the kernels of `setting` the process's: "auto", or a level's name
// (SimdLevelName; "x86-64-v3" is taken for "v3") for every group. A level
// that this binary lacks or this CPU cannot run is refused with
// INVALID_ARGUMENT naming what the CPU and the binary have, and the levels
// in use stay. Safe to call from several threads, but a run in progress may
// see a change between its kernel calls; programs call it once, at start,
// and tests between runs.
absl::Status UseSimdLevel(absl::string_view setting);

// Makes each group's kernels those of its level in `choice`, as
// UseSimdLevel does for one level: every level must be one this binary has
// and this CPU runs.
absl::Status UseSimdChoice(const SimdChoice& choice);

// The levels whose kernels run now.
SimdChoice ActiveSimdChoice();

// "none", "amx-bf16" or "avx512-bf16".
std::string LowPrecisionFilterName(LowPrecisionFilter filter);

// The filters this CPU and operating system allow, best first: AMX where
// the CPU has it, the operating system enables its state and grants this
// process its use (asked for once, on Linux); AVX512-BF16 where the CPU has
// it and runs v4; none where this binary lacks the v4 level's kernels.
std::vector<LowPrecisionFilter> CpuLowPrecisionFilters();

// The one auto takes: the table's (MeasuredChoice) where the CPU is in it
// and allows that filter; else AMX where the CPU allows it, else kNone.
// AVX512-BF16's filter gives the same bits everywhere but pays only where
// its dot products outrun the float32 products: on AMD Zen 4 (twice their
// rate) it does, on a Xeon with AMX (the same rate) it was slower than none
// on three embedding shapes of four, and a CPU not in the table does not
// take it.
LowPrecisionFilter CpuLowPrecisionFilter();

// The filter the assignment uses now: auto's (CpuLowPrecisionFilter) unless
// the setting names another or turns it off; its kernels are the v4 level's, and auto
// keeps v4 for the assignment on a CPU that has one.
LowPrecisionFilter ActiveLowPrecisionFilter();

// "auto" (CpuLowPrecisionFilter, the default), "off", or a filter's name
// that this CPU allows ("amx-bf16", "avx512-bf16": to compare them).
// Anything else is refused with INVALID_ARGUMENT naming what this CPU
// allows. As UseSimdLevel: programs set it once, at start.
absl::Status UseLowPrecisionFilter(absl::string_view setting);

// One line for logs and --version: the levels in use, how they were chosen,
// and the levels compiled and supported, e.g. "simd v4 (auto, cpu table:
// Intel Xeon with AMX; compiled x86-64 v2 v3 v4; cpu v4; filter amx-bf16)".
std::string DescribeSimd();

}  // namespace kmt

#endif  // KMT_CORE_SIMD_H_
