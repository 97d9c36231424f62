// A failed batch's or step's status on the wire, both ways: the server
// writes the BatchError of a response from a status, a client reads it back
// as one. Status messages either end sends (a batch's error, a stream's
// status) are capped in length here.
#ifndef KMT_PROTO_BATCH_ERROR_H_
#define KMT_PROTO_BATCH_ERROR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

// Messages longer than this are cut and end in kTruncationMark.
inline constexpr size_t kMaxStatusMessageBytes = 1024;
inline constexpr char kTruncationMark[] = " [truncated]";

// A refusal's retry pushback rides on its status as a payload under this
// type URL, so that it survives the trips to and from a BatchError.
inline constexpr char kRetryPushbackPayload[] = "type.kmt.dev/kmt.v1.BatchError.retry_pushback_ms";

// `status` with a retry pushback of `ms` milliseconds (BatchError's
// retry_pushback_ms: negative means never send again).
absl::Status WithRetryPushback(absl::Status status, int64_t ms);
// The pushback `status` carries, if any.
std::optional<int64_t> RetryPushbackMs(const absl::Status& status);

// `message` as UTF-8 (AsUtf8), cut before a character to
// kMaxStatusMessageBytes with kTruncationMark if longer.
std::string CapStatusMessage(absl::string_view message);

// The status's canonical code, its message, capped, and its retry pushback.
// OK gives an empty BatchError (code 0), which is what an unset error reads
// as.
v1::BatchError ToBatchError(const absl::Status& status);

// The status a response's error carries: OK when the error is unset, a code
// the contract does not define as UNKNOWN.
absl::Status FromBatchError(const v1::BatchError& error);

// A batch's or a shard's error names a point by its index there ("point 17
// has NaN in dimension 3"). A caller that knows where those points come from
// names it anew: the first "point i" of `message` replaced by `name(i)`.
// Empty where the message names no point.
std::string RenamePoint(absl::string_view message, const std::function<std::string(int64_t)>& name);

}  // namespace kmt

#endif  // KMT_PROTO_BATCH_ERROR_H_
