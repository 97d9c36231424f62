// How many CPUs this process may use.
#ifndef KMT_BASE_CPUS_H_
#define KMT_BASE_CPUS_H_

namespace kmt {

// The CPUs in this process's affinity mask (taskset, a container's cpuset),
// at least 1. std::thread::hardware_concurrency() counts every CPU of the
// machine, so threads sized by it would outnumber the cores a pinned process
// may run on and take turns on them.
int UsableCpus();

}  // namespace kmt

#endif  // KMT_BASE_CPUS_H_
