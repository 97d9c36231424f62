// An engine status as a call's status, with the canonical code and the
// message capped as a batch error's (proto/batch_error.h), so a client reads
// a stream's error and a batch's alike; and a call's own state as a status.
#ifndef KMT_SERVER_GRPC_STATUS_H_
#define KMT_SERVER_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/status.h>

#include <chrono>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "proto/batch_error.h"

namespace kmt {

grpc::Status ToGrpcStatus(const absl::Status& status);

// What `handler` returns, or INTERNAL naming what it threw. gRPC answers a
// callback handler that throws UNIMPLEMENTED with no message, which tells
// the client the server lacks a method it has; a unary handler's work runs
// through this instead.
absl::Status Handled(absl::FunctionRef<absl::Status()> handler);

// Why the work of a call that arrived at `arrived` should stop, if it
// should: its client's deadline passed (DEADLINE_EXCEEDED) or it was
// cancelled (CANCELLED). The client gives up at its deadline and cancels the
// call, and the cancellation reaches the server a little before the
// server's copy of the deadline: gRPC sends the deadline as a timeout,
// rounded up (by at most 1% of it, or 1 ms), which the server counts from
// when the call arrived, and both ends read clocks cached for a few
// milliseconds. So a cancellation that comes within kDeadlineSlack plus
// kDeadlineSlackFraction of the call's timeout before the deadline is the
// deadline's (DeadlineEnded).
absl::Status CallStatus(const grpc::CallbackServerContext* context,
                        std::chrono::system_clock::time_point arrived);

inline constexpr std::chrono::milliseconds kDeadlineSlack{50};
inline constexpr double kDeadlineSlackFraction = 0.01;

// Whether a call with this deadline (time_point::max() for none), which
// arrived at `arrived` and is found cancelled at `now`, was ended by its
// deadline.
bool DeadlineEnded(std::chrono::system_clock::time_point deadline,
                   std::chrono::system_clock::time_point arrived,
                   std::chrono::system_clock::time_point now);

}  // namespace kmt

#endif  // KMT_SERVER_GRPC_STATUS_H_
