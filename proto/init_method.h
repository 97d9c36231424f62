// The one translation between the wire's Init and the core's InitMethod.
#ifndef KMT_PROTO_INIT_METHOD_H_
#define KMT_PROTO_INIT_METHOD_H_

#include "absl/status/statusor.h"
#include "core/init.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

v1::Init InitToProto(InitMethod method);

// INIT_GIVEN is not a method (the centers come with the request) and is
// refused here, as is a value the contract does not define.
absl::StatusOr<InitMethod> InitFromProto(int init);

}  // namespace kmt

#endif  // KMT_PROTO_INIT_METHOD_H_
