#include "server/grpc_status.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace kmt {
namespace {

TEST(GrpcStatus, CodeAndMessageCarryOver) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  const grpc::Status s = ToGrpcStatus(absl::InvalidArgumentError("k = 0, must be at least 1"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "k = 0, must be at least 1");
  EXPECT_EQ(ToGrpcStatus(absl::DeadlineExceededError("late")).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

// Cut as a batch error's message is (proto/batch_error.h), so a client reads
// both alike.
TEST(GrpcStatus, LongMessagesAreCutAsBatchErrorsAre) {
  const std::string exact(kMaxStatusMessageBytes, 'x');
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError(exact)).error_message(), exact);
  const absl::Status longer = absl::NotFoundError(exact + "y");
  EXPECT_EQ(ToGrpcStatus(longer).error_message(), ToBatchError(longer).message());
  EXPECT_EQ(ToGrpcStatus(longer).error_message().size(), kMaxStatusMessageBytes);
}

using Clock = std::chrono::system_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The client cancels at its deadline, which reaches the server a little
// before the server's copy of it: up to 1% of the timeout plus 50 ms before
// is the deadline's doing.
TEST(Handled, GivesTheHandlersStatusAndAThrowAsInternalNamingIt) {
  EXPECT_EQ(Handled([] { return absl::NotFoundError("no model 'x'"); }),
            absl::NotFoundError("no model 'x'"));
  EXPECT_TRUE(Handled([] { return absl::OkStatus(); }).ok());
  const absl::Status thrown =
      Handled([]() -> absl::Status { throw std::runtime_error("directory vanished"); });
  EXPECT_EQ(thrown.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(thrown.message(), "the server failed: directory vanished");
  EXPECT_EQ(Handled([]() -> absl::Status { throw 7; }).code(), absl::StatusCode::kInternal);
}

TEST(DeadlineEnded, ACancellationJustBeforeTheDeadlineIsTheDeadlines) {
  const Clock::time_point arrived = Clock::now(), deadline = arrived + seconds(1);
  EXPECT_TRUE(DeadlineEnded(deadline, arrived, deadline + milliseconds(1)));
  EXPECT_TRUE(DeadlineEnded(deadline, arrived, deadline));
  EXPECT_TRUE(DeadlineEnded(deadline, arrived, deadline - milliseconds(13)));
  EXPECT_TRUE(DeadlineEnded(deadline, arrived, deadline - milliseconds(60)));
  EXPECT_FALSE(DeadlineEnded(deadline, arrived, deadline - milliseconds(61)));
  EXPECT_FALSE(DeadlineEnded(deadline, arrived, arrived + milliseconds(500)));
}

TEST(DeadlineEnded, TheSlackGrowsWithTheTimeout) {
  const Clock::time_point arrived = Clock::now(), deadline = arrived + seconds(100);
  EXPECT_TRUE(DeadlineEnded(deadline, arrived, deadline - milliseconds(1050)));
  EXPECT_FALSE(DeadlineEnded(deadline, arrived, deadline - milliseconds(1051)));
}

TEST(DeadlineEnded, WithoutADeadlineEveryCancellationIsTheClients) {
  const Clock::time_point arrived = Clock::now();
  EXPECT_FALSE(DeadlineEnded(Clock::time_point::max(), arrived, arrived + seconds(3600)));
}

}  // namespace
}  // namespace kmt
