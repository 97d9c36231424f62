#include "core/sparse_sums.h"

#include <omp.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kmt {

namespace {

// Each thread's working space over the d columns: per column the
// cluster's sum so far, the current part's, and stamps saying whether this
// cluster and this part have touched it (so nothing is cleared between
// them), side by side so that a nonzero reads one cache line.
struct ColumnScratch {
  struct Column {
    double total = 0, part = 0;
    int64_t cluster_stamp = -1, part_stamp = -1;
  };
  explicit ColumnScratch(int64_t d) : at(d) {}
  std::vector<Column> at;
  std::vector<int32_t> columns, part_columns;
};

// The bytes ColumnScratch takes per column; threads are held to what fits
// in kScratchBytes, whatever d.
constexpr int64_t kScratchBytesPerColumn = sizeof(ColumnScratch::Column);
constexpr int64_t kScratchBytes = int64_t{256} << 20;

}  // namespace

template <typename Scalar>
absl::StatusOr<CsrClusterSums> SparseClusterSums(const CsrMatrix<Scalar>& points,
                                                 const Labels& labels, int k,
                                                 const NonDeduced<Vector<Scalar>>* weights,
                                                 Eigen::Index part_size) {
  const int64_t n = points.rows(), d = points.cols();
  const std::vector<int64_t>& indptr = points.indptr();
  const std::vector<int32_t>& indices = points.indices();
  const std::vector<Scalar>& values = points.values();
  // Each cluster's rows, in row order (a counting sort by label).
  std::vector<int64_t> first(k + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++first[labels[i] + 1];
  for (int j = 0; j < k; ++j) first[j + 1] += first[j];
  std::vector<int64_t> rows(n);
  {
    std::vector<int64_t> at(first.begin(), first.end() - 1);
    for (int64_t i = 0; i < n; ++i) rows[at[labels[i]]++] = i;
  }
  std::vector<int64_t> counts(k);
  std::vector<double> cluster_weights(k, 0);
  std::vector<std::vector<int32_t>> columns(k);
  std::vector<std::vector<double>> sums(k);
  const int threads = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>({omp_get_max_threads(), k,
                            kScratchBytes / std::max<int64_t>(1, kScratchBytesPerColumn * d)})));
#pragma omp parallel num_threads(threads) if (points.nnz() > (1 << 16))
  {
    ColumnScratch scratch(d);
#pragma omp for schedule(dynamic)
    for (int j = 0; j < k; ++j) {
      counts[j] = first[j + 1] - first[j];
      double total_weight = 0, part_weight = 0;
      int64_t part = -1;
      // A part's sums added to the cluster's, as ClusterSums::Add adds
      // them (a column the part did not touch would add +0).
      const auto flush = [&] {
        for (const int32_t c : scratch.part_columns) {
          ColumnScratch::Column& column = scratch.at[c];
          column.total += column.part;
          column.part = 0;
        }
        scratch.part_columns.clear();
        total_weight += part_weight;
        part_weight = 0;
      };
      for (int64_t r = first[j]; r < first[j + 1]; ++r) {
        const int64_t i = rows[r];
        if (i / part_size != part) {
          flush();
          part = i / part_size;
        }
        // The stamps of (cluster, part): unique over the call.
        const int64_t part_stamp = static_cast<int64_t>(j) * (n / part_size + 1) + part;
        const double w = weights != nullptr ? static_cast<double>((*weights)[i]) : 1.0;
        part_weight += w;
        for (int64_t p = indptr[i]; p < indptr[i + 1]; ++p) {
          const int32_t c = indices[p];
          ColumnScratch::Column& column = scratch.at[c];
          if (column.part_stamp != part_stamp) {
            column.part_stamp = part_stamp;
            scratch.part_columns.push_back(c);
            if (column.cluster_stamp != j) {
              column.cluster_stamp = j;
              scratch.columns.push_back(c);
            }
          }
          column.part += weights != nullptr ? w * static_cast<double>(values[p])
                                            : static_cast<double>(values[p]);
        }
      }
      flush();
      cluster_weights[j] = total_weight;
      std::sort(scratch.columns.begin(), scratch.columns.end());
      columns[j] = scratch.columns;
      sums[j].reserve(scratch.columns.size());
      for (const int32_t c : scratch.columns) {
        sums[j].push_back(scratch.at[c].total);
        scratch.at[c].total = 0;
      }
      scratch.columns.clear();
    }
  }
  std::vector<int64_t> out_indptr(k + 1, 0);
  for (int j = 0; j < k; ++j)
    out_indptr[j + 1] = out_indptr[j] + static_cast<int64_t>(sums[j].size());
  std::vector<int32_t> out_indices;
  std::vector<double> out_values;
  out_indices.reserve(out_indptr[k]);
  out_values.reserve(out_indptr[k]);
  for (int j = 0; j < k; ++j) {
    out_indices.insert(out_indices.end(), columns[j].begin(), columns[j].end());
    out_values.insert(out_values.end(), sums[j].begin(), sums[j].end());
  }
  absl::StatusOr<CsrMatrix<double>> matrix = CsrMatrix<double>::Create(
      k, d, std::move(out_indptr), std::move(out_indices), std::move(out_values));
  if (!matrix.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cluster sums overflow: ", matrix.status().message()));
  }
  return CsrClusterSums{std::move(counts), std::move(cluster_weights), *std::move(matrix)};
}

template absl::StatusOr<CsrClusterSums> SparseClusterSums<float>(const CsrMatrix<float>&,
                                                                 const Labels&, int,
                                                                 const Vector<float>*,
                                                                 Eigen::Index);
template absl::StatusOr<CsrClusterSums> SparseClusterSums<double>(const CsrMatrix<double>&,
                                                                  const Labels&, int,
                                                                  const Vector<double>*,
                                                                  Eigen::Index);

}  // namespace kmt
