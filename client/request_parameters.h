// An algorithm's parameters as a command line writes them: "beta=2,tau=0.5",
// the names ClusterRequest.parameters takes (kmt models lists each model's).
#ifndef KMT_CLIENT_REQUEST_PARAMETERS_H_
#define KMT_CLIENT_REQUEST_PARAMETERS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kmt {

// name=value pairs separated by commas; values are numbers ("inf" too). The
// empty string is no parameter. A malformed pair or a name given twice is
// INVALID_ARGUMENT naming it; whether the model reads the name, and its
// range, are the server's to check.
absl::StatusOr<std::map<std::string, double>> ParseParameters(absl::string_view text);

}  // namespace kmt

#endif  // KMT_CLIENT_REQUEST_PARAMETERS_H_
