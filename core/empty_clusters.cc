#include "core/empty_clusters.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/distances.h"

namespace kmt {

absl::string_view EmptyClusterPolicyName(EmptyClusterPolicy policy) {
  switch (policy) {
    case EmptyClusterPolicy::kKeep:
      return "keep";
    case EmptyClusterPolicy::kRelocateFarthest:
      return "relocate-farthest";
    case EmptyClusterPolicy::kSplitLargest:
      return "split-largest";
  }
  return "unknown";
}

absl::StatusOr<EmptyClusterPolicy> ParseEmptyClusterPolicy(absl::string_view name) {
  for (EmptyClusterPolicy p : {EmptyClusterPolicy::kKeep, EmptyClusterPolicy::kRelocateFarthest,
                               EmptyClusterPolicy::kSplitLargest}) {
    if (name == EmptyClusterPolicyName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown empty-cluster policy '", name,
                   "', expected keep, relocate-farthest or split-largest"));
}

namespace {

std::vector<Eigen::Index> EmptyClusters(const ClusterSums& sums) {
  std::vector<Eigen::Index> empty;
  for (size_t j = 0; j < sums.weights.size(); ++j) {
    if (!(sums.weights[j] > 0)) empty.push_back(static_cast<Eigen::Index>(j));
  }
  return empty;
}

// The first `m` of `order` (points) by `distance` (indexed by point),
// farthest first, ties to the lower index, their distances into
// `distances` if given: both forms' selection.
template <typename Scalar>
std::vector<int64_t> Farthest(std::vector<int64_t> order, const std::vector<Scalar>& distance,
                              int64_t m, std::vector<Scalar>* distances) {
  const size_t take = static_cast<size_t>(std::min<int64_t>(std::max<int64_t>(m, 0), order.size()));
  const auto farther = [&](int64_t a, int64_t b) {
    return distance[a] > distance[b] || (distance[a] == distance[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(),
                    farther);
  order.resize(take);
  if (distances != nullptr) {
    distances->clear();
    for (const int64_t i : order) distances->push_back(distance[i]);
  }
  return order;
}

}  // namespace

template <typename Scalar>
std::vector<int64_t> FarthestPoints(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                                    const Labels& labels, const Matrix<Scalar>& centers, int64_t m,
                                    std::vector<Scalar>* distances) {
  const Eigen::Index d = points.rows(), n = points.cols();
  std::vector<int64_t> order;
  order.reserve(n);
  std::vector<Scalar> distance(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    if (weights != nullptr && !((*weights)[i] > 0)) continue;
    distance[i] = DirectSquaredDistance(points.col(i).data(), centers.col(labels[i]).data(), d);
    order.push_back(i);
  }
  return Farthest(std::move(order), distance, m, distances);
}

template <typename Scalar>
std::vector<int64_t> FarthestPoints(const CsrMatrix<Scalar>& points, const Vector<Scalar>* weights,
                                    const Labels& labels, const Matrix<Scalar>& centers, int64_t m,
                                    std::vector<Scalar>* distances) {
  const int64_t n = points.rows(), d = points.cols();
  const int64_t* indptr = points.indptr().data();
  const int32_t* index = points.indices().data();
  const Scalar* value = points.values().data();
  // 1. Each point's distance estimated from its nonzeros in double, in
  // product form, and a bound on its distance from the dense form's
  // DirectSquaredDistance: the product form's round-off (in double) and
  // the direct sum's, gamma_{d + 2} = (d + 2) u / (1 - (d + 2) u) of the
  // distance (u = eps / 2: each difference and square rounded once, then
  // d - 1 additions of terms >= 0), unbounded where (d + 2) u >= 1.
  std::vector<double> c_sq(centers.cols());
  for (Eigen::Index j = 0; j < centers.cols(); ++j) {
    double sq = 0;
    for (Eigen::Index l = 0; l < d; ++l) {
      sq += static_cast<double>(centers(l, j)) * static_cast<double>(centers(l, j));
    }
    c_sq[j] = sq;
  }
  const double nu = static_cast<double>(d + 2) * std::numeric_limits<Scalar>::epsilon() / 2;
  const double direct_error = nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
  std::vector<int64_t> eligible;
  eligible.reserve(n);
  std::vector<double> low(n), high(n);
  for (int64_t i = 0; i < n; ++i) {
    if (weights != nullptr && !((*weights)[i] > 0)) continue;
    const Scalar* c = centers.col(labels[i]).data();
    double x_sq = 0, dot = 0;
    for (int64_t p = indptr[i]; p < indptr[i + 1]; ++p) {
      const double x = static_cast<double>(value[p]);
      x_sq += x * x;
      dot += x * static_cast<double>(c[index[p]]);
    }
    const double estimate = x_sq + c_sq[labels[i]] - 2 * dot;
    const double product_error = SquaredDistanceRoundOff<double>(d, x_sq, c_sq[labels[i]]);
    const double error =
        (product_error + direct_error * (std::max(estimate, 0.0) + product_error)) * (1 + 1e-6);
    low[i] = estimate - error;
    high[i] = estimate + error;
    eligible.push_back(i);
  }
  const int64_t take = std::min<int64_t>(std::max<int64_t>(m, 0), eligible.size());
  if (take == 0) return Farthest(std::vector<int64_t>{}, std::vector<Scalar>{}, 0, distances);
  // 2. At least `take` points lie at or above the take-th largest low end
  // (then also the take-th largest distance measured so far), each farther
  // than any point whose high end is below it: only the others can be among
  // the farthest, and they alone are measured as the dense form measures
  // every point, on the row made dense, in decreasing high end until one
  // lies below.
  std::vector<double> lows;
  lows.reserve(eligible.size());
  for (const int64_t i : eligible) lows.push_back(low[i]);
  std::nth_element(lows.begin(), lows.begin() + (take - 1), lows.end(), std::greater<double>());
  double threshold = lows[take - 1];
  std::vector<int64_t> order;
  for (const int64_t i : eligible) {
    if (high[i] >= threshold) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return high[a] > high[b]; });
  std::vector<Scalar> distance(n), row(d);
  // The take largest distances measured, least on top.
  std::priority_queue<double, std::vector<double>, std::greater<double>> largest;
  size_t measured = 0;
  for (; measured < order.size() && high[order[measured]] >= threshold; ++measured) {
    const int64_t i = order[measured];
    points.Row(i, row.data());
    distance[i] = DirectSquaredDistance(row.data(), centers.col(labels[i]).data(), d);
    largest.push(static_cast<double>(distance[i]));
    if (static_cast<int64_t>(largest.size()) > take) largest.pop();
    if (static_cast<int64_t>(largest.size()) == take)
      threshold = std::max(threshold, largest.top());
  }
  order.resize(measured);
  return Farthest(std::move(order), distance, take, distances);
}

void MoveToEmptyCluster(const Vector<double>& x, double w, int from, int to, ClusterSums* sums) {
  sums->sums.col(from) -= x;
  sums->weights[from] -= w;
  --sums->counts[from];
  sums->sums.col(to) = x;
  sums->weights[to] = w;
  sums->counts[to] = 1;
}

namespace {

// Point i as doubles, in either form.
template <typename Scalar>
Vector<double> PointAsDouble(const Matrix<Scalar>& points, int64_t i) {
  return points.col(i).template cast<double>();
}
template <typename Scalar>
Vector<double> PointAsDouble(const CsrMatrix<Scalar>& points, int64_t i) {
  Vector<Scalar> row(points.cols());
  points.Row(i, row.data());
  return row.template cast<double>();
}

// RelocateEmptyClusters on points of either form.
template <typename Scalar, typename Points>
int Relocate(const Points& points, const Vector<Scalar>* weights, const Labels& labels,
             const Matrix<Scalar>& centers, ClusterSums* sums, int64_t* moved) {
  if (moved != nullptr) *moved = 0;
  const std::vector<Eigen::Index> empty = EmptyClusters(*sums);
  if (empty.empty()) return 0;
  const std::vector<int64_t> far =
      FarthestPoints(points, weights, labels, centers, static_cast<int64_t>(empty.size()));
  for (size_t r = 0; r < far.size(); ++r) {
    const int64_t i = far[r];
    const double w = weights != nullptr ? static_cast<double>((*weights)[i]) : 1.0;
    MoveToEmptyCluster(w * PointAsDouble(points, i), w, labels[i], static_cast<int>(empty[r]),
                       sums);
  }
  if (moved != nullptr) *moved = static_cast<int64_t>(far.size());
  return static_cast<int>(empty.size());
}

}  // namespace

template <typename Scalar>
int RelocateEmptyClusters(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                          const Labels& labels, const Matrix<Scalar>& centers, ClusterSums* sums,
                          int64_t* moved) {
  return Relocate(points, weights, labels, centers, sums, moved);
}

template <typename Scalar>
int RelocateEmptyClusters(const CsrMatrix<Scalar>& points, const Vector<Scalar>* weights,
                          const Labels& labels, const Matrix<Scalar>& centers, ClusterSums* sums,
                          int64_t* moved) {
  return Relocate(points, weights, labels, centers, sums, moved);
}

template <typename Scalar>
void SplitLargestClusters(ClusterSums* sums, Matrix<Scalar>* centers) {
  constexpr double kEps = 1.0 / 1024;
  for (const Eigen::Index j : EmptyClusters(*sums)) {
    const Eigen::Index donor = static_cast<Eigen::Index>(
        std::max_element(sums->weights.begin(), sums->weights.end()) - sums->weights.begin());
    if (!(sums->weights[donor] > 0)) return;
    for (Eigen::Index l = 0; l < centers->rows(); ++l) {
      const double c = static_cast<double>((*centers)(l, donor));
      const double up = c * (1 + kEps), down = c * (1 - kEps);
      (*centers)(l, j) = static_cast<Scalar>(l % 2 == 0 ? up : down);
      (*centers)(l, donor) = static_cast<Scalar>(l % 2 == 0 ? down : up);
    }
    sums->weights[j] = sums->weights[donor] / 2;
    sums->weights[donor] -= sums->weights[j];
  }
}

#define KMT_INSTANTIATE(S)                                                                    \
  template std::vector<int64_t> FarthestPoints<S>(const Matrix<S>&, const Vector<S>*,         \
                                                  const Labels&, const Matrix<S>&, int64_t,   \
                                                  std::vector<S>*);                           \
  template std::vector<int64_t> FarthestPoints<S>(const CsrMatrix<S>&, const Vector<S>*,      \
                                                  const Labels&, const Matrix<S>&, int64_t,   \
                                                  std::vector<S>*);                           \
  template int RelocateEmptyClusters<S>(const Matrix<S>&, const Vector<S>*, const Labels&,    \
                                        const Matrix<S>&, ClusterSums*, int64_t*);            \
  template int RelocateEmptyClusters<S>(const CsrMatrix<S>&, const Vector<S>*, const Labels&, \
                                        const Matrix<S>&, ClusterSums*, int64_t*);            \
  template void SplitLargestClusters<S>(ClusterSums*, Matrix<S>*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
