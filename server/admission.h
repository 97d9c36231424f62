// The server-wide budget on the bytes held by requests received and not yet
// answered. A Cluster batch is charged its size when it is read and credited
// when its response is ready; one that would pass the budget is refused at
// once with RESOURCE_EXHAUSTED and a retry pushback, rather than queued,
// so memory under overload stays near the budget and clients back off.
#ifndef KMT_SERVER_ADMISSION_H_
#define KMT_SERVER_ADMISSION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kmt {

class HeldRequests {
 public:
  // `published` (if set) is told the bytes held after every change, under
  // the lock that changes them, so that what it shows is never older than
  // what it showed before.
  using Published = std::function<void(int64_t held, int64_t budget)>;
  explicit HeldRequests(int64_t budget_bytes, Published published = nullptr);

  // Holds `bytes` for a request just read on a stream that holds
  // `stream_held` bytes already, or refuses it with RESOURCE_EXHAUSTED, a
  // message with the numbers, and a retry pushback (proto/batch_error.h):
  // the time the server's recent answers take to free what the request
  // lacks, or -1 (never) for a request larger than the whole budget.
  //
  // A stream that holds nothing may fill the whole budget; one that holds
  // bytes already, only the budget less kHeadroomShare of it. Without that
  // headroom, streams that keep many batches in flight keep the budget full,
  // and a client that sends one small batch at a time would be refused
  // about as often as they are, and wait out a pushback each time.
  absl::Status Admit(int64_t bytes, int64_t stream_held);
  // Gives back what Admit held, once the request is answered.
  void Release(int64_t bytes);

  int64_t budget() const { return budget_; }
  int64_t held() const;

 private:
  using Clock = std::chrono::steady_clock;

  const int64_t budget_;
  const Published published_;
  mutable std::mutex mu_;
  int64_t held_ = 0;
  // The rate at which answers free bytes, for the pushback: bytes released
  // since `window_start_`, folded into `release_rate_` (bytes per second, a
  // moving average) once the window is long enough to measure.
  int64_t released_ = 0;
  Clock::time_point window_start_ = Clock::now();
  double release_rate_ = 0;
  std::minstd_rand jitter_;
};

// The share of the budget kept for streams that hold nothing (Admit).
inline constexpr double kHeadroomShare = 0.125;

// The pushback of a refused request lies in [kMinPushback, kMaxPushback]:
// shorter would have clients resend before anything can have changed,
// longer leaves the server idle after a burst. Before any answer has given
// a rate, kFirstPushback.
inline constexpr std::chrono::milliseconds kMinPushback{10};
inline constexpr std::chrono::milliseconds kMaxPushback{5000};
inline constexpr std::chrono::milliseconds kFirstPushback{100};

// The share of the memory the process may use that requests held take at
// most when no budget is set. With the resident shards' share
// (kResidentMemoryShare, 0.6) it leaves 15% to what neither counts: gRPC's
// receive buffers (per stream, the message being read and 16 MiB of
// look-ahead), each running batch's copy of its points, the model
// registry and the allocator's slack.
inline constexpr double kHeldMemoryShare = 0.25;

// The budget a server uses: `max_held_bytes` if positive, else
// kHeldMemoryShare of `usable_bytes` (the memory the process may use,
// base/memory.h), but no more than what `resident_cap` leaves of it; when
// `usable_bytes` is unknown (0), unbounded. INVALID_ARGUMENT, naming the
// flags, when the two budgets together would pass `usable_bytes`.
absl::StatusOr<int64_t> HeldBudget(int64_t max_held_bytes, int64_t resident_cap,
                                   int64_t usable_bytes);

}  // namespace kmt

#endif  // KMT_SERVER_ADMISSION_H_
