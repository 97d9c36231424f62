#include "reference/lloyd.h"

#include <limits>

namespace kmt {

template <typename Scalar>
Scalar ReferenceSquaredDistance(const Matrix<Scalar>& a, Eigen::Index i, const Matrix<Scalar>& b,
                                Eigen::Index j) {
  Scalar sum = 0;
  for (Eigen::Index l = 0; l < a.rows(); ++l) {
    const Scalar diff = a(l, i) - b(l, j);
    sum += diff * diff;
  }
  return sum;
}

namespace {

template <typename Scalar>
int Nearest(const Matrix<Scalar>& points, Eigen::Index i, const Matrix<Scalar>& centers,
            Scalar* distance) {
  int best = 0;
  Scalar best_distance = std::numeric_limits<Scalar>::infinity();
  for (Eigen::Index j = 0; j < centers.cols(); ++j) {
    const Scalar dist = ReferenceSquaredDistance(points, i, centers, j);
    if (dist < best_distance) {
      best_distance = dist;
      best = static_cast<int>(j);
    }
  }
  *distance = best_distance;
  return best;
}

}  // namespace

template <typename Scalar>
double ReferenceObjective(const Matrix<Scalar>& points, const Matrix<Scalar>& centers) {
  double total = 0;
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    Scalar distance;
    Nearest(points, i, centers, &distance);
    total += distance;
  }
  return total;
}

template <typename Scalar>
Labels ReferenceLabels(const Matrix<Scalar>& points, const Matrix<Scalar>& centers) {
  Labels labels(points.cols());
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    Scalar unused;
    labels[i] = Nearest(points, i, centers, &unused);
  }
  return labels;
}

template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceLloyd(const Matrix<Scalar>& points,
                                                   const Matrix<Scalar>& centers, int iterations) {
  const Eigen::Index d = points.rows(), n = points.cols(), k = centers.cols();
  std::vector<LloydIteration<Scalar>> history;
  Matrix<Scalar> current = centers;
  for (int t = 0; t < iterations; ++t) {
    LloydIteration<Scalar> it;
    it.labels = ReferenceLabels(points, current);
    Matrix<Scalar> sums = Matrix<Scalar>::Zero(d, k);
    std::vector<int> counts(k, 0);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index l = 0; l < d; ++l) sums(l, it.labels[i]) += points(l, i);
      ++counts[it.labels[i]];
    }
    for (Eigen::Index j = 0; j < k; ++j) {
      if (counts[j] == 0) {
        ++it.empty_clusters;
        continue;
      }
      for (Eigen::Index l = 0; l < d; ++l) current(l, j) = sums(l, j) / counts[j];
    }
    it.centers = current;
    it.objective = ReferenceObjective(points, current);
    history.push_back(std::move(it));
  }
  return history;
}

template <typename Scalar>
ClusterSums ReferenceRoundedSums(const Matrix<Scalar>& points, const Labels& labels, int k,
                                 const Vector<Scalar>* weights) {
  const Eigen::Index d = points.rows();
  std::vector<__float128> sums(static_cast<size_t>(d) * k, 0), weight_sums(k, 0);
  ClusterSums out(static_cast<int>(d), k);
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    const int j = labels[i];
    const __float128 w = weights != nullptr ? static_cast<__float128>((*weights)[i]) : 1;
    for (Eigen::Index l = 0; l < d; ++l)
      sums[j * d + l] += w * static_cast<__float128>(points(l, i));
    weight_sums[j] += w;
    ++out.counts[j];
  }
  for (int j = 0; j < k; ++j) {
    for (Eigen::Index l = 0; l < d; ++l) out.sums(l, j) = static_cast<double>(sums[j * d + l]);
    out.weights[j] = static_cast<double>(weight_sums[j]);
  }
  return out;
}

#define KMT_INSTANTIATE(S)                                                                      \
  template std::vector<LloydIteration<S>> ReferenceLloyd<S>(const Matrix<S>&, const Matrix<S>&, \
                                                            int);                               \
  template double ReferenceObjective<S>(const Matrix<S>&, const Matrix<S>&);                    \
  template Labels ReferenceLabels<S>(const Matrix<S>&, const Matrix<S>&);                       \
  template S ReferenceSquaredDistance<S>(const Matrix<S>&, Eigen::Index, const Matrix<S>&,      \
                                         Eigen::Index);                                         \
  template ClusterSums ReferenceRoundedSums<S>(const Matrix<S>&, const Labels&, int,            \
                                               const Vector<S>*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
