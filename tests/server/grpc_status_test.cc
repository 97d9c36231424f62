#include "server/grpc_status.h"

#include <gtest/gtest.h>

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

TEST(GrpcStatus, LongMessagesAreCutAndSaySo) {
  const std::string exact(kMaxStatusMessageBytes, 'x');
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError(exact)).error_message(), exact);
  const grpc::Status cut = ToGrpcStatus(absl::NotFoundError(exact + "y"));
  EXPECT_EQ(cut.error_message().size(), kMaxStatusMessageBytes);
  EXPECT_EQ(cut.error_message(),
            std::string(kMaxStatusMessageBytes - std::string(kTruncationMark).size(), 'x') +
                kTruncationMark);
}

}  // namespace
}  // namespace kmt
