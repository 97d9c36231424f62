#include "core/simd.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "simd_build.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/cluster_sums.h"
#include "core/simd_kernels.h"

#if KMT_SIMD_DISPATCH
// Each level's object (simd_kernels.h), for the levels this build compiled.
#define KMT_DECLARE_ENTRY(name) extern "C" const kmt::LevelKernels* name();
KMT_SIMD_ENTRIES(KMT_DECLARE_ENTRY)
#undef KMT_DECLARE_ENTRY
#else
// The build's one table, of its kernels compiled once.
extern "C" const kmt::LevelKernels* kmt_simd_kernels_build();
#endif

namespace kmt {
namespace {

#if defined(__x86_64__)
// The CPUID bits each level adds (the psABI's definitions of the levels),
// and XGETBV's check that the operating system saves the registers they
// use: a CPU can have AVX-512 and a kernel or hypervisor that does not
// enable it.
struct CpuId {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

CpuId Leaf(unsigned leaf, unsigned sub = 0) {
  CpuId r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return {};
  return r;
}

bool All(unsigned reg, unsigned bits) { return (reg & bits) == bits; }

SimdLevel DetectCpuLevel() {
  const CpuId one = Leaf(1), seven = Leaf(7), ext = Leaf(0x80000001);
  // v2: CMPXCHG16B, LAHF/SAHF, POPCNT, SSE3, SSE4.1, SSE4.2, SSSE3.
  const bool v2 =
      All(one.c, bit_CMPXCHG16B | bit_POPCNT | bit_SSE3 | bit_SSE4_1 | bit_SSE4_2 | bit_SSSE3) &&
      All(ext.c, bit_LAHF_LM);
  if (!v2) return SimdLevel::kBaseline;
  // v3: AVX, AVX2, BMI1, BMI2, F16C, FMA, LZCNT, MOVBE, OSXSAVE with the
  // SSE and AVX state enabled.
  const bool osxsave = All(one.c, bit_OSXSAVE);
  unsigned xcr0 = 0;
  if (osxsave) {
    unsigned edx = 0;
    __asm__("xgetbv" : "=a"(xcr0), "=d"(edx) : "c"(0));
  }
  const bool avx_state = osxsave && All(xcr0, 0x6);
  const bool v3 = avx_state && All(one.c, bit_AVX | bit_F16C | bit_FMA | bit_MOVBE) &&
                  All(seven.b, bit_AVX2 | bit_BMI | bit_BMI2) && All(ext.c, bit_LZCNT);
  if (!v3) return SimdLevel::kV2;
  // v4: AVX512F, AVX512BW, AVX512CD, AVX512DQ, AVX512VL, with the opmask
  // and ZMM state enabled.
  const bool v4 = All(xcr0, 0xe6) && All(seven.b, bit_AVX512F | bit_AVX512BW | bit_AVX512CD |
                                                      bit_AVX512DQ | bit_AVX512VL);
  return v4 ? SimdLevel::kV4 : SimdLevel::kV3;
}

// AMX with bfloat16 products: the CPUID bits, the tile state enabled in
// XCR0 (bits 17 and 18), and Linux's permission for this process to use
// the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked for once; without
// it the first tile instruction faults).
bool DetectAmxBf16() {
  const CpuId one = Leaf(1), seven = Leaf(7);
  constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;
  if (!All(one.c, bit_OSXSAVE) || !All(seven.d, kAmxBf16 | kAmxTile)) return false;
  unsigned xcr0 = 0, edx = 0;
  __asm__("xgetbv" : "=a"(xcr0), "=d"(edx) : "c"(0));
  if (!All(xcr0, (1u << 17) | (1u << 18))) return false;
#if defined(__linux__)
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// AVX512-BF16 (vdpbf16ps): CPUID leaf 7, sub-leaf 1, EAX bit 5; its
// registers are v4's, whose state DetectCpuLevel checks.
bool DetectAvx512Bf16() {
  constexpr unsigned kAvx512Bf16 = 1u << 5;
  return Leaf(7).a >= 1 && All(Leaf(7, 1).a, kAvx512Bf16);
}

CpuModel DetectCpuModelOfThisCpu() {
  const CpuId zero = Leaf(0), one = Leaf(1);
  CpuModel cpu;
  char vendor[12];
  std::memcpy(vendor, &zero.b, 4);
  std::memcpy(vendor + 4, &zero.d, 4);
  std::memcpy(vendor + 8, &zero.c, 4);
  cpu.vendor.assign(vendor, 12);
  const int family = static_cast<int>((one.a >> 8) & 0xf);
  const int model = static_cast<int>((one.a >> 4) & 0xf);
  const int extended_family = static_cast<int>((one.a >> 20) & 0xff);
  const int extended_model = static_cast<int>((one.a >> 16) & 0xf);
  cpu.family = family == 0xf ? family + extended_family : family;
  cpu.model = family == 0x6 || family == 0xf ? (extended_model << 4) | model : model;
  constexpr unsigned kAmxTile = 1u << 24;
  cpu.amx = All(Leaf(7).d, kAmxTile);
  return cpu;
}
#else
SimdLevel DetectCpuLevel() { return SimdLevel::kBaseline; }
bool DetectAmxBf16() { return false; }
bool DetectAvx512Bf16() { return false; }
CpuModel DetectCpuModelOfThisCpu() { return {}; }
#endif

bool Runs(SimdLevel level, SimdLevel cpu) {
  return level == SimdLevel::kBuild || static_cast<int>(level) <= static_cast<int>(cpu);
}

#if KMT_SIMD_DISPATCH
std::vector<const LevelKernels*> CompiledKernels() {
  std::vector<const LevelKernels*> levels;
#define KMT_ADD_ENTRY(name) levels.push_back(name());
  KMT_SIMD_ENTRIES(KMT_ADD_ENTRY)
#undef KMT_ADD_ENTRY
  return levels;
}

const LevelKernels& KernelsOf(SimdLevel level) {
  for (const LevelKernels* kernels : CompiledKernels()) {
    if (kernels->level == level) return *kernels;
  }
  // Only levels of CompiledSimdLevels() are asked for.
  std::abort();
}

// The table of a choice: each group's kernels from its level's table. Made
// once per choice and kept for the process, as a kernel call in flight may
// still read the table it started with.
const LevelKernels* KernelsOf(const SimdChoice& choice) {
  static std::mutex mu;
  static auto* made = new std::map<std::tuple<SimdLevel, SimdLevel, SimdLevel>, LevelKernels>;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, inserted] = made->try_emplace({choice.assignment, choice.sums, choice.attention});
  if (inserted) {
    const LevelKernels &a = KernelsOf(choice.assignment), &s = KernelsOf(choice.sums),
                       &t = KernelsOf(choice.attention);
    LevelKernels& k = it->second;
    k.level = choice.assignment;
    k.f = {a.f.assignment, s.f.sums, t.f.attention};
    k.d = {a.d.assignment, s.d.sums, t.d.attention};
    k.cluster_sums_add = s.cluster_sums_add;
  }
  return &it->second;
}

// The least of `rounds` timings of each of two calls, taken in turns.
template <typename Run>
std::pair<double, double> TimingsOfTwo(const Run& run, const LevelKernels& a,
                                       const LevelKernels& b) {
  using Clock = std::chrono::steady_clock;
  constexpr int kRounds = 5;
  double best[2] = {1e300, 1e300};
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < 2; ++i) {
      const Clock::time_point start = Clock::now();
      run(i == 0 ? a : b);
      best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  return {best[0], best[1]};
}

// Times the assignment and the sums at v3 and at v4 on one small problem
// (a served batch's shape: 4,096 points of d = 32 against k = 64 centers)
// and keeps v4 for a group unless v3 is faster. Attention is not timed: its
// sums' order follows the level (AutoChoiceOf).
SimdChoice TimedChoice() {
  const LevelKernels &v3 = KernelsOf(SimdLevel::kV3), &v4 = KernelsOf(SimdLevel::kV4);
  constexpr int n = 4096, d = 32, k = 64;
  uint64_t state = 1;
  auto fill = [&state](Matrix<float>* m) {
    for (Eigen::Index i = 0; i < m->size(); ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      (*m)(i) = static_cast<float>(state >> 40) * 0x1p-24f;
    }
  };
  Matrix<float> points(d, n), centers(d, k);
  fill(&points);
  fill(&centers);
  Labels labels;
  SimdChoice choice = SimdChoice::All(SimdLevel::kV4);
  auto pick = [](std::pair<double, double> v3_v4) {
    return v3_v4.first < v3_v4.second ? SimdLevel::kV3 : SimdLevel::kV4;
  };
  // The low-precision filter is v4's alone, and pays where this timing's
  // d = 32 does not reach: a CPU that has it keeps v4 for the assignment.
  choice.assignment = CpuLowPrecisionFilter() != LowPrecisionFilter::kNone
                          ? SimdLevel::kV4
                          : pick(TimingsOfTwo(
                                [&](const LevelKernels& l) {
                                  l.f.assignment.AssignNearest(points, centers, &labels, nullptr,
                                                               nullptr, nullptr, nullptr, true);
                                },
                                v3, v4));
  v4.f.assignment.AssignNearest(points, centers, &labels, nullptr, nullptr, nullptr, nullptr, true);
  choice.sums = pick(TimingsOfTwo(
      [&](const LevelKernels& l) {
        ClusterSums sums(d, k);
        l.f.sums.AccumulateClusterSums(points, labels, &sums, nullptr);
        l.f.sums.ApplyMeans(sums, &centers);
      },
      v3, v4));
  return choice;
}
#endif

// The automatic choice, how it was made, and how long choosing took, once
// per process.
struct Timed {
  SimdChoice choice;
  std::string how;  // "cpu table: <name>", "timed in N ms", or empty (one level)
};

const Timed& AutoChoice() {
  static const Timed timed = [] {
    const std::vector<SimdLevel> supported = SupportedSimdLevels();
    // The baseline level is compiled wherever dispatch is, and runs on every
    // x86-64 CPU.
    const SimdLevel highest = supported.back();
    Timed t{SimdChoice::All(highest), ""};
#if KMT_SIMD_DISPATCH
    const bool has_v3 =
        std::find(supported.begin(), supported.end(), SimdLevel::kV3) != supported.end();
    if (highest == SimdLevel::kV4 && has_v3) {
      const CpuModel cpu = DetectCpuModel();
      if (const MeasuredCpu* measured = MeasuredChoice(cpu)) {
        t = {AutoChoiceOf(measured->choice, highest, std::nullopt),
             absl::StrCat("cpu table: ", measured->name)};
      } else {
        const auto start = std::chrono::steady_clock::now();
        SimdChoice calibrated;
        // On a thread of its own, whose OpenMP regions have one thread: the
        // timing starts no thread that outlives it (a server blocks signals
        // and sets scheduling policies per thread), and compares one core's
        // throughput, undisturbed by other threads' load.
        std::thread([&calibrated] {
#ifdef _OPENMP
          omp_set_num_threads(1);
#endif
          calibrated = TimedChoice();
        }).join();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        t = {AutoChoiceOf(std::nullopt, highest, calibrated),
             absl::StrCat(cpu.vendor, " family ", cpu.family, " model ", cpu.model,
                          " not in the cpu table, timed in ", static_cast<int>(seconds * 1e3 + 0.5),
                          " ms")};
      }
    }
#endif
    return t;
  }();
  return timed;
}

// The levels in use. Auto's choice is timed when it is first needed (a
// kernel call, or a report of the levels), not at start: a program that
// runs no kernel pays nothing for it.
struct Active {
  std::mutex mu;                     // orders the writes below
  std::optional<SimdChoice> choice;  // unset: auto
#if KMT_SIMD_DISPATCH
  std::atomic<const LevelKernels*> kernels{nullptr};  // null: auto, until first needed
#endif
};

Active& State() {
  static Active* active = new Active;
  return *active;
}

std::string Names(const std::vector<SimdLevel>& levels) {
  std::vector<std::string> names;
  for (SimdLevel level : levels) names.push_back(SimdLevelName(level));
  return names.empty() ? "none" : absl::StrJoin(names, " ");
}

// Whether the assignment kernels of `level` hold the filters': v4's, or
// those of a build without per-level kernels compiled for AVX-512.
bool LevelHasFilter(SimdLevel level) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
  if (level == SimdLevel::kBuild) return true;
#endif
  return level == SimdLevel::kV4;
}

// The filter set (UseLowPrecisionFilter): -1 auto, else a LowPrecisionFilter.
std::atomic<int> filter_setting{-1};

}  // namespace

std::string LowPrecisionFilterName(LowPrecisionFilter filter) {
  switch (filter) {
    case LowPrecisionFilter::kAmxBf16:
      return "amx-bf16";
    case LowPrecisionFilter::kAvx512Bf16:
      return "avx512-bf16";
    case LowPrecisionFilter::kNone:
      break;
  }
  return "none";
}

std::vector<LowPrecisionFilter> CpuLowPrecisionFilters() {
  // The filters' kernels are the v4 level's (or a native build's with
  // AVX-512): the assignment in use must be at that level to run them.
  static const std::vector<LowPrecisionFilter> filters = [] {
    std::vector<LowPrecisionFilter> found;
    const std::vector<SimdLevel> compiled = CompiledSimdLevels();
    const bool v4 = CpuSimdLevel() == SimdLevel::kV4 &&
                    std::any_of(compiled.begin(), compiled.end(), LevelHasFilter);
    if (!v4) return found;
    if (DetectAmxBf16()) found.push_back(LowPrecisionFilter::kAmxBf16);
    if (DetectAvx512Bf16()) found.push_back(LowPrecisionFilter::kAvx512Bf16);
    return found;
  }();
  return filters;
}

LowPrecisionFilter CpuLowPrecisionFilter() {
  static const LowPrecisionFilter filter = [] {
    const std::vector<LowPrecisionFilter>& filters = CpuLowPrecisionFilters();
    auto allowed = [&filters](LowPrecisionFilter f) {
      return std::find(filters.begin(), filters.end(), f) != filters.end();
    };
    if (const MeasuredCpu* measured = MeasuredChoice(DetectCpuModel());
        measured != nullptr && allowed(measured->filter)) {
      return measured->filter;
    }
    return allowed(LowPrecisionFilter::kAmxBf16) ? LowPrecisionFilter::kAmxBf16
                                                 : LowPrecisionFilter::kNone;
  }();
  return filter;
}

LowPrecisionFilter ActiveLowPrecisionFilter() {
  const int setting = filter_setting.load(std::memory_order_relaxed);
  return setting < 0 ? CpuLowPrecisionFilter() : static_cast<LowPrecisionFilter>(setting);
}

absl::Status UseLowPrecisionFilter(absl::string_view setting) {
  if (setting == "auto" || setting == "off") {
    filter_setting.store(setting == "auto" ? -1 : static_cast<int>(LowPrecisionFilter::kNone),
                         std::memory_order_relaxed);
    return absl::OkStatus();
  }
  std::vector<std::string> allowed = {"auto", "off"};
  for (LowPrecisionFilter filter : CpuLowPrecisionFilters()) {
    if (setting == LowPrecisionFilterName(filter)) {
      filter_setting.store(static_cast<int>(filter), std::memory_order_relaxed);
      return absl::OkStatus();
    }
    allowed.push_back(LowPrecisionFilterName(filter));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("low-precision filter \"", setting, "\": this CPU takes ",
                   absl::StrJoin(allowed, ", "), " (amx-bf16 and avx512-bf16 where it has them)"));
}

std::string SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kBaseline:
      return "x86-64";
    case SimdLevel::kV2:
      return "v2";
    case SimdLevel::kV3:
      return "v3";
    case SimdLevel::kV4:
      return "v4";
    case SimdLevel::kBuild:
      return KMT_SIMD_BUILD_NAME;
  }
  return "unknown";
}

