// kmt: the command-line client.
//   kmt models                    list the served models
//   kmt cluster --input=FILE ...  cluster a CSV, .npy or float32 file
//   kmt bench ...                 load the server, report latency, throughput
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/allocator.h"
#include "client/commands.h"

namespace {

// True for a file in this one's folder. The subcommands' flags are defined
// next to this file, and absl's --help lists only those of kmt_main.cc.
bool NextToMain(absl::string_view file) {
  absl::string_view main_file = __FILE__;
  // absl reports flag files without their leading slashes.
  main_file.remove_prefix(main_file.find_first_not_of('/'));
  const size_t folder = main_file.rfind('/') + 1;
  return file.substr(0, folder) == main_file.substr(0, folder) &&
         file.find('/', folder) == absl::string_view::npos;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "kmt models | kmt cluster --input=FILE [flags] | kmt bench [flags]\n"
      "cluster modes: --mode=per-batch clusters every batch as its own task;\n"
      "--mode=whole clusters the whole file as one dataset with exact Lloyd's,\n"
      "its shards resident on every --server replica for the length of the job.");
  absl::SetFlagsUsageConfig({.contains_helpshort_flags = NextToMain,
                             .contains_help_flags = NextToMain,
                             .contains_helppackage_flags = NextToMain});
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
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
