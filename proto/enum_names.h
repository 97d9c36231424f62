// The contract's enums and the engine's share their values' names: a value
// of the contract without the prefix all of its enum's values share, in
// lower case with '-' for '_' and '+' for "_PLUS" (a protobuf name cannot
// hold a '+'), is the engine's name for it: EMPTY_CLUSTERS_RELOCATE_FARTHEST
// is "relocate-farthest", INIT_PLAIN_KMEANS_PLUS_PLUS "plain-kmeans++". The
// translations between the two read the contract's names from the generated
// descriptors and the engine's from its name functions (EmptyClusterPolicyName
// and the like), so that no table here repeats either.
#ifndef KMT_PROTO_ENUM_NAMES_H_
#define KMT_PROTO_ENUM_NAMES_H_

#include <cassert>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/generated_enum_reflection.h"

namespace kmt {

// The engine's name of value `number` of `e`; "" for a number `e` does not
// define.
std::string EngineName(const google::protobuf::EnumDescriptor& e, int number);

// The value of `e` whose engine name is `name`; nullptr if none is.
const google::protobuf::EnumValueDescriptor* FindByEngineName(
    const google::protobuf::EnumDescriptor& e, absl::string_view name);

template <typename ProtoEnum>
std::string EngineName(int number) {
  return EngineName(*google::protobuf::GetEnumDescriptor<ProtoEnum>(), number);
}

// The contract's value for an engine's name the contract defines (the tests
// check every engine value of each translated enum has one).
template <typename ProtoEnum>
ProtoEnum ProtoValue(absl::string_view engine_name) {
  const google::protobuf::EnumValueDescriptor* value =
      FindByEngineName(*google::protobuf::GetEnumDescriptor<ProtoEnum>(), engine_name);
  assert(value != nullptr);
  return static_cast<ProtoEnum>(value == nullptr ? 0 : value->number());
}

}  // namespace kmt

#endif  // KMT_PROTO_ENUM_NAMES_H_
