// The kmt subcommands, one file each; kmt_main.cc parses the flags and runs
// the one named on the command line.
#ifndef KMT_CLIENT_COMMANDS_H_
#define KMT_CLIENT_COMMANDS_H_

#include "absl/status/status.h"

namespace kmt {

// kmt models: list the served models on stdout.
absl::Status RunModels();

// kmt cluster: cluster the --input file, batch by batch (--mode=per-batch)
// or as one dataset (--mode=whole).
absl::Status RunCluster();

// kmt bench: load the server with synthetic batches, report latency and
// throughput (and, with --in_process, the core's throughput on them).
absl::Status RunBench();

}  // namespace kmt

#endif  // KMT_CLIENT_COMMANDS_H_
