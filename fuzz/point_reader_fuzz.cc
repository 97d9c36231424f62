// Bytes -> a points file -> the point readers (io/), as CSV, as raw float32
// (d = 3) and as .npy, batch after batch to the end and once more after a
// rewind.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "io/point_reader.h"

namespace {

void ReadAll(const std::string& path, const std::string& format, int d) {
  absl::StatusOr<std::unique_ptr<kmt::PointReader>> reader =
      kmt::PointReader::Open(path, format, d);
  if (!reader.ok()) return;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<float> values;
    for (;;) {
      absl::StatusOr<int64_t> read = (*reader)->Read(7, &values);
      if (!read.ok() || *read == 0) break;
      if (values.size() % static_cast<size_t>((*reader)->d()) != 0) std::abort();
    }
    if (!(*reader)->Rewind().ok()) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/kmt-point-fuzz-" + std::to_string(getpid());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ReadAll(path, "csv", 0);
  ReadAll(path, "f32", 3);
  ReadAll(path, "npy", 0);
  return 0;
}
