#include "server/grpc_status.h"

#include <string>

namespace kmt {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxStatusMessageBytes) {
    message.resize(kMaxStatusMessageBytes - (sizeof(kTruncationMark) - 1));
    message += kTruncationMark;
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::move(message));
}

}  // namespace kmt
