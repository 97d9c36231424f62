// How much memory this process may use.
#ifndef KMT_BASE_MEMORY_H_
#define KMT_BASE_MEMORY_H_

#include <cstdint>
#include <string>

namespace kmt {

// The least of the machine's physical memory (MemTotal) and the memory
// limit of this process's cgroup (v2 memory.max, v1
// memory.limit_in_bytes), looked up both under the cgroup's path in
// /proc/self/cgroup and at the root of the mount, as a container sees its
// own cgroup. `root` prefixes every path (tests point it at a fake tree);
// 0 if nothing could be read.
int64_t UsableMemoryBytes(const std::string& root = "");

}  // namespace kmt

#endif  // KMT_BASE_MEMORY_H_
