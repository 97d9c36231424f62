#include "server/grpc_status.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "absl/strings/str_cat.h"

namespace kmt {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      CapStatusMessage(status.message()));
}

absl::Status Handled(absl::FunctionRef<absl::Status()> handler) {
  try {
    return handler();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("the server failed: ", e.what()));
  } catch (...) {
    return absl::InternalError("the server failed");
  }
}

bool DeadlineEnded(std::chrono::system_clock::time_point deadline,
                   std::chrono::system_clock::time_point arrived,
                   std::chrono::system_clock::time_point now) {
  using Duration = std::chrono::system_clock::duration;
  if (deadline == std::chrono::system_clock::time_point::max()) return false;
  const Duration timeout = std::max(deadline - arrived, Duration::zero());
  const Duration slack =
      kDeadlineSlack + std::chrono::duration_cast<Duration>(timeout * kDeadlineSlackFraction);
  return now >= deadline - slack;
}

absl::Status CallStatus(const grpc::CallbackServerContext* context,
                        std::chrono::system_clock::time_point arrived) {
  if (!context->IsCancelled()) return absl::OkStatus();
  if (DeadlineEnded(context->deadline(), arrived, std::chrono::system_clock::now())) {
    return absl::DeadlineExceededError("the call's deadline passed");
  }
  return absl::CancelledError("the call was cancelled");
}

}  // namespace kmt
