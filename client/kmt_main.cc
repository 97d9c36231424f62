// kmt: the command-line client.
//   kmt models                    list the served models
//   kmt cluster --input=FILE ...  cluster a CSV, .npy or float32 file
//   kmt bench ...                 load the server, report latency, throughput
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/allocator.h"
#include "base/command_line.h"
#include "client/commands.h"
#include "core/engine_flags.h"

int main(int argc, char** argv) {
  std::vector<char*> args = kmt::ParseCommandLine(
      "kmt models | kmt cluster --input=FILE [flags] | kmt bench [flags]\n"
      "cluster modes: --mode=per-batch clusters every batch as its own task;\n"
      "--mode=whole clusters the whole file as one dataset with exact Lloyd's,\n"
      "its shards resident on every --server replica for the length of the job.",
      argc, argv, kmt::EngineFlags());
  kmt::KeepBatchMemory();
  const std::string command = args.size() > 1 ? args[1] : "";
  absl::Status status;
  if (command == "models") {
    status = kmt::RunModels();
  } else if (command == "cluster") {
    status = kmt::RunCluster();
  } else if (command == "bench") {
    status = kmt::RunBench();
  } else {
    std::fprintf(stderr, "usage: kmt models | cluster | bench (--help for flags)\n");
    return 2;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "kmt: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
