#include "base/command_line.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"

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

namespace {

// The names the command line gave, each as written and, for --noname, also
// without the "no".
std::vector<std::string>& GivenNames() {
  static auto* names = new std::vector<std::string>;
  return *names;
}

}  // namespace

bool FlagGiven(absl::string_view name) {
  for (const std::string& given : GivenNames()) {
    if (given == name) return true;
  }
  return false;
}

std::vector<char*> ParseCommandLine(const char* usage, int argc, char** argv,
                                    const ProgramSettings& settings) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    arg = arg.substr(0, arg.find('='));
    GivenNames().emplace_back(arg);
    if (arg.substr(0, 2) == "no") GivenNames().emplace_back(arg.substr(2));
  }
  static std::string program;
  program = argc > 0 ? argv[0] : "kmt";
  program = program.substr(program.rfind('/') + 1);
  absl::SetProgramUsageMessage(usage);
  absl::SetFlagsUsageConfig({.contains_helpshort_flags = IsProjectFlagFile,
                             .contains_help_flags = IsProjectFlagFile,
                             .contains_helppackage_flags = IsProjectFlagFile,
                             .version_string = [settings] {
                               // --version is answered after the flags are parsed: the settings'
                               // line describes what this command line would run.
                               std::string version = absl::StrCat(program, " ", KMT_VERSION, "\n");
                               const absl::Status applied =
                                   settings.apply ? settings.apply() : absl::OkStatus();
                               if (!applied.ok()) {
                                 absl::StrAppend(&version, applied.message(), "\n");
                               } else if (settings.describe) {
                                 absl::StrAppend(&version, settings.describe(), "\n");
                               }
                               return version;
                             }});
  // absl's own handling of --help ends the program with status 1; a user
  // (and a script that checks a tool is there) expects 0 from a question
  // answered, so the usage flags are handled here. Unknown flags still end
  // the program with a message and status 1.
  std::vector<char*> args = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  if (absl::flags_internal::HandleUsageFlags(std::cout, usage) >= 0) {
    std::cout.flush();
    std::exit(0);
  }
  if (settings.apply) {
    if (const absl::Status status = settings.apply(); !status.ok()) {
      std::fprintf(stderr, "%s: %s\n", program.c_str(), std::string(status.message()).c_str());
      std::exit(2);
    }
  }
  return args;
}

}  // namespace kmt
