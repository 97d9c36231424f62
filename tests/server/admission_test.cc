#include "server/admission.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "proto/batch_error.h"

namespace kmt {
namespace {

TEST(HeldRequests, AdmitsWhatFitsAndRefusesWithTheNumbersAndAPushback) {
  HeldRequests held(3 << 20);
  ASSERT_TRUE(held.Admit(2 << 20, 0).ok());
  const absl::Status refused = held.Admit(1536 << 10, 0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("the server holds 2.0 MiB of requests not yet answered; this "
                                   "batch of 1.5 MiB would pass its budget of 3.0 MiB "
                                   "(--max_held_bytes); send it again in "),
            std::string::npos)
      << refused.message();
  const std::optional<int64_t> pushback = RetryPushbackMs(refused);
  ASSERT_TRUE(pushback.has_value());
  EXPECT_GE(*pushback, kMinPushback.count());
  EXPECT_LE(*pushback, kMaxPushback.count());
  EXPECT_NE(refused.message().find(std::to_string(*pushback) + " ms"), std::string::npos);
  EXPECT_EQ(held.held(), 2 << 20);
  held.Release(1 << 20);
  EXPECT_TRUE(held.Admit(1536 << 10, 0).ok());
  EXPECT_EQ(held.held(), (1 << 20) + (1536 << 10));
}

TEST(HeldRequests, AStreamWithBatchesInFlightLeavesTheHeadroomToOthers) {
  HeldRequests held(8000);
  const int64_t headroom = static_cast<int64_t>(8000 * kHeadroomShare);
  ASSERT_TRUE(held.Admit(4000, 0).ok());
  ASSERT_TRUE(held.Admit(8000 - headroom - 4000, 4000).ok());
  const absl::Status refused = held.Admit(1, 8000 - headroom);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("less the 1000 bytes kept for streams with no batch in flight"),
            std::string::npos)
      << refused.message();
  EXPECT_GE(RetryPushbackMs(refused).value_or(-1), 0);
  // A stream with nothing in flight has the headroom.
  EXPECT_TRUE(held.Admit(headroom, 0).ok());
  EXPECT_EQ(held.held(), 8000);
}

TEST(HeldRequests, PublishesTheBytesHeldAfterEveryChange) {
  std::vector<std::pair<int64_t, int64_t>> published;
  HeldRequests held(1000,
                    [&](int64_t bytes, int64_t budget) { published.emplace_back(bytes, budget); });
  ASSERT_TRUE(held.Admit(600, 0).ok());
  ASSERT_FALSE(held.Admit(600, 0).ok());
  held.Release(600);
  EXPECT_EQ(published,
            (std::vector<std::pair<int64_t, int64_t>>{{0, 1000}, {600, 1000}, {0, 1000}}));
}

TEST(HeldRequests, ABatchLargerThanTheBudgetIsToldNeverToComeBack) {
  HeldRequests held(1000);
  const absl::Status refused = held.Admit(1001, 0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(RetryPushbackMs(refused), -1);
  EXPECT_NE(refused.message().find("this batch of 1001 bytes is larger than the whole budget of "
                                   "1000 bytes"),
            std::string::npos)
      << refused.message();
  EXPECT_EQ(held.held(), 0);
  EXPECT_TRUE(held.Admit(1000, 0).ok());
}

TEST(HeldBudget, IsTheFlagOrAShareOfUsableMemoryLeftBesideTheResidentCap) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  EXPECT_EQ(*HeldBudget(123, 0, 0), 123);
  EXPECT_EQ(*HeldBudget(2 * kGiB, 10 * kGiB, 24 * kGiB), 2 * kGiB);
  EXPECT_EQ(*HeldBudget(0, 6 * kGiB, 10 * kGiB),
            static_cast<int64_t>(10 * kGiB * kHeldMemoryShare));
  // An explicit resident cap leaves less than the share: the rest.
  EXPECT_EQ(*HeldBudget(0, 9 * kGiB, 10 * kGiB), 1 * kGiB);
  // Memory unknown: no bound, as before budgets.
  EXPECT_EQ(*HeldBudget(0, 0, 0), std::numeric_limits<int64_t>::max());
}

TEST(HeldBudget, RefusesBudgetsThatTogetherPassTheUsableMemory) {
  const absl::StatusOr<int64_t> both = HeldBudget(5000, 6000, 10000);
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(both.status().message(),
            "--max_held_bytes=5000 and the resident jobs' cap of 6000 bytes "
            "(--max_resident_bytes) add up to more than the 10000 bytes this process may use; "
            "lower either");
  const absl::StatusOr<int64_t> nothing_left = HeldBudget(0, 10000, 10000);
  EXPECT_EQ(nothing_left.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nothing_left.status().message().find("--max_resident_bytes=10000 leaves nothing"),
            std::string::npos);
}

}  // namespace
}  // namespace kmt
