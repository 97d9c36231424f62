// The server-wide cap on the bytes resident jobs hold: a shard is admitted
// only if its bytes fit next to those already held, and gives them back when
// its stream ends.
#ifndef KMT_SERVER_RESIDENT_MEMORY_H_
#define KMT_SERVER_RESIDENT_MEMORY_H_

#include <cstdint>
#include <mutex>

#include "absl/status/status.h"

namespace kmt {

class ResidentMemory {
 public:
  explicit ResidentMemory(int64_t cap_bytes) : cap_(cap_bytes) {}

  // Holds `bytes` more, or says with the numbers why they do not fit.
  absl::Status Reserve(int64_t bytes);
  void Release(int64_t bytes);

  int64_t cap() const { return cap_; }
  int64_t held() const;

 private:
  const int64_t cap_;
  mutable std::mutex mu_;
  int64_t held_ = 0;
};

// The share of the memory the process may use (its cgroup's limit or the
// machine's) that resident shards hold at most when no cap is set; the rest
// is left to batches, gRPC's buffers and the allocator's slack. A constant,
// not a setting: a server that needs another cap sets it in bytes
// (--max_resident_bytes).
inline constexpr double kResidentMemoryShare = 0.6;

// The cap a server uses: `max_resident_bytes` if positive, else
// kResidentMemoryShare of `usable_bytes`, the memory the process may use
// (base/memory.h).
int64_t ResidentCap(int64_t max_resident_bytes, int64_t usable_bytes);

}  // namespace kmt

#endif  // KMT_SERVER_RESIDENT_MEMORY_H_
