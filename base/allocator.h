// Process-wide allocator settings for serving large batches.
#ifndef KMT_BASE_ALLOCATOR_H_
#define KMT_BASE_ALLOCATOR_H_

namespace kmt {

// A batch of n = 4096, d = 32 is 512 KiB, and every one is received,
// parsed, copied into a matrix and freed again. glibc's defaults hand such
// blocks back to the kernel (mmap for blocks above its threshold, trimming of
// the heap top above twice that), so each batch faulted in about 100 fresh
// zeroed pages: a fifth of the server's time per batch went to the kernel.
// This keeps blocks up to 32 MiB on the heap and returns a heap's free top
// only above 64 MiB. Call once at the start of main(), before threads start.
void KeepBatchMemory();

}  // namespace kmt

#endif  // KMT_BASE_ALLOCATOR_H_
