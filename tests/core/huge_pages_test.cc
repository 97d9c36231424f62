// The huge-page allocator: large blocks aligned to 2 MiB and, where the
// kernel has transparent huge pages, in a mapping the kernel may back with
// them; small blocks as operator new gives them; both usable as a vector's.
#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace kmt {
namespace {

// The kernel's setting: "[always]", "[madvise]" or "[never]" marked.
std::string TransparentHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  return line;
}

// The THPeligible field of the mapping holding `address` in
// /proc/self/smaps, or -1 where none says.
int ThpEligible(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start <= at && at < end;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

TEST(HugePages, LargeVectorsAreAlignedToHugePagesAndHoldTheirValues) {
  const size_t n = kHugePagesFrom / sizeof(double) + 1000;
  HugePageVector<double> values(n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(values.data()) % kHugePageBytes, 0u);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<double>(i) * 0.5;
  HugePageVector<double> copy = values;
  copy.resize(2 * n, -1.0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.data()) % kHugePageBytes, 0u);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(copy[i], static_cast<double>(i) * 0.5);
  EXPECT_EQ(copy[2 * n - 1], -1.0);
}

TEST(HugePages, SmallVectorsComeFromOperatorNew) {
  HugePageVector<int> small(1000, 7);
  small.push_back(8);
  EXPECT_EQ(small.size(), 1001u);
  EXPECT_EQ(small[999], 7);
  EXPECT_EQ(small.back(), 8);
  EXPECT_LT(small.size() * sizeof(int), kHugePagesFrom);
}

TEST(HugePages, LargeBlocksAreAdvisedAsHugePages) {
  const std::string setting = TransparentHugePages();
  if (setting.find("[never]") != std::string::npos || setting.empty()) {
    GTEST_SKIP() << "transparent huge pages are off here: " << setting;
  }
  HugePageVector<float> bounds(kHugePagesFrom / sizeof(float) * 3);
  EXPECT_EQ(ThpEligible(bounds.data()), 1) << "THP setting " << setting;
}

TEST(HugePages, SizesThatOverflowAreRefused) {
  HugePageAllocator<double> allocator;
  EXPECT_THROW(allocator.allocate(SIZE_MAX / 2), std::bad_array_new_length);
}

}  // namespace
}  // namespace kmt
