// Reads points from a CSV file (one point per line, values separated by
// commas, semicolons or whitespace, LF or CRLF line endings, an optional
// header line), a raw little-endian float32, binary16 or bfloat16 file (n*d
// values, row-major) or a NumPy .npy file (float16, float32 or float64, C
// order, shape (n, d)), a batch at a time, and can start over for another
// pass. Values are read as float32: binary16 and bfloat16 ones widen to it
// exactly (core/narrow_float.h), float64 ones are rounded. Binary files can
// also be read at any point, from several threads at once.
#ifndef KMT_IO_POINT_READER_H_
#define KMT_IO_POINT_READER_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kmt {

class PointReader {
 public:
  // format: "csv", "f32", "f16", "bf16" or "npy"; "" picks by the name's
  // extension, any case (.csv, .txt, .tsv: CSV; .npy; .f32, .bin, .raw:
  // float32; .f16: binary16; .bf16: bfloat16), else by the first bytes
  // (NumPy's magic, text as CSV, other bytes float32 where d is given) and
  // refuses a file it cannot tell, naming --format. d is required for the
  // raw formats and, if given, checked for CSV and .npy.
  static absl::StatusOr<std::unique_ptr<PointReader>> Open(const std::string& path,
                                                           const std::string& format, int d);
  ~PointReader();

  int d() const { return d_; }
  // Points in a binary file; -1 for CSV (known only once read).
  int64_t n() const { return n_; }
  // Dimensions of the file's array: 1 for a .npy of shape (n,), which is
  // read as d = 1; 2 otherwise.
  int rank() const { return rank_; }
  // Appends up to max_points points to `values` (row-major); returns how
  // many, 0 at the end of the file.
  absl::StatusOr<int64_t> Read(int64_t max_points, std::vector<float>* values);
  // Appends points [first, first + count) of a binary file to `values`;
  // safe to call from several threads at once.
  absl::Status ReadAt(int64_t first, int64_t count, std::vector<float>* values) const;
  // The same into `out` (count * d values).
  absl::Status ReadAt(int64_t first, int64_t count, float* out) const;
  // Back to the first point.
  absl::Status Rewind();
  // Fraction of the file consumed, for progress reports.
  double progress();

 private:
  enum class Format { kCsv, kFloat32, kFloat16, kBFloat16, kNpy };
  PointReader(std::string path, Format format) : path_(std::move(path)), format_(format) {}
  absl::Status OpenBinary(int d);
  absl::Status ParseLine(const std::string& line, std::vector<float>* values);

  std::string path_;
  Format format_;
  int d_ = 0;
  int64_t n_ = -1;
  int rank_ = 2;
  // Binary files: read with pread at data_offset_ + point * d * item_bytes_.
  int fd_ = -1;
  int64_t data_offset_ = 0;
  int item_bytes_ = 4;
  // 2-byte values (binary16 or bfloat16) as float32.
  float (*widen_)(uint16_t) = nullptr;
  int64_t next_ = 0;  // the next point Read returns
  // CSV:
  std::ifstream in_;
  int64_t line_number_ = 0;
  int64_t size_ = 0;
  bool header_checked_ = false;
};

}  // namespace kmt

#endif  // KMT_IO_POINT_READER_H_
