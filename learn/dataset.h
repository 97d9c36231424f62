// A user's dataset for training and held-out evaluation: the points of an
// (N, d) .npy file, read with the point reader (io/point_reader.h), and the
// rows of it a run may use, given as "A:B" (rows A to B - 1, either end
// optional), so that training and evaluation can name disjoint parts of one
// file.
#ifndef KMT_LEARN_DATASET_H_
#define KMT_LEARN_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

struct RowRange {
  int64_t first = 0;  ///< first row used
  int64_t end = 0;    ///< one past the last row used
};

// "A:B", "A:" (to the end) or ":B" (from the start) of a file of `rows`
// rows; "" is every row. Refuses an empty range and one past the end.
absl::StatusOr<RowRange> ParseRowRange(absl::string_view text, int64_t rows);

// "A:B" as ParseRowRange reads it back.
std::string RowRangeName(const RowRange& range);

// A float32 or float64 (N, d) .npy file's points, d x N. Another shape, and
// a NaN or Inf (named by its row and column), are refused.
absl::StatusOr<std::shared_ptr<const Matrix<float>>> ReadDataset(const std::string& path);

// Columns [range.first, range.end) of `points`.
std::shared_ptr<const Matrix<float>> DatasetRows(const Matrix<float>& points,
                                                 const RowRange& range);

}  // namespace kmt

#endif  // KMT_LEARN_DATASET_H_
