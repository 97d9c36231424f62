// What the per-cluster updates (trimmed and robust k-means, k-medoids) share:
// each cluster's points, and a weighted mean over a cluster's own points.
#ifndef KMT_CORE_ALGORITHMS_CLUSTER_MEMBERS_H_
#define KMT_CORE_ALGORITHMS_CLUSTER_MEMBERS_H_

#include <numeric>
#include <vector>

#include "core/distances.h"
#include "core/types.h"

namespace kmt {

// The points of each cluster in increasing index: members[offsets[j] ..
// offsets[j + 1]).
struct Members {
  std::vector<Eigen::Index> offsets, members;

  Members(const Labels& labels, Eigen::Index k) : offsets(k + 1, 0), members(labels.size()) {
    for (int label : labels) ++offsets[label + 1];
    std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
    std::vector<Eigen::Index> next(offsets.begin(), offsets.end() - 1);
    for (size_t i = 0; i < labels.size(); ++i) members[next[labels[i]]++] = i;
  }
  Eigen::Index size(Eigen::Index j) const { return offsets[j + 1] - offsets[j]; }
  const Eigen::Index* begin(Eigen::Index j) const { return members.data() + offsets[j]; }
};

// Per cluster, the scores s_i = -scale ||x_i - c_j||^2 of its points (the
// distance in Scalar, as Lloyd's measures it), and the new center the
// weighted sum of its points under `weights(s)` (normalizers.h), accumulated
// in double in increasing point index. With `uniform`, the points of nonzero
// weight are summed and divided by their count, as Lloyd's mean is. Returns
// the number of empty clusters (they keep their centers).
template <typename Scalar, typename Weights>
int PerClusterWeightedMeans(double scale, bool uniform, const Matrix<Scalar>& points,
                            const Labels& labels, Matrix<Scalar>* centers, Weights weights) {
  const Eigen::Index d = points.rows(), k = centers->cols();
  const Members members(labels, k);
  int empty = 0;
  for (Eigen::Index j = 0; j < k; ++j) empty += members.size(j) == 0;
  const Matrix<Scalar> old = *centers;
#pragma omp parallel for schedule(dynamic) if (points.cols() > 65536)
  for (Eigen::Index j = 0; j < k; ++j) {
    const Eigen::Index size = members.size(j);
    if (size == 0) continue;
    Vector<double> scores(size);
    for (Eigen::Index t = 0; t < size; ++t) {
      scores[t] = -scale * static_cast<double>(DirectSquaredDistance(
                               points.col(members.begin(j)[t]).data(), old.col(j).data(), d));
    }
    const Vector<double> w = weights(scores);
    Vector<double> sum = Vector<double>::Zero(d);
    double count = 0;
    for (Eigen::Index t = 0; t < size; ++t) {
      if (w[t] == 0) continue;
      const double weight = uniform ? 1.0 : w[t];
      const Scalar* x = points.col(members.begin(j)[t]).data();
      for (Eigen::Index l = 0; l < d; ++l) sum[l] += weight * static_cast<double>(x[l]);
      ++count;
    }
    centers->col(j) = (uniform ? sum / count : sum).template cast<Scalar>();
  }
  return empty;
}

}  // namespace kmt

#endif  // KMT_CORE_ALGORITHMS_CLUSTER_MEMBERS_H_
