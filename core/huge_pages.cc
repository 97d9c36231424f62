#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>

namespace kmt {

void* AllocateHugePages(size_t bytes) {
  const size_t size = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (size < bytes) throw std::bad_alloc();
  void* block = std::aligned_alloc(kHugePageBytes, size);
  if (block == nullptr) throw std::bad_alloc();
  // Advice only: where it fails (no transparent huge pages), the block is
  // used in small pages.
  madvise(block, size, MADV_HUGEPAGE);
  return block;
}

void FreeHugePages(void* block) { std::free(block); }

}  // namespace kmt
