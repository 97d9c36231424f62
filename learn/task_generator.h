// Clustering tasks drawn from a mixture as the papers' authors draw them: k
// component locations ~ U(0,1)^d, equal weights or weights proportional to
// U(0,1) draws, per-coordinate noise from one of several families with one
// scale or scale * U(0,1) per component and dimension, then each dimension
// min-max scaled to [0, 1]. Deterministic for a given seed; the default
// options keep the draws of the original normal-only generator, so old seeds
// name old tasks.
#ifndef KMT_LEARN_TASK_GENERATOR_H_
#define KMT_LEARN_TASK_GENERATOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

// Per-coordinate distribution of a component with location mu and scale s
// (one coordinate; coordinates are independent). The additive families are
// mu + s * noise, the noise centred to mean 0 (Cauchy, which has no mean, to
// median 0). Lognormal is multiplicative, as the authors draw it: the log of a
// coordinate is N(mu, s^2), so the spread grows with exp(mu) and the point is
// always positive; at s = 0.1 it is nearly a normal of sd 0.1 exp(mu).
enum class Family {
  kNormal,     // mu + s N(0, 1)
  kLaplace,    // mu + s Laplace(0, b = 1)
  kGumbel,     // mu + s (standard Gumbel minus the Euler-Mascheroni constant)
  kLognormal,  // exp(mu + s N(0, 1))
  kCauchy,     // mu + s (standard Cauchy)
};

absl::string_view FamilyName(Family family);
absl::StatusOr<Family> ParseFamily(absl::string_view name);

struct TaskOptions {
  int n = 512;                      ///< points; default 512
  int d = 32;                       ///< dimensions; default 32
  int k = 10;                       ///< mixture components; default 10
  double scale = 0.1;               ///< noise multiplier, the normal's sd; default 0.1
  bool min_max_scale = true;        ///< scale each dimension to [0, 1]; default true
  Family family = Family::kNormal;  ///< noise distribution; default kNormal
  bool equal_weights = true;        ///< false: weights proportional to k draws of
                                    ///< U(0, 1); default true
  bool isotropic = true;            ///< false: scale * U(0, 1) per component and
                                    ///< dimension; default true
  /// Last, each dimension multiplied by U(0.5, 50) and shifted by
  /// U(-100, 100), drawn per task after the points (so the points before it
  /// are those of the same seed without it): dimensions of unequal scales
  /// and offsets, as a user's raw features come; default false
  bool unequal_dimensions = false;
};

template <typename Scalar>
struct Task {
  Matrix<Scalar> points;  ///< d x n, in drawing order (already shuffled); default empty
  /// d x k component means (Cauchy: medians), scaled like the points; for
  /// lognormal exp(mu + s^2 / 2); default empty
  Matrix<Scalar> means;
  Labels components;  ///< the component each point came from; default empty
};

template <typename Scalar>
Task<Scalar> GenerateTask(const TaskOptions& options, uint64_t seed);

// Tasks of random size for a model of options.d and options.k served by
// padding (core/padding.h): the size of the task drawn with `seed`, d'
// uniform in 2..options.d and k' in 2..options.k (each at least 1), from a
// stream of its own, so that the task of that size is GenerateTask's for
// the same seed.
struct TaskSize {
  int d = 0;  ///< dimensions of the task; default 0
  int k = 0;  ///< clusters of the task; default 0
};
TaskSize DrawTaskSize(const TaskOptions& options, uint64_t seed);

}  // namespace kmt

#endif  // KMT_LEARN_TASK_GENERATOR_H_
