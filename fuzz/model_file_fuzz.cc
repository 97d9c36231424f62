// Bytes -> a model file in a model directory -> what the server does at
// start: read, convert, validate and describe every file, refusing the bad
// ones with a reason.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "server/model_registry.h"

namespace {

const std::string& Directory() {
  static const std::string* dir = [] {
    char name[] = "/tmp/kmt-model-fuzz-XXXXXX";
    if (mkdtemp(name) == nullptr) std::abort();
    return new std::string(name);
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream out(Directory() + "/model.kmt", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::vector<std::string> refused;
  const kmt::ModelRegistry registry = kmt::ModelRegistry::Load(Directory(), &refused);
  // The file is served or refused, never both, never neither.
  const size_t exact = kmt::ModelRegistry::Load("", &refused).models().size();
  if (registry.models().size() + refused.size() != exact + 1) std::abort();
  return 0;
}
