#include "proto/batch_error.h"

#include <regex>

namespace kmt {

std::string CapStatusMessage(absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  std::string capped(message.substr(0, kMaxStatusMessageBytes - (sizeof(kTruncationMark) - 1)));
  capped += kTruncationMark;
  return capped;
}

v1::BatchError ToBatchError(const absl::Status& status) {
  v1::BatchError error;
  if (status.ok()) return error;
  error.set_code(static_cast<int>(status.code()));
  error.set_message(CapStatusMessage(status.message()));
  return error;
}

absl::Status FromBatchError(const v1::BatchError& error) {
  if (error.code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(error.code()), error.message());
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
