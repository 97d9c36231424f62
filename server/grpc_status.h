// An engine status as a call's status, with the canonical code and the
// message capped as a batch error's (proto/batch_error.h), so a client reads
// a stream's error and a batch's alike; and a call's own state as a status.
#ifndef KMT_SERVER_GRPC_STATUS_H_
#define KMT_SERVER_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "proto/batch_error.h"

namespace kmt {

grpc::Status ToGrpcStatus(const absl::Status& status);

// Why the work of a call should stop, if it should: its deadline passed
// (DEADLINE_EXCEEDED) or it was cancelled (CANCELLED).
absl::Status CallStatus(const grpc::CallbackServerContext* context);

}  // namespace kmt

#endif  // KMT_SERVER_GRPC_STATUS_H_
