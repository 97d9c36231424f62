// An algorithm's parameters, one convention everywhere: each algorithm
// declares its table once (names, defaults, ranges, as scikit-learn's
// `_parameter_constraints`), and a request sets values by name. A name
// present is set to its value; a name absent takes the declared default.
// ListModels, the request's checks and the algorithms' updates all read the
// same table.
#ifndef KMT_CORE_PARAMETERS_H_
#define KMT_CORE_PARAMETERS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kmt {

struct ParameterSpec {
  std::string name;            ///< the key a request sets
  std::string description;     ///< what it does, for ListModels
  double default_value = 0;    ///< the value when a request leaves the name out
  double min = 0;              ///< lower end of the valid range
  double max = 0;              ///< upper end (may be infinity)
  bool min_exclusive = false;  ///< the range opens at min: (min, ...
  bool max_exclusive = false;  ///< the range opens at max: ..., max)
};

// Parameter values by name.
using ParameterValues = std::map<std::string, double, std::less<>>;

// `given` checked against the table of `model` (every name declared, every
// value a number within its range) and completed with the default of every
// declared name it leaves out. `hint`, if not empty, follows the error for a
// name the model does not read.
absl::StatusOr<ParameterValues> ResolveParameters(absl::string_view model,
                                                  const std::vector<ParameterSpec>& specs,
                                                  const ParameterValues& given,
                                                  absl::string_view hint = "");

}  // namespace kmt

#endif  // KMT_CORE_PARAMETERS_H_
