// Bytes allocated on the heap by this process, counted by wrapping glibc's
// malloc family (malloc, calloc, realloc, free and the aligned forms; C++'s
// operator new and Eigen's matrices allocate through them). Linked only into
// the programs that measure memory, and left out of sanitizer builds, whose
// runtime wraps malloc itself. Each block counts its usable size
// (malloc_usable_size), a few bytes above the size asked for.
#ifndef KMT_BENCH_HEAP_COUNTER_H_
#define KMT_BENCH_HEAP_COUNTER_H_

#include <cstdint>

namespace kmt {

// Bytes allocated now.
int64_t HeapLiveBytes();

// The most bytes allocated at once since the last ResetHeapPeak() (or the
// start of the process).
int64_t HeapPeakBytes();

// Starts a new peak at the bytes allocated now.
void ResetHeapPeak();

}  // namespace kmt

#endif  // KMT_BENCH_HEAP_COUNTER_H_
