// Process metrics read from /proc follow what this process does: threads it
// starts, files it opens, memory it touches, CPU it burns.
#include "server/process_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace kmt {
namespace {

ProcessStats Read() {
  absl::StatusOr<ProcessStats> stats = ReadProcessStats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.value_or(ProcessStats{});
}

TEST(ReadProcessStats, CountsAThreadWhileItRuns) {
  const ProcessStats before = Read();
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread thread([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  });
  EXPECT_EQ(Read().threads, before.threads + 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_one();
  thread.join();
  // join returns once the thread's id is cleared, which the kernel does
  // before it takes the thread off the process's count: the count may
  // lag for a moment (a loaded machine showed 2 right after the join).
  int64_t threads = Read().threads;
  for (int i = 0; i < 200 && threads != before.threads; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    threads = Read().threads;
  }
  EXPECT_EQ(threads, before.threads);
}

TEST(ReadProcessStats, CountsOpenFileDescriptors) {
  const ProcessStats before = Read();
  const int fd = open("/proc/self/stat", O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(Read().open_fds, before.open_fds + 1);
  close(fd);
  EXPECT_EQ(Read().open_fds, before.open_fds);
  EXPECT_GT(before.max_fds, before.open_fds);
}

TEST(ReadProcessStats, ResidentMemoryGrowsWithTouchedPages) {
  const ProcessStats before = Read();
  constexpr size_t kBytes = 64 << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 1, kBytes);
  const ProcessStats after = Read();
  EXPECT_GE(after.resident_bytes - before.resident_bytes, 0.9 * kBytes);
  EXPECT_GE(after.virtual_bytes, after.resident_bytes);
  EXPECT_EQ(block[kBytes - 1], 1);
}

// CPU time as the kernel's own clock for this process counts it, to the
// kernel's tick (10 ms at most).
TEST(ReadProcessStats, CpuTimeAgreesWithTheProcessClock) {
  auto process_seconds = [] {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  const double start = process_seconds();
  volatile double sink = 0;
  while (process_seconds() < start + 0.2) sink = sink + 1;
  const double clock = process_seconds();
  const double stats = Read().cpu_seconds;
  EXPECT_NEAR(stats, clock, 0.05);
}

TEST(ReadProcessStats, StartedBeforeNowAfterBoot) {
  const ProcessStats stats = Read();
  EXPECT_LE(stats.start_time_seconds, static_cast<double>(std::time(nullptr)) + 1);
  timespec boot;
  clock_gettime(CLOCK_BOOTTIME, &boot);
  EXPECT_GE(stats.start_time_seconds,
            static_cast<double>(std::time(nullptr)) - static_cast<double>(boot.tv_sec) - 2);
}

TEST(ProcessCollector, ServesPrometheusStandardNames) {
  std::set<std::string> names;
  for (const prometheus::MetricFamily& family : ProcessCollector().Collect()) {
    EXPECT_EQ(family.metric.size(), 1u) << family.name;
    names.insert(family.name);
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"process_cpu_seconds_total", "process_resident_memory_bytes",
                                   "process_virtual_memory_bytes", "process_start_time_seconds",
                                   "process_threads", "process_open_fds", "process_max_fds"}));
}

}  // namespace
}  // namespace kmt
