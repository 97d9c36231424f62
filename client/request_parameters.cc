#include "client/request_parameters.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kmt {

absl::StatusOr<std::map<std::string, double>> ParseParameters(absl::string_view text) {
  std::map<std::string, double> parameters;
  if (absl::StripAsciiWhitespace(text).empty()) return parameters;
  for (absl::string_view pair : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    const absl::string_view name = parts.size() == 2 ? absl::StripAsciiWhitespace(parts[0]) : "";
    double value = 0;
    if (name.empty() || !absl::SimpleAtod(absl::StripAsciiWhitespace(parts[1]), &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", pair, "' is not name=value with a number for the value"));
    }
    if (!parameters.emplace(std::string(name), value).second) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", name, " is given twice"));
    }
  }
  return parameters;
}

}  // namespace kmt