std::vector<SimdLevel> CompiledSimdLevels() {
#if KMT_SIMD_DISPATCH
  std::vector<SimdLevel> levels;
  for (const LevelKernels* kernels : CompiledKernels()) levels.push_back(kernels->level);
  std::sort(levels.begin(), levels.end());
  return levels;
#else
  return {SimdLevel::kBuild};
#endif
}

SimdLevel CpuSimdLevel() {
  static const SimdLevel cpu = DetectCpuLevel();
  return cpu;
}

std::vector<SimdLevel> SupportedSimdLevels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel level : CompiledSimdLevels()) {
    if (Runs(level, CpuSimdLevel())) levels.push_back(level);
  }
  return levels;
}

std::string SimdChoiceName(const SimdChoice& choice) {
  if (choice == SimdChoice::All(choice.assignment)) return SimdLevelName(choice.assignment);
  return absl::StrCat("assignment ", SimdLevelName(choice.assignment), ", sums ",
                      SimdLevelName(choice.sums), ", attention ", SimdLevelName(choice.attention));
}

CpuModel DetectCpuModel() {
  static const CpuModel cpu = DetectCpuModelOfThisCpu();
  return cpu;
}

namespace {

// Each group's level, v3 against v4, measured with bench/simd_bench
// --benchmark_filter=Group on one core (docs/core.md, "SIMD levels"). Only
// CPUs that run v4 are looked up.
const MeasuredCpu kMeasuredCpus[] = {
    // Sapphire Rapids: assignment 56 against 75 ms, sums 11.9 against
    // 14.1 ms, attention 2.62 against 2.95 ms. AMX's filter: 1.08 to 3.0
    // times the float32 assignment's speed on the four embedding shapes;
    // AVX512-BF16's was slower than none on three of them.
    {"GenuineIntel", 6, true, "Intel Xeon with AMX", SimdChoice::All(SimdLevel::kV4),
     LowPrecisionFilter::kAmxBf16},
    // Zen 4 (the family's CPUs with AVX-512; Zen 3's have none and are never
    // looked up): assignment 23.8 against 35.0 ms, sums 3.31 against
    // 3.51 ms, attention 1.37 against 1.62 ms. AVX512-BF16's filter: 1.2 to
    // 2.2 times the float32 assignment's speed on the four embedding shapes
    // (its dot products run at twice the float32 products' rate).
    {"AuthenticAMD", 0x19, false, "AMD Zen 4", SimdChoice::All(SimdLevel::kV4),
     LowPrecisionFilter::kAvx512Bf16},
};

}  // namespace

