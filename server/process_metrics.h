// Process metrics under the names Prometheus's own client libraries use
// (process_cpu_seconds_total, process_resident_memory_bytes, ...), read from
// /proc at each scrape, so that the standard dashboards and alerts apply.
#ifndef KMT_SERVER_PROCESS_METRICS_H_
#define KMT_SERVER_PROCESS_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kmt {

// What /proc says about this process now.
struct ProcessStats {
  double cpu_seconds = 0;         ///< user + system CPU time
  double resident_bytes = 0;      ///< resident set size
  double virtual_bytes = 0;       ///< virtual memory size
  double start_time_seconds = 0;  ///< start, in seconds since the Unix epoch
  int64_t threads = 0;            ///< threads of the process
  int64_t open_fds = 0;           ///< open file descriptors
  int64_t max_fds = 0;            ///< soft limit on open file descriptors
};

// Reads /proc/self/stat, /proc/stat (boot time) and /proc/self/fd.
absl::StatusOr<ProcessStats> ReadProcessStats();

// Serves ReadProcessStats() as Prometheus metrics; nothing if /proc cannot
// be read (the other metrics are still served).
class ProcessCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace kmt

#endif  // KMT_SERVER_PROCESS_METRICS_H_
