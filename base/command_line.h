// Command-line parsing shared by the programs: absl flags, with --help
// listing the flags this project defines rather than absl's default of the
// flags in a file named after the program.
#ifndef KMT_BASE_COMMAND_LINE_H_
#define KMT_BASE_COMMAND_LINE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kmt {

// True for a flag defined in a source file of this project (the programs'
// own flags), false for the flags of the libraries (absl's --flagfile...).
// `file` is as absl reports it: a path without its leading slashes.
bool IsProjectFlagFile(absl::string_view file);

// What a program adds to the parsing of its command line: settings of its
// own flags applied once they are parsed, and a line for --version (the
// engine's, core/engine_flags.h, in every program of this project).
struct ProgramSettings {
  /// Applies the settings; a status that is not OK ends the program with
  /// its message and status 2. Unset: nothing to apply.
  std::function<absl::Status()> apply;
  /// The line --version prints after the program's name and version, once
  /// `apply` has run (its error, if any, in place of the line). Unset: none.
  std::function<std::string()> describe;
};

// Sets `usage` as the program's usage message and parses argv. --help (and
// --helpshort) print the usage and the program's own flags with their
// defaults, --helpfull every flag linked in, --version the version and
// `settings`' line, on standard output; each then exits with status 0. An
// unknown flag ends the program with a message and status 1, and a setting
// `settings.apply` refuses with a message and status 2. Returns the
// arguments that are not flags, the program's name first.
std::vector<char*> ParseCommandLine(const char* usage, int argc, char** argv,
                                    const ProgramSettings& settings = {});

// Whether the command line ParseCommandLine parsed names the flag (as
// --name, --name=value, --name value or, for a boolean, --noname), whatever
// its value: for flags whose default depends on others.
bool FlagGiven(absl::string_view name);

}  // namespace kmt

#endif  // KMT_BASE_COMMAND_LINE_H_
