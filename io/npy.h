// NumPy's .npy format (version 1.0-3.0), as far as point files need it: the
// header of a float16, float32 or float64 array in C order, checked field by
// field, and writing an array of float32 or int32 values.
#ifndef KMT_IO_NPY_H_
#define KMT_IO_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kmt {

struct NpyHeader {
  int item_bytes = 4;  ///< 2 for float16 ('<f2'), 4 for float32 ('<f4'), 8 for float64 ('<f8')
  std::vector<int64_t> shape;  ///< (n, d) or (n,)
  int64_t data_offset = 0;     ///< where the values start in the file
};

// The header at the start of `bytes` (the file's first bytes, at least the
// whole header). Only little-endian float16, float32 or float64 in C order
// with a shape of one or two dimensions is accepted; anything else is an
// INVALID_ARGUMENT naming what was found.
absl::StatusOr<NpyHeader> ParseNpyHeader(const std::string& bytes);

// Writes a version 1.0 .npy file of `descr` ("<f4" or "<i4") values.
absl::Status WriteNpy(const std::string& path, const std::string& descr,
                      const std::vector<int64_t>& shape, const void* data, int64_t bytes);

}  // namespace kmt

#endif  // KMT_IO_NPY_H_
