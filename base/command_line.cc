#include "base/command_line.h"

#include <algorithm>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"

namespace kmt {

bool IsProjectFlagFile(absl::string_view file) {
  // This file is <root>/base/command_line.cc; every flag defined under
  // <root> belongs to the project.
  absl::string_view root = __FILE__;
  root.remove_prefix(root.find_first_not_of('/'));
  root = root.substr(0, root.rfind("/base/") + 1);
  file.remove_prefix(std::min(file.find_first_not_of('/'), file.size()));
  return file.substr(0, root.size()) == root;
}

std::vector<char*> ParseCommandLine(const char* usage, int argc, char** argv) {
  absl::SetProgramUsageMessage(usage);
  absl::SetFlagsUsageConfig({.contains_helpshort_flags = IsProjectFlagFile,
                             .contains_help_flags = IsProjectFlagFile,
                             .contains_helppackage_flags = IsProjectFlagFile});
  return absl::ParseCommandLine(argc, argv);
}

}  // namespace kmt
