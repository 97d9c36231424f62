// Clustering tasks drawn from a mixture: k component means ~ U(0,1)^d, equal
// or Dirichlet(1) weights, per-coordinate noise from one of several families
// with an isotropic or per-component scale, then each dimension min-max scaled
// to [0, 1]. Deterministic for a given seed; the default options keep the
// draws of the original normal-only generator, so old seeds name old tasks.
#ifndef KMT_LEARN_TASK_GENERATOR_H_
#define KMT_LEARN_TASK_GENERATOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

// Per-coordinate noise around a component mean, before multiplying by the
// scale. Every family with a mean is centred to mean 0; Cauchy has none and
// is centred on its median 0.
enum class Family {
  kNormal,     // N(0, 1)
  kLaplace,    // Laplace(0, b = 1)
  kGumbel,     // standard Gumbel minus the Euler-Mascheroni constant
  kLognormal,  // exp(N(0, 1)) - exp(1/2)
  kCauchy,     // standard Cauchy
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
  bool equal_weights = true;        ///< false: weights ~ Dirichlet(1); default true
  bool isotropic = true;            ///< false: scale * U(0.5, 1.5) per component and
                                    ///< dimension; default true
};

template <typename Scalar>
struct Task {
  Matrix<Scalar> points;  ///< d x n, in drawing order (already shuffled); default empty
  Matrix<Scalar> means;   ///< d x k component means, scaled like the points; default empty
  Labels components;      ///< the component each point came from; default empty
};

template <typename Scalar>
Task<Scalar> GenerateTask(const TaskOptions& options, uint64_t seed);

}  // namespace kmt

#endif  // KMT_LEARN_TASK_GENERATOR_H_
