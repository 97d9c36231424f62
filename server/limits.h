// Limits the server enforces, per batch and on resident jobs, and what
// resident jobs may take; every one is a flag, whose default is the value here.
#ifndef KMT_SERVER_LIMITS_H_
#define KMT_SERVER_LIMITS_H_

#include <cstdint>

namespace kmt {

struct Limits {
  int64_t max_points = 1000000;  ///< n per batch
  int max_d = 4096;              ///< dimensions
  /// Features of sparse points (points_csr), which cost their nonzeros
  /// rather than n d: scikit-learn's HashingVectorizer's default 2^20 and
  /// twice that. Their centers are dense (d x k), and a resident job's assign
  /// step carries them: a step of more than --max_message_bytes needs a
  /// larger one.
  int max_sparse_d = 1 << 21;
  /// clusters: FAISS's largest IVF coarse quantizers (2^16); k <= n bounds
  /// what a batch allocates by k, and the float32 centers of k = 65,536 at
  /// d = 128 are a 32 MiB response, within the clients' 64 MiB
  int max_k = 65536;
  int max_iterations = 1000;        ///< layers per batch
  int64_t max_dense_points = 4096;  ///< n for runs of the O(n^2) dense evaluator
  /// Bytes all resident jobs' shards may hold at once; 0 derives it from
  /// the memory the process may use (ResidentCap).
  int64_t max_resident_bytes = 0;
  /// Bytes the Cluster batches received and not yet answered may hold at
  /// once; a batch past it is refused with a retry pushback. 0 derives it
  /// from the memory the process may use, beside the resident cap
  /// (HeldBudget, server/admission.h).
  int64_t max_held_bytes = 0;
  /// Resident shards may take the points of a client on this machine from
  /// its memory (ShardChunk.points_shared) instead of the wire; false: they
  /// refuse them, and such clients send their points over the wire.
  bool shared_points = true;
};

}  // namespace kmt

#endif  // KMT_SERVER_LIMITS_H_
