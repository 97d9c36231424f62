// One-line log records on stderr: time, level, message.
#ifndef KMT_SERVER_LOG_H_
#define KMT_SERVER_LOG_H_

#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kmt {

inline void Log(absl::string_view level, absl::string_view message) {
  const std::string now =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::fprintf(stderr, "%s %.*s %.*s\n", now.c_str(), static_cast<int>(level.size()), level.data(),
               static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
}

}  // namespace kmt

#endif  // KMT_SERVER_LOG_H_
