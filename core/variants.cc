#include "core/variants.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cluster_sums.h"
#include "core/distances.h"
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
    // r_ij = softmax_j(-beta d_ij), in double: the nearest center's term is 1.
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
    // The draw is among the cluster's points, scored against its mean (in
    // double: the draw's scores are compared, not summed).
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
    case Algorithm::kKMedoids:
      return KMedoids(parameters.gamma, parameters.seed, layer, points, labels, centers);
    case Algorithm::kSphericalKMeans:
      return Spherical(points, labels, centers);
    case Algorithm::kTrimmedKMeans:
    case Algorithm::kRobustKMeans:
    case Algorithm::kLloyd:
      break;
  }
  ClusterSums sums(static_cast<int>(points.rows()), static_cast<int>(centers->cols()));
  AccumulateClusterSums(points, labels, &sums);
  return ApplyMeans(sums, centers);
}

template <typename Scalar>
absl::Status NormalizeColumns(Matrix<Scalar>* points, const char* what) {
  for (Eigen::Index i = 0; i < points->cols(); ++i) {
    const Scalar norm = points->col(i).norm();
    if (!(norm > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", i, " has norm 0: spherical k-means needs a direction"));
    }
    points->col(i) /= norm;
  }
  return absl::OkStatus();
}

#define KMT_INSTANTIATE(S)                                                             \
  template int UpdateCenters<S>(Algorithm, const VariantParameters&, const Matrix<S>&, \
                                const Labels&, int, Matrix<S>*);                       \
  template absl::Status NormalizeColumns<S>(Matrix<S>*, const char*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
