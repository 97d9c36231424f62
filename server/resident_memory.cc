#include "server/resident_memory.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14's, where the C library lacks the name
#endif

namespace kmt {

absl::Status ResidentMemory::Reserve(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > cap_ - held_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a shard of ", bytes, " bytes does not fit: this server holds ", held_, " of its ", cap_,
        " resident bytes (--max_resident_bytes); split the data over more replicas or streams, "
        "or use the pass-per-iteration form"));
  }
  held_ += bytes;
  return absl::OkStatus();
}

void ResidentMemory::Release(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ -= bytes;
}

int64_t ResidentMemory::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

int64_t ResidentCap(int64_t max_resident_bytes, int64_t usable_bytes) {
  if (max_resident_bytes > 0) return max_resident_bytes;
  return static_cast<int64_t>(static_cast<double>(usable_bytes) * kResidentMemoryShare);
}

PagesInAdvance::PagesInAdvance(void* block, size_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(block) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(block) + bytes) / page * page;
  if (bytes < kFrom || end <= first) return;
  thread_ = std::thread([this, first, end] {
    pthread_setname_np(pthread_self(), "kmt-pages");  // as top -H shows it
    // In pieces from the start, the order the chunks fill the block in.
    constexpr uintptr_t kPiece = uintptr_t{32} << 20;
    bool mapped = true;
    for (uintptr_t at = first; at < end && mapped; at += kPiece) {
      mapped = madvise(reinterpret_cast<void*>(at), std::min(kPiece, end - at),
                       MADV_POPULATE_WRITE) == 0;
    }
    mapped_ = mapped;
  });
}

PagesInAdvance::~PagesInAdvance() { Wait(); }

bool PagesInAdvance::Wait() {
  if (thread_.joinable()) thread_.join();
  return mapped_;
}

}  // namespace kmt
