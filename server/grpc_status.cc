#include "server/grpc_status.h"

#include <chrono>
#include <string>

namespace kmt {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      CapStatusMessage(status.message()));
}

absl::Status CallStatus(const grpc::CallbackServerContext* context) {
  if (!context->IsCancelled()) return absl::OkStatus();
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("the call's deadline passed");
  }
  return absl::CancelledError("the call was cancelled");
}

}  // namespace kmt
