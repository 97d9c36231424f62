#include "learn/dataset.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "io/point_reader.h"

namespace kmt {

absl::StatusOr<RowRange> ParseRowRange(absl::string_view text, int64_t rows) {
  RowRange range{0, rows};
  if (text.empty()) return range;
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("rows '", text, "': expected A:B, A: or :B"));
  }
  const absl::string_view first = text.substr(0, colon), end = text.substr(colon + 1);
  if ((!first.empty() && !absl::SimpleAtoi(first, &range.first)) ||
      (!end.empty() && !absl::SimpleAtoi(end, &range.end))) {
    return absl::InvalidArgumentError(absl::StrCat("rows '", text, "': not row numbers"));
  }
  if (range.first < 0 || range.end > rows || range.first >= range.end) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows '", text, "': no rows of a file of ", rows, " (0 to ", rows, ")"));
  }
  return range;
}

std::string RowRangeName(const RowRange& range) {
  return absl::StrCat(range.first, ":", range.end);
}

absl::StatusOr<std::shared_ptr<const Matrix<float>>> ReadDataset(const std::string& path) {
  absl::StatusOr<std::unique_ptr<PointReader>> reader = PointReader::Open(path, "npy", 0);
  if (!reader.ok()) return reader.status();
  // A dataset is a table: NumPy's 1-D arrays, which the point reader takes
  // as d = 1, are refused by their shape.
  if ((*reader)->rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " has shape (", (*reader)->n(), ",); a dataset has shape (N, d)"));
  }
  std::vector<float> values;
  absl::StatusOr<int64_t> n = (*reader)->Read(INT64_MAX, &values);
  if (!n.ok()) return n.status();
  if (*n == 0) return absl::InvalidArgumentError(absl::StrCat(path, " has no points"));
  const int d = (*reader)->d();
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " row ", i / d, " has ", std::isnan(values[i]) ? "NaN" : "Inf",
                       " in column ", i % d, "; every value must be finite"));
    }
  }
  // Row-major (N, d) values are the columns of a d x N matrix.
  return std::make_shared<const Matrix<float>>(
      Eigen::Map<const Matrix<float>>(values.data(), d, *n));
}

std::shared_ptr<const Matrix<float>> DatasetRows(const Matrix<float>& points,
                                                 const RowRange& range) {
  return std::make_shared<const Matrix<float>>(
      points.middleCols(range.first, range.end - range.first));
}

}  // namespace kmt
