#include "server/admission.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/batch_error.h"
#include "server/resident_memory.h"

namespace kmt {
namespace {

static_assert(kResidentMemoryShare + kHeldMemoryShare <= 0.85,
              "the default budgets leave 15% of the process's memory to what neither counts");

// The rate of releases is measured over windows at least this long: shorter
// ones see a single answer as a burst.
constexpr std::chrono::milliseconds kRateWindow{200};

// "1.9 GiB": what a person reads in a refusal; the flags take bytes.
std::string Bytes(int64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " bytes");
  return absl::StrFormat("%.1f %s", value, units[unit]);
}

}  // namespace

HeldRequests::HeldRequests(int64_t budget_bytes, Published published)
    : budget_(budget_bytes), published_(std::move(published)) {
  if (published_) published_(0, budget_);
}

absl::Status HeldRequests::Admit(int64_t bytes, int64_t stream_held) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t headroom =
      stream_held > 0 ? static_cast<int64_t>(static_cast<double>(budget_) * kHeadroomShare) : 0;
  if (bytes <= budget_ - headroom - held_) {
    held_ += bytes;
    if (published_) published_(held_, budget_);
    return absl::OkStatus();
  }
  if (bytes > budget_) {
    return WithRetryPushback(
        absl::ResourceExhaustedError(absl::StrCat(
            "this batch of ", Bytes(bytes), " is larger than the whole budget of ", Bytes(budget_),
            " for requests not yet answered (--max_held_bytes); split it into smaller batches")),
        -1);
  }
  // What the request lacks, freed at the recent rate of answers; jittered
  // upwards so that clients refused together do not all come back at once.
  const double lacking = static_cast<double>(held_ + bytes - (budget_ - headroom));
  double ms = release_rate_ > 0 ? 1000 * lacking / release_rate_
                                : static_cast<double>(kFirstPushback.count());
  ms = std::clamp(ms * std::uniform_real_distribution<double>(1.0, 1.5)(jitter_),
                  static_cast<double>(kMinPushback.count()),
                  static_cast<double>(kMaxPushback.count()));
  const int64_t pushback = static_cast<int64_t>(ms);
  return WithRetryPushback(
      absl::ResourceExhaustedError(absl::StrCat(
          "the server holds ", Bytes(held_), " of requests not yet answered; this batch of ",
          Bytes(bytes), " would pass its budget of ", Bytes(budget_), " (--max_held_bytes)",
          headroom > 0 ? absl::StrCat(" less the ", Bytes(headroom),
                                      " kept for streams with no batch in flight")
                       : "",
          "; send it again in ", pushback, " ms")),
      pushback);
}

void HeldRequests::Release(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ -= bytes;
  if (published_) published_(held_, budget_);
  released_ += bytes;
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - window_start_).count();
  if (now - window_start_ < kRateWindow) return;
  const double rate = static_cast<double>(released_) / seconds;
  release_rate_ = release_rate_ > 0 ? (release_rate_ + rate) / 2 : rate;
  released_ = 0;
  window_start_ = now;
}

int64_t HeldRequests::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

absl::StatusOr<int64_t> HeldBudget(int64_t max_held_bytes, int64_t resident_cap,
                                   int64_t usable_bytes) {
  if (max_held_bytes > 0) {
    if (usable_bytes > 0 && max_held_bytes > usable_bytes - resident_cap) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max_held_bytes=", max_held_bytes, " and the resident jobs' cap of ",
                       resident_cap, " bytes (--max_resident_bytes) add up to more than the ",
                       usable_bytes, " bytes this process may use; lower either"));
    }
    return max_held_bytes;
  }
  if (usable_bytes <= 0) return std::numeric_limits<int64_t>::max();
  const int64_t share = static_cast<int64_t>(static_cast<double>(usable_bytes) * kHeldMemoryShare);
  const int64_t left = usable_bytes - resident_cap;
  if (left <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_resident_bytes=", resident_cap, " leaves nothing of the ", usable_bytes,
        " bytes this process may use to requests held; lower it or set --max_held_bytes"));
  }
  return std::min(share, left);
}

}  // namespace kmt
