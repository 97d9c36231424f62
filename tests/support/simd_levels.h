// Runs a test's body at every SIMD level this CPU runs (core/simd.h), and
// at levels mixed between kernel groups, so that a machine with AVX-512 and
// one without each check the kernels they can; the levels' names are in
// every failure's trace. For GoogleTest
// programs only.
#ifndef KMT_TESTS_SUPPORT_SIMD_LEVELS_H_
#define KMT_TESTS_SUPPORT_SIMD_LEVELS_H_

#include <gtest/gtest.h>

#include <vector>

#include "core/simd.h"

namespace kmt {

// The choices a kernel test runs at: every supported level for every
// group, lowest first, and where there are several, two that mix the
// highest and the lowest (auto may take groups from different levels).
inline std::vector<SimdChoice> SimdChoicesToTest() {
  const std::vector<SimdLevel> levels = SupportedSimdLevels();
  std::vector<SimdChoice> choices;
  for (SimdLevel level : levels) choices.push_back(SimdChoice::All(level));
  if (levels.size() > 1) {
    const SimdLevel low = levels.front(), high = levels.back();
    choices.push_back({.assignment = high, .sums = low, .attention = low});
    choices.push_back({.assignment = low, .sums = high, .attention = high});
  }
  return choices;
}

// Calls body() once per choice of SimdChoicesToTest(); the automatic choice
// is in use again afterwards.
template <typename Body>
void AtEachSimdLevel(Body&& body) {
  for (const SimdChoice& choice : SimdChoicesToTest()) {
    SCOPED_TRACE("SIMD " + SimdChoiceName(choice));
    ASSERT_TRUE(UseSimdChoice(choice).ok());
    body();
  }
  ASSERT_TRUE(UseSimdLevel("auto").ok());
}

}  // namespace kmt

#endif  // KMT_TESTS_SUPPORT_SIMD_LEVELS_H_
