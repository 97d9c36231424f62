// Reads points from a CSV file (one point per line, values separated by
// commas or whitespace, an optional header line) or a raw little-endian
// float32 file (n*d values, row-major), a batch at a time, and can start
// over for another pass.
#ifndef KMT_CLIENT_POINT_READER_H_
#define KMT_CLIENT_POINT_READER_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kmt {

class PointReader {
 public:
  // format: "csv" or "f32"; "" picks by extension (.csv, else f32). d is
  // required for f32 and, if given, checked for CSV.
  static absl::StatusOr<std::unique_ptr<PointReader>> Open(const std::string& path,
                                                           const std::string& format, int d);

  int d() const { return d_; }
  // Appends up to max_points points to `values` (row-major); returns how
  // many, 0 at the end of the file.
  absl::StatusOr<int64_t> Read(int64_t max_points, std::vector<float>* values);
  // Back to the first point.
  absl::Status Rewind();
  // Fraction of the file consumed, for progress reports.
  double progress();

 private:
  PointReader(std::string path, bool csv) : path_(std::move(path)), csv_(csv) {}
  absl::Status ParseLine(const std::string& line, std::vector<float>* values);

  std::string path_;
  bool csv_;
  int d_ = 0;
  std::ifstream in_;
  int64_t line_number_ = 0;
  int64_t size_ = 0;
  bool header_checked_ = false;
};

}  // namespace kmt

#endif  // KMT_CLIENT_POINT_READER_H_
