#include "core/variants.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cluster_sums.h"
#include "core/distances.h"
#include "core/normalizers.h"
#include "core/random.h"

namespace kmt {
namespace {

// Points per chunk of soft k-means: responsibilities of a chunk (points x k)
// stay small, and chunks are merged in order, so the result does not depend
// on the thread count.
constexpr Eigen::Index kSoftChunk = 2048;

template <typename Scalar>
int SoftKMeans(double beta, const Matrix<Scalar>& points, Matrix<Scalar>* centers) {
  const Eigen::Index d = points.rows(), n = points.cols(), k = centers->cols();
  const Vector<Scalar> center_sq = SquaredNorms<Scalar>(*centers);
  const Eigen::Index chunks = (n + kSoftChunk - 1) / kSoftChunk;
  std::vector<Matrix<double>> sums(chunks);
  std::vector<Vector<double>> masses(chunks);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (Eigen::Index c = 0; c < chunks; ++c) {
    const Eigen::Index first = c * kSoftChunk, rows = std::min(kSoftChunk, n - first);
    const auto x = points.middleCols(first, rows);
    Matrix<Scalar> dist;
    SquaredDistances<Scalar>(x, SquaredNorms<Scalar>(x), *centers, center_sq, &dist);
    // r_ij = softmax_j(-beta d_ij) in double, whatever the points' type: a
    // far center's responsibilities are tiny, and in float they would
    // underflow to 0 and freeze it where double moves it.
    Matrix<double> r = (-beta) * dist.template cast<double>();
    for (Eigen::Index i = 0; i < rows; ++i) {
      auto row = r.row(i);
      row = (row.array() - row.maxCoeff()).exp().matrix();
      row /= row.sum();
    }
    sums[c].noalias() = x.template cast<double>() * r;
    masses[c] = r.colwise().sum().transpose();
  }
  Matrix<double> sum = Matrix<double>::Zero(d, k);
  Vector<double> mass = Vector<double>::Zero(k);
  for (Eigen::Index c = 0; c < chunks; ++c) {
    sum += sums[c];
    mass += masses[c];
  }
  int empty = 0;
  for (Eigen::Index j = 0; j < k; ++j) {
    if (mass[j] > 0) {
      centers->col(j) = (sum.col(j) / mass[j]).template cast<Scalar>();
    } else {
      ++empty;
    }
  }
  return empty;
}

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

template <typename Scalar>
int KMedoids(double gamma, uint64_t seed, int layer, const Matrix<Scalar>& points,
             const Labels& labels, Matrix<Scalar>* centers) {
  const Eigen::Index d = points.rows(), k = centers->cols();
  ClusterSums sums(static_cast<int>(d), static_cast<int>(k));
  AccumulateClusterSums(points, labels, &sums);
  const Members members(labels, k);
  const bool nearest = std::isinf(gamma);
  int empty = 0;
  for (Eigen::Index j = 0; j < k; ++j) empty += sums.counts[j] == 0;
#pragma omp parallel for schedule(dynamic) if (points.cols() > 65536)
  for (Eigen::Index j = 0; j < k; ++j) {
    if (members.size(j) == 0) continue;
    // The draw is among the cluster's points, scored against their mean in
    // double, so that float and double batches draw the same points.
    const Vector<double> mean = sums.sums.col(j) / static_cast<double>(sums.counts[j]);
    double best = -std::numeric_limits<double>::infinity();
    Eigen::Index chosen = members.begin(j)[0];
    for (Eigen::Index t = 0; t < members.size(j); ++t) {
      const Eigen::Index i = members.begin(j)[t];
      const double dist = (points.col(i).template cast<double>() - mean).squaredNorm();
      const double score =
          nearest
              ? -dist
              : -gamma * dist + CounterGumbel(seed, static_cast<uint64_t>(layer),
                                              static_cast<uint64_t>(j), static_cast<uint64_t>(i));
      if (score > best) {
        best = score;
        chosen = i;
      }
    }
    centers->col(j) = points.col(chosen);
  }
  return empty;
}

// Per cluster, the scores s_i = -scale ||x_i - c_j||^2 of its points (the
// distance in Scalar, as Lloyd's measures it), and the new center the
// weighted sum of its points under `weights(s)` (normalizers.h), accumulated
// in double in increasing point index. With `uniform`, the points of nonzero
// weight are summed and divided by their count, as Lloyd's mean is.
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

template <typename Scalar>
int Spherical(const Matrix<Scalar>& points, const Labels& labels, Matrix<Scalar>* centers) {
  const Eigen::Index d = points.rows(), k = centers->cols();
  ClusterSums sums(d, k);
  AccumulateClusterSums(points, labels, &sums);
  // A cluster with no points, or whose points sum to 0, keeps its center.
  int kept = 0;
  for (Eigen::Index j = 0; j < k; ++j) {
    const double norm = sums.sums.col(j).norm();
    if (sums.counts[j] == 0 || !(norm > 0)) {
      ++kept;
      continue;
    }
    centers->col(j) = (sums.sums.col(j) / norm).template cast<Scalar>();
  }
  return kept;
}

}  // namespace

absl::string_view AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kLloyd:
      return "lloyd";
    case Algorithm::kSoftKMeans:
      return "soft-kmeans";
    case Algorithm::kTrimmedKMeans:
      return "trimmed-kmeans";
    case Algorithm::kRobustKMeans:
      return "robust-kmeans";
    case Algorithm::kKMedoids:
      return "kmedoids";
    case Algorithm::kSphericalKMeans:
      return "spherical-kmeans";
  }
  return "unknown";
}

