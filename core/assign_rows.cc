// AssignRows (core/assign.h): the assignment of rows drawn from a shard, a
// kernel compiled per SIMD level.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/assign.h"
#include "core/prefetch.h"

namespace kmt {

template <typename Scalar>
double AssignRows(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, const int64_t* rows,
                  Eigen::Index m, Labels* labels, ClusterSums* sums,
                  const NonDeduced<Vector<Scalar>>* weights) {
  const Eigen::Index d = points.rows(), k = centers.cols();
  labels->resize(m);
  if (m == 0) return 0;
  const NearestCenterScan<Scalar> scan(centers);
  const Eigen::Index block = scan.block();
  const Eigen::Index span =
      block * std::max<Eigen::Index>(1, kAssignRowsBytes /
                                            (std::max<Eigen::Index>(d, 1) *
                                             static_cast<Eigen::Index>(sizeof(Scalar))) /
                                            block);
  const Eigen::Index ahead = ReadAheadPoints<Scalar>(d);
  Vector<Scalar> sq(m);
  Matrix<Scalar> x(d, std::min(span, m));
  std::vector<int> bounds;  // thread t adds the rows of centers [bounds[t], bounds[t + 1])
  for (Eigen::Index start = 0; start < m; start += span) {
    const Eigen::Index count = std::min(span, m - start);
    const Eigen::Index blocks = (count + block - 1) / block;
#pragma omp parallel if (blocks > 1 && m * d * k > (1 << 18))
    {
      typename NearestCenterScan<Scalar>::Scratch scratch;
      // A block's rows gathered into the span's buffer, then scanned there.
#pragma omp for schedule(dynamic)
      for (Eigen::Index b = 0; b < blocks; ++b) {
        const Eigen::Index first = b * block, size = std::min(block, count - first);
        const int64_t* at = rows + start + first;
        for (Eigen::Index i = 0; i < size; ++i) {
          if (i + ahead < size) PrefetchValues(points.col(at[i + ahead]).data(), d);
          x.col(first + i) = points.col(at[i]);
        }
        scan.Scan(x.middleCols(first, size), &scratch, labels->data() + start + first,
                  sq.data() + start + first);
      }
      if (sums != nullptr) {
        const int threads = omp_get_num_threads(), me = omp_get_thread_num();
#pragma omp single
        {
          // Shares of about count / threads rows each, by the span's labels.
          std::vector<Eigen::Index> taken(k, 0);
          for (Eigen::Index i = 0; i < count; ++i) ++taken[(*labels)[start + i]];
          bounds.assign(threads + 1, static_cast<int>(k));
          bounds[0] = 0;
          Eigen::Index so_far = 0;
          for (int j = 0, t = 1; j < k && t < threads; ++j) {
            so_far += taken[j];
            if (so_far * threads >= t * count) bounds[t++] = j + 1;
          }
        }
        // Each row's count, weight and sum, the thread's centers alone.
        const int low = bounds[me], high = bounds[me + 1];
        for (Eigen::Index i = 0; i < count && low < high; ++i) {
          const int j = (*labels)[start + i];
          if (j < low || j >= high) continue;
          AddToSums(x.col(i), j, weights != nullptr ? &(*weights)[rows[start + i]] : nullptr, sums);
        }
      }
    }
  }
  double objective = 0;
  for (Eigen::Index i = 0; i < m; ++i) {
    objective =
        WithObjective(objective, sq[i], weights != nullptr ? &(*weights)[rows[i]] : nullptr);
  }
  return objective;
}

template double AssignRows<float>(const Matrix<float>&, const Matrix<float>&, const int64_t*,
                                  Eigen::Index, Labels*, ClusterSums*,
                                  const NonDeduced<Vector<float>>*);
template double AssignRows<double>(const Matrix<double>&, const Matrix<double>&, const int64_t*,
                                   Eigen::Index, Labels*, ClusterSums*,
                                   const NonDeduced<Vector<double>>*);

}  // namespace kmt
