#include "server/resident_memory.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kmt
