#include "core/task_generator.h"

#include "core/random.h"

namespace kmt {

template <typename Scalar>
Task<Scalar> GenerateTask(const TaskOptions& options, uint64_t seed) {
  Rng rng(seed);
  const int d = options.d, k = options.k, n = options.n;
  Matrix<double> means(d, k);
  for (int j = 0; j < k; ++j) {
    for (int l = 0; l < d; ++l) means(l, j) = rng.Uniform();
  }
  Matrix<double> points(d, n);
  Task<Scalar> task;
  task.components.resize(n);
  for (int i = 0; i < n; ++i) {
    const int j = static_cast<int>(rng.Below(k));
    task.components[i] = j;
    for (int l = 0; l < d; ++l) {
      points(l, i) = means(l, j) + options.scale * rng.Normal();
    }
  }
  if (options.min_max_scale) {
    for (int l = 0; l < d; ++l) {
      const double lo = points.row(l).minCoeff();
      const double range = points.row(l).maxCoeff() - lo;
      const double factor = range > 0 ? 1.0 / range : 0.0;
      points.row(l) = (points.row(l).array() - lo) * factor;
      means.row(l) = (means.row(l).array() - lo) * factor;
    }
  }
  task.points = points.cast<Scalar>();
  task.means = means.cast<Scalar>();
  return task;
}

template Task<float> GenerateTask<float>(const TaskOptions&, uint64_t);
template Task<double> GenerateTask<double>(const TaskOptions&, uint64_t);

}  // namespace kmt
