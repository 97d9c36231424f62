#include "core/empty_clusters.h"

#include <algorithm>
#include <numeric>
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

void MoveToEmptyCluster(const Vector<double>& x, double w, int from, int to, ClusterSums* sums) {
  sums->sums.col(from) -= x;
  sums->weights[from] -= w;
  --sums->counts[from];
  sums->sums.col(to) = x;
  sums->weights[to] = w;
  sums->counts[to] = 1;
}

template <typename Scalar>
int RelocateEmptyClusters(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                          const Labels& labels, const Matrix<Scalar>& centers, ClusterSums* sums) {
  const std::vector<Eigen::Index> empty = EmptyClusters(*sums);
  if (empty.empty()) return 0;
  const std::vector<int64_t> far =
      FarthestPoints(points, weights, labels, centers, static_cast<int64_t>(empty.size()));
  for (size_t r = 0; r < far.size(); ++r) {
    const int64_t i = far[r];
    const double w = weights != nullptr ? static_cast<double>((*weights)[i]) : 1.0;
    MoveToEmptyCluster(w * points.col(i).template cast<double>(), w, labels[i],
                       static_cast<int>(empty[r]), sums);
  }
  return static_cast<int>(empty.size());
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

#define KMT_INSTANTIATE(S)                                                                  \
  template std::vector<int64_t> FarthestPoints<S>(const Matrix<S>&, const Vector<S>*,       \
                                                  const Labels&, const Matrix<S>&, int64_t, \
                                                  std::vector<S>*);                         \
  template int RelocateEmptyClusters<S>(const Matrix<S>&, const Vector<S>*, const Labels&,  \
                                        const Matrix<S>&, ClusterSums*);                    \
  template void SplitLargestClusters<S>(ClusterSums*, Matrix<S>*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
