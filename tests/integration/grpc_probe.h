// Calls to the standard services a server exposes (grpc.health.v1,
// reflection) through the generic stub, with their few message bytes
// written out by hand: the test needs no generated code for them.
#ifndef KMT_TESTS_INTEGRATION_GRPC_PROBE_H_
#define KMT_TESTS_INTEGRATION_GRPC_PROBE_H_

#include <string>

#include "absl/status/statusor.h"

namespace kmt {

// grpc.health.v1.Health/Check for `service`: 1 SERVING, 2 NOT_SERVING, ...
absl::StatusOr<int> HealthStatus(const std::string& address, const std::string& service);

// The raw bytes of the reflection service's answer to list_services.
absl::StatusOr<std::string> ReflectionListServices(const std::string& address);

}  // namespace kmt

#endif  // KMT_TESTS_INTEGRATION_GRPC_PROBE_H_
