#include "base/cpus.h"

#include <sched.h>

#include <thread>

#include "gtest/gtest.h"

namespace kmt {
namespace {

// The count follows the affinity mask, as `taskset` or a cpuset sets it.
TEST(UsableCpus, CountsTheAffinityMaskNotTheMachine) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(UsableCpus(), CPU_COUNT(&all));
  EXPECT_LE(UsableCpus(), static_cast<int>(std::thread::hardware_concurrency()));

  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(UsableCpus(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(UsableCpus(), CPU_COUNT(&all));
}

}  // namespace
}  // namespace kmt
