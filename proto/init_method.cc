#include "proto/init_method.h"

#include "absl/strings/str_cat.h"
#include "proto/enum_names.h"

namespace kmt {

v1::Init InitToProto(InitMethod method) { return ProtoValue<v1::Init>(InitMethodName(method)); }

absl::StatusOr<InitMethod> InitFromProto(int init) {
  if (init == v1::INIT_GIVEN) {
    return absl::InvalidArgumentError("INIT_GIVEN names no method: the centers are given");
  }
  absl::StatusOr<InitMethod> method = ParseInitMethod(EngineName<v1::Init>(init));
  if (!method.ok()) return absl::InvalidArgumentError(absl::StrCat("unknown init ", init));
  return method;
}

}  // namespace kmt
