// The server-wide cap on the bytes resident jobs hold: a shard is admitted
// only if its bytes fit next to those already held, and gives them back when
// its stream ends.
#ifndef KMT_SERVER_RESIDENT_MEMORY_H_
#define KMT_SERVER_RESIDENT_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

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

// Maps the pages of a freshly allocated block (a shard's points) on a
// thread of its own, ahead of the chunks that fill it: the kernel maps
// them in one call (MADV_POPULATE_WRITE) instead of a fault for each 4 KiB
// page on the thread receiving the chunks, which paid about 0.3 s of a
// 0.6 s load of 614 MB. A page the chunks reach first is mapped by their
// own fault; the contents are never touched. Where the kernel lacks the
// call (before Linux 5.14), nothing is done. Joined on destruction, before
// the block may be freed.
class PagesInAdvance {
 public:
  // Blocks under kFrom bytes are left to their faults.
  static constexpr size_t kFrom = size_t{16} << 20;

  PagesInAdvance() = default;
  PagesInAdvance(void* block, size_t bytes);
  ~PagesInAdvance();
  PagesInAdvance(const PagesInAdvance&) = delete;
  PagesInAdvance& operator=(const PagesInAdvance&) = delete;

  // Waits for the mapping to end (at once if none runs); whether every page
  // was mapped by it.
  bool Wait();

 private:
  std::thread thread_;
  bool mapped_ = false;
};

}  // namespace kmt

#endif  // KMT_SERVER_RESIDENT_MEMORY_H_
