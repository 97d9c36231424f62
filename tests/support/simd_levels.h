// Runs a test's body at every SIMD level this CPU runs (core/simd.h), so
// that a machine with AVX-512 and one without each check the kernels they
// can; the level's name is in every failure's trace. For GoogleTest
// programs only.
#ifndef KMT_TESTS_SUPPORT_SIMD_LEVELS_H_
#define KMT_TESTS_SUPPORT_SIMD_LEVELS_H_

#include <gtest/gtest.h>

#include "core/simd.h"

namespace kmt {

// Calls body() once per supported level, lowest first; the automatic
// choice is in use again afterwards.
template <typename Body>
void AtEachSimdLevel(Body&& body) {
  for (SimdLevel level : SupportedSimdLevels()) {
    SCOPED_TRACE("SIMD level " + SimdLevelName(level));
    ASSERT_TRUE(UseSimdLevel(SimdLevelName(level)).ok());
    body();
  }
  ASSERT_TRUE(UseSimdLevel("auto").ok());
}

}  // namespace kmt

#endif  // KMT_TESTS_SUPPORT_SIMD_LEVELS_H_
