// Memory for the per-point state a long run keeps (the bounds of
// core/bounds.h): blocks of several MiB are aligned to 2 MiB and advised to
// the kernel as transparent huge pages, so that touching them the first
// time faults in a few 2 MiB pages instead of thousands of 4 KiB ones. On a
// virtual machine each fault is dear: turning 10^6 points' bounds into six
// groups' took 119 ms with small pages and 65 ms with huge ones
// (docs/notes/2026-12-tight-switch.md). Where the kernel's transparent huge
// pages are off, the advice does nothing.
#ifndef KMT_CORE_HUGE_PAGES_H_
#define KMT_CORE_HUGE_PAGES_H_

#include <cstddef>
#include <limits>
#include <new>
#include <vector>

namespace kmt {

// Blocks from this size on are taken as huge pages; smaller ones from
// operator new.
inline constexpr size_t kHugePagesFrom = size_t{4} << 20;
// The huge page size the blocks are aligned to and rounded up to.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` (at least kHugePagesFrom) aligned to kHugePageBytes and advised as
// huge pages; throws std::bad_alloc where there is no memory.
void* AllocateHugePages(size_t bytes);
void FreeHugePages(void* block);

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: as std::allocator

  T* allocate(size_t n) {
    if (n > std::numeric_limits<size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    return static_cast<T*>(bytes >= kHugePagesFrom ? AllocateHugePages(bytes)
                                                   : ::operator new(bytes));
  }
  void deallocate(T* block, size_t n) {
    if (n * sizeof(T) >= kHugePagesFrom) {
      FreeHugePages(block);
    } else {
      ::operator delete(block);
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const {
    return false;
  }
};

template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace kmt

#endif  // KMT_CORE_HUGE_PAGES_H_
