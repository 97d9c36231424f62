#include "proto/init_method.h"

#include "absl/strings/str_cat.h"

namespace kmt {

v1::Init InitToProto(InitMethod method) {
  switch (method) {
    case InitMethod::kRandomSubset:
      return v1::INIT_RANDOM;
    case InitMethod::kKMeansPlusPlus:
      return v1::INIT_KMEANS_PLUS_PLUS;
    case InitMethod::kPlainKMeansPlusPlus:
      return v1::INIT_PLAIN_KMEANS_PLUS_PLUS;
  }
  return v1::INIT_KMEANS_PLUS_PLUS;  // Unreachable: the switch names every method.
}

absl::StatusOr<InitMethod> InitFromProto(int init) {
  switch (init) {
    case v1::INIT_RANDOM:
      return InitMethod::kRandomSubset;
    case v1::INIT_KMEANS_PLUS_PLUS:
      return InitMethod::kKMeansPlusPlus;
    case v1::INIT_PLAIN_KMEANS_PLUS_PLUS:
      return InitMethod::kPlainKMeansPlusPlus;
    case v1::INIT_GIVEN:
      return absl::InvalidArgumentError("INIT_GIVEN names no method: the centers are given");
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown init ", init));
  }
}

}  // namespace kmt
