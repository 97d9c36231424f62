#include "core/parameters.h"

#include "absl/strings/str_cat.h"

namespace kmt {
namespace {

const ParameterSpec* Find(const std::vector<ParameterSpec>& specs, absl::string_view name) {
  for (const ParameterSpec& p : specs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<ParameterValues> ResolveParameters(absl::string_view model,
                                                  const std::vector<ParameterSpec>& specs,
                                                  const ParameterValues& given,
                                                  absl::string_view hint) {
  for (const auto& [name, value] : given) {
    const ParameterSpec* spec = Find(specs, name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " = ", value, ": model ", model, " has no parameter ", name,
                       hint.empty() ? "" : absl::StrCat(" (", hint, ")")));
    }
    const bool low = spec->min_exclusive ? !(value > spec->min) : !(value >= spec->min);
    const bool high = spec->max_exclusive ? !(value < spec->max) : !(value <= spec->max);
    if (low || high) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " = ", value, " is out of range for ", model, ": ", spec->min_exclusive ? "(" : "[",
          spec->min, ", ", spec->max, spec->max_exclusive ? ")" : "]"));
    }
  }
  ParameterValues resolved = given;
  for (const ParameterSpec& p : specs) resolved.emplace(p.name, p.default_value);
  return resolved;
}

}  // namespace kmt
