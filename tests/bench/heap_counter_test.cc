// The heap counter sees Eigen's and the standard library's allocations come
// and go, keeps the peak, and stays consistent across threads.
#include "bench/heap_counter.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "core/types.h"

namespace kmt {
namespace {

constexpr int64_t kMB = 1 << 20;

TEST(HeapCounter, SeesAMatrixAllocatedAndFreed) {
  const int64_t before = HeapLiveBytes();
  {
    Matrix<float> m(1024, 2560);  // 10 MiB
    m.setZero();
    EXPECT_GE(HeapLiveBytes() - before, 10 * kMB);
    EXPECT_LT(HeapLiveBytes() - before, 10 * kMB + 4096);
  }
  EXPECT_EQ(HeapLiveBytes(), before);
}

TEST(HeapCounter, KeepsThePeakUntilReset) {
  const int64_t before = HeapLiveBytes();
  ResetHeapPeak();
  { std::vector<char> big(8 * kMB); }
  std::vector<char> small(kMB);
  EXPECT_GE(HeapPeakBytes() - before, 8 * kMB);
  EXPECT_LT(HeapLiveBytes() - before, 2 * kMB);
  ResetHeapPeak();
  EXPECT_EQ(HeapPeakBytes(), HeapLiveBytes());
}

TEST(HeapCounter, FollowsReallocAndTheAlignedForms) {
  const int64_t before = HeapLiveBytes();
  // Volatile, so that the compiler cannot drop an allocation it can see
  // freed unused.
  void* volatile p = std::malloc(1000);
  p = std::realloc(p, 3 * kMB);
  EXPECT_GE(HeapLiveBytes() - before, 3 * kMB);
  void* volatile aligned = std::aligned_alloc(64, kMB);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(aligned) % 64, 0u);
  EXPECT_GE(HeapLiveBytes() - before, 4 * kMB);
  std::free(aligned);
  p = std::realloc(p, 100);
  EXPECT_LT(HeapLiveBytes() - before, 4096);
  std::free(p);
  EXPECT_EQ(HeapLiveBytes(), before);
}

TEST(HeapCounter, ThreadsAllocatingAtOnceBalanceOut) {
  const int64_t before = HeapLiveBytes();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 2000; ++i) {
        auto block = std::make_unique<char[]>(1 + i % 5000);
        block[0] = 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // Thread start-up may leave a few bookkeeping blocks behind.
  EXPECT_LT(std::abs(HeapLiveBytes() - before), 64 * 1024);
}

}  // namespace
}  // namespace kmt
