#include "base/allocator.h"

#include <malloc.h>

namespace kmt {

void KeepBatchMemory() {
  // Setting either value also turns off glibc's dynamic threshold, which
  // would otherwise move them again. 32 MiB is the largest mmap threshold
  // glibc accepts on 64-bit systems.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

}  // namespace kmt
