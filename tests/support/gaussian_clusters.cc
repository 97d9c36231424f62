#include "tests/support/gaussian_clusters.h"

#include "core/random.h"

namespace kmt {

template <typename Scalar>
Clusters<Scalar> GaussianClusters(const ClusterOptions& options, uint64_t seed) {
  Rng rng(seed);
  const int d = options.d, k = options.k, n = options.n;
  Matrix<double> locations(d, k);
  for (Eigen::Index i = 0; i < locations.size(); ++i) locations.data()[i] = rng.Uniform();
  Matrix<double> points(d, n);
  Clusters<Scalar> clusters;
  clusters.components.resize(n);
  for (int i = 0; i < n; ++i) {
    const int j = static_cast<int>(rng.Below(k));
    clusters.components[i] = j;
    for (int l = 0; l < d; ++l) points(l, i) = locations(l, j) + options.scale * rng.Normal();
  }
  if (options.min_max_scale) {
    for (int l = 0; l < d; ++l) {
      const double lo = points.row(l).minCoeff();
      const double range = points.row(l).maxCoeff() - lo;
      // Dividing (not multiplying by 1 / range) maps the largest value to
      // exactly 1; a constant dimension maps to 0.
      points.row(l) = (points.row(l).array() - lo) / (range > 0 ? range : 1.0);
    }
  }
  clusters.points = points.cast<Scalar>();
  return clusters;
}

template Clusters<float> GaussianClusters<float>(const ClusterOptions&, uint64_t);
template Clusters<double> GaussianClusters<double>(const ClusterOptions&, uint64_t);

}  // namespace kmt
