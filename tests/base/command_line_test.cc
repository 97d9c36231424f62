#include "base/command_line.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

TEST(IsProjectFlagFile, TakesTheSourceTreeAndNotTheLibraries) {
  const std::string root = KMT_SOURCE_DIR;
  EXPECT_TRUE(IsProjectFlagFile(root + "/server/main.cc"));
  EXPECT_TRUE(IsProjectFlagFile(std::string(absl::StripPrefix(root, "/")) + "/tools/x.cc"));
  EXPECT_FALSE(IsProjectFlagFile("build/abseil-cpp/absl/flags/parse.cc"));
  EXPECT_FALSE(IsProjectFlagFile(root + "-other/server/main.cc"));
}

// A flag as absl's help text lists it: the file it is listed under ("Flags
// from FILE:") and its entry, "--name (help); default: value;".
struct Listed {
  std::string file;
  std::string entry;
};

std::map<std::string, Listed> ListedFlags(const std::string& help) {
  std::map<std::string, Listed> flags;
  std::string file, name;
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    // Entries start 4 spaces in, their continuation lines 6.
    const bool starts_entry = absl::StartsWith(line, "    --");
    line = absl::StripLeadingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "Flags from ")) {
      file = std::string(absl::StripSuffix(line, ":"));
      name.clear();
    } else if (file.empty() || line.empty()) {
      name.clear();  // the usage message, or the text after the flags
    } else if (starts_entry) {
      name = std::string(line.substr(2, line.find(' ') - 2));
      flags[name] = {file, std::string(line)};
    } else if (!name.empty()) {
      absl::StrAppend(&flags[name].entry, " ", line);
    }
  }
  return flags;
}

// --help lists every flag the program defines, with its default, and none
// of the libraries' flags: what --helpfull lists from the project's files.
TEST(ParseCommandLine, HelpListsEachProgramsOwnFlagsWithDefaults) {
  for (const std::string program :
       {KMT_SERVER_BINARY, KMT_CLI_BINARY, KMT_TRAIN_BINARY, KMT_EVAL_BINARY, KMT_DEMO_BINARY}) {
    SCOPED_TRACE(program);
    std::string full, help;
    RunProgram({program, "--helpfull"}, &full, nullptr);
    RunProgram({program, "--help"}, &help, nullptr);
    std::set<std::string> own, library;
    for (const auto& [name, listed] : ListedFlags(full)) {
      (IsProjectFlagFile(listed.file) ? own : library).insert(name);
    }
    ASSERT_FALSE(own.empty()) << full;
    ASSERT_TRUE(library.count("flagfile")) << full;
    std::set<std::string> shown;
    for (const auto& [name, listed] : ListedFlags(help)) {
      shown.insert(name);
      EXPECT_TRUE(absl::StrContains(listed.entry, "; default: ")) << listed.entry;
    }
    EXPECT_EQ(shown, own) << help;
  }
}

// A question answered is a success: --help, --helpfull and --version print
// on standard output and exit 0, also after a command (`kmt cluster
// --help`); a flag the program does not know is still an error.
TEST(ParseCommandLine, HelpAndVersionExitZeroOnStandardOutput) {
  const std::vector<std::vector<std::string>> asked = {
      {KMT_SERVER_BINARY, "--help"},  {KMT_SERVER_BINARY, "--version"},
      {KMT_CLI_BINARY, "--help"},     {KMT_CLI_BINARY, "cluster", "--help"},
      {KMT_CLI_BINARY, "--helpfull"}, {KMT_TRAIN_BINARY, "--help"},
      {KMT_EVAL_BINARY, "--help"},    {KMT_DEMO_BINARY, "--help"}};
  for (const std::vector<std::string>& argv : asked) {
    SCOPED_TRACE(absl::StrJoin(argv, " "));
    std::string out, err;
    EXPECT_EQ(RunProgram(argv, &out, &err), 0) << err;
    EXPECT_FALSE(out.empty());
  }
  for (const std::string program : {KMT_SERVER_BINARY, KMT_CLI_BINARY}) {
    SCOPED_TRACE(program);
    std::string out, err;
    EXPECT_NE(RunProgram({program, "--no_such_flag=1"}, &out, &err), 0);
    EXPECT_TRUE(absl::StrContains(err, "no_such_flag")) << err;
  }
}

// --low_precision turns the assignment's filter off, leaves it to the CPU
// or names one the CPU has (--version names the filter in use); another
// value ends the program with status 2 and says what it takes.
TEST(ParseCommandLine, LowPrecisionIsAutoOffOrAFilterOfTheCpus) {
  std::string out, err;
  ASSERT_EQ(RunProgram({KMT_SERVER_BINARY, "--low_precision=off", "--version"}, &out, &err), 0)
      << err;
  EXPECT_TRUE(absl::StrContains(out, "filter none")) << out;
  EXPECT_EQ(RunProgram({KMT_CLI_BINARY, "--low_precision=bf16", "models"}, &out, &err), 2);
  EXPECT_TRUE(absl::StrContains(err, "low-precision filter \"bf16\": this CPU takes auto, off"))
      << err;
}

}  // namespace
}  // namespace kmt
