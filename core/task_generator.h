// Clustering tasks drawn from a mixture: k component means ~ U(0,1)^d, equal
// weights, isotropic per-dimension scale, then each dimension min-max scaled
// to [0, 1]. Deterministic for a given seed.
#ifndef KMT_CORE_TASK_GENERATOR_H_
#define KMT_CORE_TASK_GENERATOR_H_

#include <cstdint>

#include "core/types.h"

namespace kmt {

struct TaskOptions {
  int n = 512;               ///< points
  int d = 32;                ///< dimensions
  int k = 10;                ///< mixture components
  double scale = 0.1;        ///< per-dimension standard deviation of a component
  bool min_max_scale = true; ///< scale each dimension to [0, 1]
};

template <typename Scalar>
struct Task {
  Matrix<Scalar> points;  ///< d x n, in drawing order (already shuffled)
  Matrix<Scalar> means;   ///< d x k component means, scaled like the points
  Labels components;      ///< the component each point came from
};

template <typename Scalar>
Task<Scalar> GenerateTask(const TaskOptions& options, uint64_t seed);

}  // namespace kmt

#endif  // KMT_CORE_TASK_GENERATOR_H_
