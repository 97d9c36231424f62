#include "base/memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace kmt {
namespace {

// A limit file's number; "max" (v2) or an unreadable file is no limit.
int64_t ReadLimit(const std::string& path) {
  std::ifstream in(path);
  long long value = 0;
  if (!(in >> value) || value <= 0) return 0;
  return static_cast<int64_t>(value);
}

int64_t MemTotal(const std::string& path) {
  std::ifstream in(path);
  std::string key;
  long long kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return static_cast<int64_t>(kib) * 1024;
  }
  return 0;
}

}  // namespace

int64_t UsableMemoryBytes(const std::string& root) {
  std::vector<int64_t> limits = {MemTotal(root + "/proc/meminfo")};
  std::ifstream cgroups(root + "/proc/self/cgroup");
  // Lines are "id:controllers:path": "0::/path" for v2, "4:memory:/path" for v1.
  for (std::string line; std::getline(cgroups, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    std::vector<std::string> files;
    if (controllers.empty()) {
      files = {"/sys/fs/cgroup" + path + "/memory.max", "/sys/fs/cgroup/memory.max"};
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      files = {"/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes",
               "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    }
    for (const std::string& file : files) limits.push_back(ReadLimit(root + file));
  }
  int64_t usable = 0;
  for (int64_t limit : limits) {
    if (limit > 0) usable = usable == 0 ? limit : std::min(usable, limit);
  }
  return usable;
}

}  // namespace kmt
