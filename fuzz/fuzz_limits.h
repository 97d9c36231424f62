// The server's limits under fuzzing, one for every target that runs
// requests or shards: small, so that each input is fast. A sparse d is
// bound as small as a dense one's: a sparse shard's steps hold d x k dense
// centers and sums, which a large d would make slow, not wrong.
#ifndef KMT_FUZZ_FUZZ_LIMITS_H_
#define KMT_FUZZ_FUZZ_LIMITS_H_

#include "server/limits.h"

namespace kmt {

inline constexpr Limits kFuzzLimits{.max_points = 64,
                                    .max_d = 8,
                                    .max_sparse_d = 64,
                                    .max_k = 8,
                                    .max_iterations = 4,
                                    .max_dense_points = 32};

}  // namespace kmt

#endif  // KMT_FUZZ_FUZZ_LIMITS_H_
