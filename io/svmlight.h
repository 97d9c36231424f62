// Reads a sparse dataset in the SVMlight / libsvm text format, one point a
// line: a target (read and ignored: k-means has none), an optional
// `qid:N`, then `index:value` pairs with strictly increasing indices, and
// an optional `# comment`; lines that are blank or only a comment are
// skipped. scikit-learn's dump_svmlight_file writes it (zero-based
// indices by default), as do libsvm's and XGBoost's tools (one-based).
// Indices are read as scikit-learn's load_svmlight_file reads them with
// zero_based="auto": zero-based if any index in the file is 0, else
// one-based. The points are held as compressed sparse rows (scipy's
// canonical CSR), in memory proportional to the nonzeros.
#ifndef KMT_IO_SVMLIGHT_H_
#define KMT_IO_SVMLIGHT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kmt {

struct SvmlightFile {
  int64_t rows = 0;              ///< points (the file's data lines)
  int64_t cols = 0;              ///< features: d if given, else the largest index + 1
  std::vector<int64_t> indptr;   ///< rows + 1 offsets, the first 0
  std::vector<int32_t> indices;  ///< zero-based columns, strictly increasing within a row
  std::vector<float> values;     ///< the values, finite, as float32
  bool one_based = false;        ///< whether the file's indices were shifted down by 1
};

// Whether `path` names an SVMlight file: `format` is "svmlight", or it is
// empty and the name ends in .svm, .svmlight or .libsvm (any case).
bool IsSvmlight(const std::string& path, const std::string& format);

// Reads the file at `path`. `d` > 0 fixes the number of features (an index
// at or above it is an error); 0 takes the largest index + 1. A malformed
// line is INVALID_ARGUMENT naming the file, the line and what is wrong (a
// token that is not index:value, an index that is negative, above 2^31 - 2
// or not above the one before it, a value that is not a finite number).
absl::StatusOr<SvmlightFile> ReadSvmlight(const std::string& path, int64_t d = 0);

}  // namespace kmt

#endif  // KMT_IO_SVMLIGHT_H_
