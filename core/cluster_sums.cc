#include "core/cluster_sums.h"

#include <algorithm>

namespace kmt {

void ClusterSums::Add(const ClusterSums& other) {
  sums += other.sums;
  for (size_t j = 0; j < counts.size(); ++j) {
    counts[j] += other.counts[j];
    weights[j] += other.weights[j];
  }
}

template <typename Scalar>
void AccumulateClusterSums(const Matrix<Scalar>& points, const Labels& labels, ClusterSums* into,
                           const Vector<Scalar>* weights) {
  constexpr Eigen::Index kChunk = kClusterSumsChunk;
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
      if (weights != nullptr) {
        const double w = (*weights)[i];
        p.sums.col(j) += w * points.col(i).template cast<double>();
        p.weights[j] += w;
      } else {
        p.sums.col(j) += points.col(i).template cast<double>();
        p.weights[j] += 1;
      }
      ++p.counts[j];
    }
  }
  for (const ClusterSums& p : partial) into->Add(p);
}

template <typename Scalar>
int ApplyMeans(const ClusterSums& sums, Matrix<Scalar>* centers) {
  int empty = 0;
  // Each center by one thread: its mean is the same whichever.
#pragma omp parallel for schedule(static) reduction(+ : empty) \
    if (centers->size() > (Eigen::Index{1} << 18))
  for (Eigen::Index j = 0; j < centers->cols(); ++j) {
    if (!(sums.weights[j] > 0)) {
      ++empty;
      continue;
    }
    centers->col(j) = (sums.sums.col(j) / sums.weights[j]).template cast<Scalar>();
  }
  return empty;
}

#define KMT_INSTANTIATE(S)                                                              \
  template void AccumulateClusterSums<S>(const Matrix<S>&, const Labels&, ClusterSums*, \
                                         const Vector<S>*);                             \
  template int ApplyMeans<S>(const ClusterSums&, Matrix<S>*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