const MeasuredCpu* MeasuredChoice(const CpuModel& cpu) {
  for (const MeasuredCpu& measured : kMeasuredCpus) {
    if (cpu.vendor == measured.vendor && cpu.family == measured.family &&
        (cpu.amx || !measured.needs_amx)) {
      return &measured;
    }
  }
  return nullptr;
}

SimdChoice AutoChoiceOf(const std::optional<SimdChoice>& measured, SimdLevel highest,
                        const std::optional<SimdChoice>& timed) {
  if (measured) return *measured;
  SimdChoice choice = SimdChoice::All(highest);
  if (timed) {
    choice.assignment = timed->assignment;
    choice.sums = timed->sums;
  }
  return choice;
}

SimdChoice AutoSimdChoice() { return AutoChoice().choice; }

namespace {

// A level of this binary that this CPU runs, by its name.
absl::StatusOr<SimdLevel> RunnableLevel(absl::string_view setting) {
  absl::string_view name = setting;
  if (name.substr(0, 7) == "x86-64-") name.remove_prefix(7);
  const std::vector<SimdLevel> compiled = CompiledSimdLevels();
  auto named = std::find_if(compiled.begin(), compiled.end(),
                            [&](SimdLevel level) { return SimdLevelName(level) == name; });
  if (named == compiled.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SIMD level '", setting, "' is not one of this binary's: auto or ", Names(compiled)));
  }
  if (!Runs(*named, CpuSimdLevel())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SIMD level '", setting, "' needs instructions this CPU lacks: it runs ",
        Names(SupportedSimdLevels()), " (its own level is ", SimdLevelName(CpuSimdLevel()), ")"));
  }
  return *named;
}

