// The one conversion of an engine status to what travels to a client, for
// batch errors (inside a response) and stream errors (the call's status)
// alike: the same canonical code, the message capped in length; and a call's
// own state as a status.
#ifndef KMT_SERVER_GRPC_STATUS_H_
#define KMT_SERVER_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/status.h>

#include <cstddef>

#include "absl/status/status.h"

namespace kmt {

// Messages longer than this are cut and end in kTruncationMark.
inline constexpr size_t kMaxStatusMessageBytes = 1024;
inline constexpr char kTruncationMark[] = " [truncated]";

grpc::Status ToGrpcStatus(const absl::Status& status);

// Why the work of a call should stop, if it should: its deadline passed
// (DEADLINE_EXCEEDED) or it was cancelled (CANCELLED).
absl::Status CallStatus(const grpc::CallbackServerContext* context);

}  // namespace kmt

#endif  // KMT_SERVER_GRPC_STATUS_H_
