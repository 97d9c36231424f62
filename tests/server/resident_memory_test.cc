#include "server/resident_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace kmt {
namespace {

TEST(ResidentMemory, ReservesWhatFitsAndRefusesWithTheNumbers) {
  ResidentMemory memory(1000);
  ASSERT_TRUE(memory.Reserve(600).ok());
  const absl::Status refused = memory.Reserve(401);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("a shard of 401 bytes does not fit: this server holds 600 of "
                                   "its 1000 resident bytes"),
            std::string::npos)
      << refused.message();
  EXPECT_EQ(memory.held(), 600);
  ASSERT_TRUE(memory.Reserve(400).ok());
  memory.Release(600);
  EXPECT_EQ(memory.held(), 400);
}

TEST(ResidentMemory, CapIsTheFlagOrAShareOfUsableMemory) {
  EXPECT_EQ(ResidentCap(123, 1 << 30), 123);
  EXPECT_EQ(ResidentCap(0, 1000000), static_cast<int64_t>(1000000 * kResidentMemoryShare));
}

// A fresh mapping's pages mapped by PagesInAdvance: every page resident
// afterwards (where the kernel has MADV_POPULATE_WRITE), the bytes written
// before and during the mapping kept, and a small block left alone.
TEST(PagesInAdvance, MapsAFreshBlocksPagesAndKeepsItsContents) {
  const size_t bytes = PagesInAdvance::kFrom + (3 << 20) + 100;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapping, MAP_FAILED);
  auto* block = static_cast<unsigned char*>(mapping);
  const auto resident = [&] {
    std::vector<unsigned char> in((bytes + page - 1) / page);
    EXPECT_EQ(mincore(block, bytes, in.data()), 0);
    size_t count = 0;
    for (const unsigned char p : in) count += p & 1;
    return count;
  };
  std::memset(block + 5 * page, 7, 100);
  EXPECT_LE(resident(), 2u);
  bool mapped;
  {
    PagesInAdvance pages(block, bytes);
    std::memset(block + bytes - 100, 9, 100);  // the chunks racing the mapping
    mapped = pages.Wait();
  }
  if (mapped) {
    EXPECT_EQ(resident(), (bytes + page - 1) / page);
  }
  for (size_t i = 0; i < 100; ++i) {
    ASSERT_EQ(block[5 * page + i], 7);
    ASSERT_EQ(block[bytes - 100 + i], 9);
  }
  EXPECT_EQ(block[6 * page], 0);
  munmap(mapping, bytes);

  std::vector<unsigned char> small(PagesInAdvance::kFrom - 1);
  PagesInAdvance none(small.data(), small.size());
  EXPECT_FALSE(none.Wait());
  PagesInAdvance idle;
  EXPECT_FALSE(idle.Wait());
}

}  // namespace
}  // namespace kmt