// A choice set, or auto's (unset).
void Use(const std::optional<SimdChoice>& choice) {
  Active& active = State();
  std::lock_guard<std::mutex> lock(active.mu);
#if KMT_SIMD_DISPATCH
  active.kernels.store(choice ? KernelsOf(*choice) : nullptr, std::memory_order_release);
#endif
  active.choice = choice;
}

}  // namespace

absl::Status UseSimdLevel(absl::string_view setting) {
  if (setting == "auto") {
    Use(std::nullopt);
    return absl::OkStatus();
  }
  absl::StatusOr<SimdLevel> level = RunnableLevel(setting);
  if (!level.ok()) return level.status();
  Use(SimdChoice::All(*level));
  return absl::OkStatus();
}

absl::Status UseSimdChoice(const SimdChoice& choice) {
  for (SimdLevel level : {choice.assignment, choice.sums, choice.attention}) {
    if (absl::StatusOr<SimdLevel> runnable = RunnableLevel(SimdLevelName(level)); !runnable.ok()) {
      return runnable.status();
    }
  }
  Use(choice);
  return absl::OkStatus();
}

SimdChoice ActiveSimdChoice() {
  Active& active = State();
  std::lock_guard<std::mutex> lock(active.mu);
  return active.choice.value_or(AutoSimdChoice());
}

