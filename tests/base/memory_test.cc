#include "base/memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kmt {
namespace {

// A fake root with /proc and /sys/fs/cgroup files.
class UsableMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        std::filesystem::temp_directory_path() / ("kmt-memory-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    Write("/proc/meminfo", "MemTotal:       16384 kB\nMemFree:         1024 kB\n");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& content) {
    const std::filesystem::path file = root_.string() + path;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << content;
  }
  std::filesystem::path root_;
};

TEST_F(UsableMemoryTest, PhysicalMemoryWithoutACgroupLimit) {
  Write("/proc/self/cgroup", "0::/job\n");
  Write("/sys/fs/cgroup/job/memory.max", "max\n");
  EXPECT_EQ(UsableMemoryBytes(root_.string()), 16384 * 1024);
}

TEST_F(UsableMemoryTest, CgroupV2LimitOfTheProcessOwnCgroup) {
  Write("/proc/self/cgroup", "0::/job\n");
  Write("/sys/fs/cgroup/job/memory.max", "4194304\n");
  EXPECT_EQ(UsableMemoryBytes(root_.string()), 4194304);
}

TEST_F(UsableMemoryTest, CgroupV1LimitAtTheMountRootAsAContainerSeesIt) {
  Write("/proc/self/cgroup", "5:cpu:/\n4:cpuacct,memory:/docker/abc\n");
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "2097152\n");
  EXPECT_EQ(UsableMemoryBytes(root_.string()), 2097152);
}

TEST_F(UsableMemoryTest, NothingReadableIsZero) {
  std::filesystem::remove_all(root_);
  EXPECT_EQ(UsableMemoryBytes(root_.string()), 0);
}

}  // namespace
}  // namespace kmt
