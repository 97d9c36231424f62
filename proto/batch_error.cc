#include "proto/batch_error.h"

#include <regex>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "proto/utf8.h"

namespace kmt {

std::string CapStatusMessage(absl::string_view message) {
  // Cut whole characters of UTF-8 (AsUtf8 may lengthen the message): a
  // string field that is not UTF-8 would make the client drop the response.
  const std::string text = AsUtf8(message);
  if (text.size() <= kMaxStatusMessageBytes) return text;
  std::string capped(Utf8Prefix(text, kMaxStatusMessageBytes - (sizeof(kTruncationMark) - 1)));
  capped += kTruncationMark;
  return capped;
}

v1::BatchError ToBatchError(const absl::Status& status) {
  v1::BatchError error;
  if (status.ok()) return error;
  error.set_code(static_cast<int>(status.code()));
  error.set_message(CapStatusMessage(status.message()));
  if (const std::optional<int64_t> ms = RetryPushbackMs(status)) error.set_retry_pushback_ms(*ms);
  return error;
}

absl::Status FromBatchError(const v1::BatchError& error) {
  if (error.code() == 0) return absl::OkStatus();
  absl::Status status(static_cast<absl::StatusCode>(error.code()), error.message());
  if (error.has_retry_pushback_ms()) {
    return WithRetryPushback(std::move(status), error.retry_pushback_ms());
  }
  return status;
}

absl::Status WithRetryPushback(absl::Status status, int64_t ms) {
  status.SetPayload(kRetryPushbackPayload, absl::Cord(std::to_string(ms)));
  return status;
}

std::optional<int64_t> RetryPushbackMs(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryPushbackPayload);
  int64_t ms;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &ms)) return std::nullopt;
  return ms;
}

std::string RenamePoint(absl::string_view message,
                        const std::function<std::string(int64_t)>& name) {
  static const std::regex point("point ([0-9]+)");
  const std::string text(message);
  std::smatch m;
  if (!std::regex_search(text, m, point)) return "";
  return m.prefix().str() + name(std::stoll(m[1].str())) + m.suffix().str();
}

}  // namespace kmt
