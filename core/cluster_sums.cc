#include "core/cluster_sums.h"

#include <algorithm>

namespace kmt {

template <typename Scalar>
void AccumulateClusterSums(const Matrix<Scalar>& points, const Labels& labels, ClusterSums* into) {
  constexpr Eigen::Index kChunk = 16384;
  const Eigen::Index d = points.rows(), n = points.cols();
  const Eigen::Index k = into->sums.cols();
  const Eigen::Index chunks = (n + kChunk - 1) / kChunk;
  std::vector<ClusterSums> partial(chunks, ClusterSums(d, k));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (Eigen::Index c = 0; c < chunks; ++c) {
    ClusterSums& p = partial[c];
    const Eigen::Index end = std::min(n, (c + 1) * kChunk);
    for (Eigen::Index i = c * kChunk; i < end; ++i) {
      const int j = labels[i];
      p.sums.col(j) += points.col(i).template cast<double>();
      ++p.counts[j];
    }
  }
  for (const ClusterSums& p : partial) {
    into->sums += p.sums;
    for (Eigen::Index j = 0; j < k; ++j) into->counts[j] += p.counts[j];
  }
}

template <typename Scalar>
int ApplyMeans(const ClusterSums& sums, Matrix<Scalar>* centers) {
  int empty = 0;
  for (Eigen::Index j = 0; j < centers->cols(); ++j) {
    if (sums.counts[j] == 0) {
      ++empty;
      continue;
    }
    centers->col(j) =
        (sums.sums.col(j) / static_cast<double>(sums.counts[j])).template cast<Scalar>();
  }
  return empty;
}

#define KMT_INSTANTIATE(S)                                                               \
  template void AccumulateClusterSums<S>(const Matrix<S>&, const Labels&, ClusterSums*); \
  template int ApplyMeans<S>(const ClusterSums&, Matrix<S>*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
