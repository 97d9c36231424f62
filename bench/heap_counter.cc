// The wrappers call glibc's own entry points (__libc_malloc and the rest),
// which glibc exports for allocators that interpose malloc.
#include "bench/heap_counter.h"

#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void __libc_free(void* p);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);
}

namespace kmt {
namespace {

std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};

void Added(void* p) {
  if (p == nullptr) return;
  const int64_t now = live.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
  int64_t seen = peak.load();
  while (now > seen) {
    if (peak.compare_exchange_weak(seen, now)) break;
  }
}

void Removed(void* p) {
  if (p != nullptr) live.fetch_sub(malloc_usable_size(p));
}

}  // namespace

int64_t HeapLiveBytes() { return live.load(); }
int64_t HeapPeakBytes() { return peak.load(); }
void ResetHeapPeak() { peak.store(live.load()); }

}  // namespace kmt

extern "C" {

void* malloc(size_t size) noexcept {
  void* p = __libc_malloc(size);
  kmt::Added(p);
  return p;
}

void* calloc(size_t count, size_t size) noexcept {
  void* p = __libc_calloc(count, size);
  kmt::Added(p);
  return p;
}

void* realloc(void* old, size_t size) noexcept {
  const int64_t before = old == nullptr ? 0 : static_cast<int64_t>(malloc_usable_size(old));
  void* p = __libc_realloc(old, size);
  if (p == nullptr && size != 0) return p;  // the old block stays as it was
  kmt::live.fetch_sub(before);
  kmt::Added(p);
  return p;
}

void free(void* p) noexcept {
  kmt::Removed(p);
  __libc_free(p);
}

void* memalign(size_t alignment, size_t size) noexcept {
  void* p = __libc_memalign(alignment, size);
  kmt::Added(p);
  return p;
}

void* aligned_alloc(size_t alignment, size_t size) noexcept { return memalign(alignment, size); }

int posix_memalign(void** out, size_t alignment, size_t size) noexcept {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = memalign(alignment, size);
  if (p == nullptr && size != 0) return ENOMEM;
  *out = p;
  return 0;
}

void* valloc(size_t size) noexcept {
  void* p = __libc_valloc(size);
  kmt::Added(p);
  return p;
}

void* pvalloc(size_t size) noexcept {
  void* p = __libc_pvalloc(size);
  kmt::Added(p);
  return p;
}

}  // extern "C"
