#include "core/simd.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "simd_build.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#if KMT_SIMD_DISPATCH
#include "core/simd_kernels.h"

// Each level's object (simd_kernels.h), for the levels this build compiled.
#define KMT_DECLARE_ENTRY(name) extern "C" const kmt::LevelKernels* name();
KMT_SIMD_ENTRIES(KMT_DECLARE_ENTRY)
#undef KMT_DECLARE_ENTRY
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
#else
SimdLevel DetectCpuLevel() { return SimdLevel::kBaseline; }
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

const LevelKernels* KernelsOf(SimdLevel level) {
  for (const LevelKernels* kernels : CompiledKernels()) {
    if (kernels->level == level) return kernels;
  }
  return nullptr;
}
#endif

struct Active {
  std::atomic<SimdLevel> level;
  std::atomic<bool> automatic{true};
#if KMT_SIMD_DISPATCH
  std::atomic<const LevelKernels*> kernels;
#endif
};

Active& State() {
  static Active* active = [] {
    auto* a = new Active;
    a->level = AutoSimdLevel();
#if KMT_SIMD_DISPATCH
    a->kernels = KernelsOf(a->level);
#endif
    return a;
  }();
  return *active;
}

std::string Names(const std::vector<SimdLevel>& levels) {
  std::vector<std::string> names;
  for (SimdLevel level : levels) names.push_back(SimdLevelName(level));
  return names.empty() ? "none" : absl::StrJoin(names, " ");
}

}  // namespace

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

SimdLevel AutoSimdLevel() {
  const std::vector<SimdLevel> supported = SupportedSimdLevels();
  // The baseline level is compiled wherever dispatch is, and runs on every
  // x86-64 CPU.
  return supported.back();
}

absl::Status UseSimdLevel(absl::string_view setting) {
  Active& active = State();
  SimdLevel chosen;
  if (setting == "auto") {
    chosen = AutoSimdLevel();
  } else {
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
    chosen = *named;
  }
#if KMT_SIMD_DISPATCH
  active.kernels = KernelsOf(chosen);
#endif
  active.level = chosen;
  active.automatic = setting == "auto";
  return absl::OkStatus();
}

SimdLevel ActiveSimdLevel() { return State().level; }

std::string DescribeSimd() {
  const Active& active = State();
  return absl::StrCat("simd ", SimdLevelName(active.level), " (", active.automatic ? "auto" : "set",
                      "; compiled ", Names(CompiledSimdLevels()), "; cpu ",
                      SimdLevelName(CpuSimdLevel()), ")");
}

#if KMT_SIMD_DISPATCH
const LevelKernels& ActiveKernels() { return *State().kernels.load(std::memory_order_acquire); }
#endif

}  // namespace kmt
