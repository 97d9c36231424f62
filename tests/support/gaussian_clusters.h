// Test problems: points around k centers, drawn as the training tasks'
// default distribution draws them (learn/task_generator.h), so that the core's
// tests and benchmarks need not link the trainer. Locations ~ U(0, 1)^d, each
// point's component uniform over the k, its coordinates location + scale *
// N(0, 1), then each dimension min-max scaled to [0, 1]. A seed names the same
// points as GenerateTask's default options with that seed.
#ifndef KMT_TESTS_SUPPORT_GAUSSIAN_CLUSTERS_H_
#define KMT_TESTS_SUPPORT_GAUSSIAN_CLUSTERS_H_

#include <cstdint>

#include "core/types.h"

namespace kmt {

struct ClusterOptions {
  int n = 512;                ///< points; default 512
  int d = 32;                 ///< dimensions; default 32
  int k = 10;                 ///< components; default 10
  double scale = 0.1;         ///< the noise's standard deviation; default 0.1
  bool min_max_scale = true;  ///< scale each dimension to [0, 1]; default true
};

template <typename Scalar>
struct Clusters {
  Matrix<Scalar> points;  ///< d x n, in drawing order (already shuffled)
  Labels components;      ///< the component each point came from
};

template <typename Scalar>
Clusters<Scalar> GaussianClusters(const ClusterOptions& options, uint64_t seed);

}  // namespace kmt

#endif  // KMT_TESTS_SUPPORT_GAUSSIAN_CLUSTERS_H_
