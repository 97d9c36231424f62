// Asking for a scattered point's cache lines ahead of its use: where a
// pass reads points in an order of its own (a bound pass's unsettled
// points, a mini-batch's sampled rows) the hardware's prefetcher does not
// follow, and each point is a miss the pass waits for.
#ifndef KMT_CORE_PREFETCH_H_
#define KMT_CORE_PREFETCH_H_

#include <algorithm>
#include <cstddef>

namespace kmt {

// How many points ahead a pass asks for a point's lines: enough misses in
// flight to hide their latency, few enough that the lines are still in the
// cache when the pass reaches them.
inline constexpr std::ptrdiff_t kReadAhead = 8;

// The cache lines a pass keeps asked for at once: about what a core's
// queue of misses holds; more and the prefetches themselves wait.
inline constexpr std::ptrdiff_t kReadAheadLines = 32;

// How many points of `values` values each a pass reading scattered points
// asks for ahead: kReadAhead for narrow points, fewer for wide ones, at
// least one.
template <typename Scalar>
constexpr std::ptrdiff_t ReadAheadPoints(std::ptrdiff_t values) {
  const std::ptrdiff_t lines = (values * static_cast<std::ptrdiff_t>(sizeof(Scalar)) + 63) / 64;
  return std::clamp<std::ptrdiff_t>(kReadAheadLines / std::max<std::ptrdiff_t>(lines, 1), 1,
                                    kReadAhead);
}

// Every cache line of `count` values from `values`.
template <typename Scalar>
void PrefetchValues(const Scalar* values, std::ptrdiff_t count) {
  const char* at = reinterpret_cast<const char*>(values);
  const char* end = at + count * static_cast<std::ptrdiff_t>(sizeof(Scalar));
  for (; at < end; at += 64) __builtin_prefetch(at);
}

}  // namespace kmt

#endif  // KMT_CORE_PREFETCH_H_
