#include "io/svmlight.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kmt {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// The token at `*at` (up to the next space), and `*at` moved past it.
absl::string_view NextToken(absl::string_view line, size_t* at) {
  while (*at < line.size() && IsSpace(line[*at])) ++*at;
  const size_t start = *at;
  while (*at < line.size() && !IsSpace(line[*at])) ++*at;
  return line.substr(start, *at - start);
}

}  // namespace

bool IsSvmlight(const std::string& path, const std::string& format) {
  if (!format.empty()) return format == "svmlight";
  const std::string lower = absl::AsciiStrToLower(path);
  return absl::EndsWith(lower, ".svm") || absl::EndsWith(lower, ".svmlight") ||
         absl::EndsWith(lower, ".libsvm");
}

absl::StatusOr<SvmlightFile> ReadSvmlight(const std::string& path, int64_t d) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  SvmlightFile file;
  file.indptr.push_back(0);
  // Indices as written; shifted down at the end if none is 0.
  std::vector<int64_t> written;
  int64_t smallest = std::numeric_limits<int64_t>::max(), largest = -1;
  std::string text;
  int64_t line_number = 0;
  const auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", what));
  };
  while (std::getline(in, text)) {
    ++line_number;
    absl::string_view line = text;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    size_t at = 0;
    const absl::string_view target = NextToken(line, &at);
    if (target.empty()) continue;  // blank, or only a comment
    if (target.find(':') != absl::string_view::npos) {
      return error(absl::StrCat("the line starts with '", target,
                                "', not a target: every SVMlight line starts with its target "
                                "(read and ignored)"));
    }
    int64_t previous = -1;
    for (absl::string_view token = NextToken(line, &at); !token.empty();
         token = NextToken(line, &at)) {
      if (absl::StartsWith(token, "qid:") && previous < 0) continue;
      const size_t colon = token.find(':');
      if (colon == absl::string_view::npos || colon == 0 || colon + 1 == token.size()) {
        return error(absl::StrCat("'", token, "' is not index:value"));
      }
      int64_t index = 0;
      const char* index_end = token.data() + colon;
      auto [index_at, index_error] = std::from_chars(token.data(), index_end, index);
      if (index_error != std::errc() || index_at != index_end) {
        return error(absl::StrCat("'", token, "': the index is not an integer"));
      }
      if (index < 0 || index > std::numeric_limits<int32_t>::max() - 1) {
        return error(absl::StrCat("'", token, "': index ", index, " is outside [0, 2^31 - 2]"));
      }
      if (index <= previous) {
        return error(absl::StrCat(
            "'", token, "': index ", index,
            index == previous ? " repeats the one before it" : " is below the one before it",
            "; indices must increase along a line"));
      }
      float value = 0;
      const char* value_end = token.data() + token.size();
      // from_chars takes no '+', which C's strtof and Python's float() do.
      const char* value_start = token.data() + colon + 1;
      if (*value_start == '+' && value_start + 1 < value_end) ++value_start;
      auto [value_at, value_error] = std::from_chars(value_start, value_end, value);
      if (value_error != std::errc() || value_at != value_end || !std::isfinite(value)) {
        return error(absl::StrCat("'", token, "': the value is not a finite number"));
      }
      previous = index;
      smallest = std::min(smallest, index);
      largest = std::max(largest, index);
      written.push_back(index);
      file.values.push_back(value);
    }
    file.indptr.push_back(static_cast<int64_t>(written.size()));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("reading ", path, " failed"));
  file.rows = static_cast<int64_t>(file.indptr.size()) - 1;
  file.one_based = !written.empty() && smallest > 0;
  const int64_t shift = file.one_based ? 1 : 0;
  const int64_t needed = largest < 0 ? 0 : largest - shift + 1;
  if (d > 0 && needed > d) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": index ", largest, " (", file.one_based ? "one" : "zero", "-based) is feature ",
        largest - shift, ", outside the d = ", d, " features given"));
  }
  file.cols = d > 0 ? d : needed;
  file.indices.resize(written.size());
  std::transform(written.begin(), written.end(), file.indices.begin(),
                 [shift](int64_t i) { return static_cast<int32_t>(i - shift); });
  return file;
}

}  // namespace kmt
