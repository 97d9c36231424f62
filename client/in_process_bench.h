// The core's own throughput on the batches kmt bench sends, measured in the
// client process. The service's throughput is judged against the core's on
// the same batches, in the same process run, with service and core rounds
// alternating so that a machine that speeds up or slows down during the run
// affects both alike: hence the engine runs here, in the client, and nowhere
// else in it.
#ifndef KMT_CLIENT_IN_PROCESS_BENCH_H_
#define KMT_CLIENT_IN_PROCESS_BENCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

struct Throughput {
  double batches_per_second = 0;     ///< wall-clock rate over all threads; default 0
  double cpu_seconds_per_batch = 0;  ///< process CPU time per batch; default 0
};

// Batches/s of the core alone on `count` of `batches` (reused round robin),
// with a thread per CPU this process may run on, each batch on one thread
// (as the server's workers run them). Exact models only (the constructions and variants); each
// batch runs as a server's worker runs it (proto/request.h, core/engine.h).
absl::StatusOr<Throughput> InProcessThroughput(const std::vector<v1::ClusterRequest>& batches,
                                               int64_t count);

// User plus kernel CPU seconds of this process so far.
double ProcessCpuSeconds();

}  // namespace kmt

#endif  // KMT_CLIENT_IN_PROCESS_BENCH_H_
