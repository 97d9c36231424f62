// The OpenMP threads of the calling thread's parallel regions, for a scope.
#ifndef KMT_CORE_OMP_THREADS_H_
#define KMT_CORE_OMP_THREADS_H_

#include <omp.h>

namespace kmt {

// Sets the calling thread's OpenMP threads to `threads` (at least 1) and
// puts back what it was at the end of the scope.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(threads < 1 ? 1 : threads);
  }
  ~ScopedOmpThreads() { omp_set_num_threads(saved_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  const int saved_;
};

}  // namespace kmt

#endif  // KMT_CORE_OMP_THREADS_H_
