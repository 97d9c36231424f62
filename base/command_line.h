// Command-line parsing shared by the programs: absl flags, with --help
// listing the flags this project defines rather than absl's default of the
// flags in a file named after the program.
#ifndef KMT_BASE_COMMAND_LINE_H_
#define KMT_BASE_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kmt {

// True for a flag defined in a source file of this project (the programs'
// own flags), false for the flags of the libraries (absl's --flagfile...).
// `file` is as absl reports it: a path without its leading slashes.
bool IsProjectFlagFile(absl::string_view file);

// Sets `usage` as the program's usage message and parses argv. --help (and
// --helpshort) print the usage and the program's own flags with their
// defaults, --helpfull every flag linked in, --version the version and the
// SIMD level, on standard output; each then exits with status 0. An unknown
// flag ends the program with a message and status 1. Every program takes
// --simd (or KMT_SIMD): the SIMD level of the engine's kernels
// (core/simd.h), applied here; a level the CPU or the binary lacks ends the
// program with status 2 and a message. Returns the arguments that are not
// flags, the program's name first.
std::vector<char*> ParseCommandLine(const char* usage, int argc, char** argv);

// Whether the command line ParseCommandLine parsed names the flag (as
// --name, --name=value, --name value or, for a boolean, --noname), whatever
// its value: for flags whose default depends on others.
bool FlagGiven(absl::string_view name);

}  // namespace kmt

#endif  // KMT_BASE_COMMAND_LINE_H_
