#include "server/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kmt {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Seconds since the Unix epoch at which the machine booted (/proc/stat's
// "btime" line): process start times in /proc are counted from there.
absl::StatusOr<double> BootTime() {
  absl::StatusOr<std::string> stat = ReadFile("/proc/stat");
  if (!stat.ok()) return stat.status();
  for (absl::string_view line : absl::StrSplit(*stat, '\n')) {
    double seconds;
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtod(line, &seconds)) return seconds;
  }
  return absl::UnavailableError("/proc/stat has no btime line");
}

absl::StatusOr<int64_t> OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return absl::UnavailableError("cannot list /proc/self/fd");
  int64_t entries = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++entries;
  }
  closedir(dir);
  return entries - 1;  // the descriptor that lists them
}

prometheus::MetricFamily One(const char* name, const char* help, prometheus::MetricType type,
                             double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return {name, help, type, {metric}};
}

}  // namespace

absl::StatusOr<ProcessStats> ReadProcessStats() {
  absl::StatusOr<std::string> stat = ReadFile("/proc/self/stat");
  if (!stat.ok()) return stat.status();
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // the fields are counted from the last ')'; the state is field 3.
  const size_t comm_end = stat->rfind(')');
  if (comm_end == std::string::npos) return absl::UnavailableError("unreadable /proc/self/stat");
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(*stat).substr(comm_end + 2), ' ', absl::SkipEmpty());
  // Field n of proc(5) is fields[n - 3].
  auto field = [&](int n, double* value) {
    return n - 3 < static_cast<int>(fields.size()) && absl::SimpleAtod(fields[n - 3], value);
  };
  double utime, stime, threads, start_ticks, vsize, rss;
  if (!field(14, &utime) || !field(15, &stime) || !field(20, &threads) ||
      !field(22, &start_ticks) || !field(23, &vsize) || !field(24, &rss)) {
    return absl::UnavailableError("unreadable /proc/self/stat");
  }
  absl::StatusOr<double> boot = BootTime();
  if (!boot.ok()) return boot.status();
  absl::StatusOr<int64_t> fds = OpenFds();
  if (!fds.ok()) return fds.status();
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);

  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return ProcessStats{.cpu_seconds = (utime + stime) / ticks,
                      .resident_bytes = rss * static_cast<double>(sysconf(_SC_PAGESIZE)),
                      .virtual_bytes = vsize,
                      .start_time_seconds = *boot + start_ticks / ticks,
                      .threads = static_cast<int64_t>(threads),
                      .open_fds = *fds,
                      .max_fds = static_cast<int64_t>(limit.rlim_cur)};
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  absl::StatusOr<ProcessStats> stats = ReadProcessStats();
  if (!stats.ok()) return {};
  using prometheus::MetricType;
  return {
      One("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
          MetricType::Counter, stats->cpu_seconds),
      One("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
          stats->resident_bytes),
      One("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
          stats->virtual_bytes),
      One("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
          MetricType::Gauge, stats->start_time_seconds),
      One("process_threads", "Number of OS threads in the process.", MetricType::Gauge,
          static_cast<double>(stats->threads)),
      One("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
          static_cast<double>(stats->open_fds)),
      One("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
          static_cast<double>(stats->max_fds)),
  };
}

}  // namespace kmt
