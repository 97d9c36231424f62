#include "server/resident_memory.h"

#include "absl/strings/str_cat.h"

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

}  // namespace kmt
