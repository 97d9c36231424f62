// A batch the engine tests build from a spec they mean to be valid: checked
// as the engine's callers check one, with the reason in the test's output
// (and an empty batch's failures after it) if it is not. For GoogleTest
// programs only.
#ifndef KMT_TESTS_SUPPORT_VALID_BATCH_H_
#define KMT_TESTS_SUPPORT_VALID_BATCH_H_

#include <gtest/gtest.h>

#include <utility>

#include "core/batch.h"

namespace kmt {

// In double, the engine tests' precision (a template would not take the
// designated initializers the tests write the spec with).
inline Batch<double> MakeBatch(BatchSpec<double> spec) {
  absl::StatusOr<Batch<double>> batch = Batch<double>::Validate(std::move(spec));
  EXPECT_TRUE(batch.ok()) << batch.status();
  return *std::move(batch);
}

}  // namespace kmt

#endif  // KMT_TESTS_SUPPORT_VALID_BATCH_H_