std::string DescribeSimd() {
  Active& active = State();
  std::lock_guard<std::mutex> lock(active.mu);
  std::string how = active.choice ? "set" : "auto";
  if (!active.choice && !AutoChoice().how.empty()) absl::StrAppend(&how, ", ", AutoChoice().how);
  return absl::StrCat(
      "simd ", SimdChoiceName(active.choice.value_or(AutoSimdChoice())), " (", how, "; compiled ",
      Names(CompiledSimdLevels()), "; cpu ", SimdLevelName(CpuSimdLevel()), "; filter ",
      LowPrecisionFilterName(LevelHasFilter(active.choice.value_or(AutoSimdChoice()).assignment)
                                 ? ActiveLowPrecisionFilter()
                                 : LowPrecisionFilter::kNone),
      ")");
}

#if KMT_SIMD_DISPATCH
const LevelKernels& ActiveKernels() {
  Active& active = State();
  if (const LevelKernels* kernels = active.kernels.load(std::memory_order_acquire)) {
    return *kernels;
  }
  // Auto's first kernel call: its choice, timed once.
  std::lock_guard<std::mutex> lock(active.mu);
  const LevelKernels* kernels = active.kernels.load(std::memory_order_relaxed);
  if (kernels == nullptr) {
    kernels = KernelsOf(active.choice.value_or(AutoSimdChoice()));
    active.kernels.store(kernels, std::memory_order_release);
  }
  return *kernels;
}
#else
const LevelKernels& ActiveKernels() { return *kmt_simd_kernels_build(); }
#endif

}  // namespace kmt