template <typename Scalar>
int UpdateCenters(Algorithm algorithm, const VariantParameters& parameters,
                  const Matrix<Scalar>& points, const Labels& labels, int layer,
                  Matrix<Scalar>* centers) {
  switch (algorithm) {
    case Algorithm::kSoftKMeans:
      return SoftKMeans(parameters.beta, points, centers);
    case Algorithm::kTrimmedKMeans:
      return PerClusterWeightedMeans(
          1.0, /*uniform=*/true, points, labels, centers,
          [tau = parameters.tau](const Vector<double>& s) { return Normmax<double>(s, tau); });
    case Algorithm::kRobustKMeans:
      return PerClusterWeightedMeans(parameters.beta, /*uniform=*/false, points, labels, centers,
                                     [](const Vector<double>& z) { return Sparsemax<double>(z); });
    case Algorithm::kKMedoids:
      return KMedoids(parameters.gamma, parameters.seed, layer, points, labels, centers);
    case Algorithm::kSphericalKMeans:
      return Spherical(points, labels, centers);
    case Algorithm::kLloyd:
      break;
  }
  ClusterSums sums(static_cast<int>(points.rows()), static_cast<int>(centers->cols()));
  AccumulateClusterSums(points, labels, &sums);
  return ApplyMeans(sums, centers);
}

template <typename Scalar>
Eigen::Index ScaleToUnitNorm(Eigen::Ref<Matrix<Scalar>, 0, Eigen::OuterStride<>> columns) {
  Eigen::Index first_zero = -1;
  for (Eigen::Index i = 0; i < columns.cols(); ++i) {
    const Scalar norm = columns.col(i).norm();
    if (norm > 0) {
      columns.col(i) /= norm;
    } else if (first_zero < 0) {
      first_zero = i;
    }
  }
  return first_zero;
}

template <typename Scalar>
absl::Status NormalizeColumns(Matrix<Scalar>* points, const char* what) {
  if (const Eigen::Index zero = ScaleToUnitNorm<Scalar>(*points); zero >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", zero, " has norm 0: spherical k-means needs a direction"));
  }
  return absl::OkStatus();
}

#define KMT_INSTANTIATE(S)                                                                  \
  template int UpdateCenters<S>(Algorithm, const VariantParameters&, const Matrix<S>&,      \
                                const Labels&, int, Matrix<S>*);                            \
  template Eigen::Index ScaleToUnitNorm<S>(Eigen::Ref<Matrix<S>, 0, Eigen::OuterStride<>>); \
  template absl::Status NormalizeColumns<S>(Matrix<S>*, const char*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
