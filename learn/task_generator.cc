// Draw order: means, then weights and scales only when asked for, then per
// point its component and d noise draws, so the default options consume the
// Rng exactly as the original generator did.
#include "learn/task_generator.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/random.h"

namespace kmt {
namespace {

constexpr double kEulerGamma = 0.57721566490153286061;

// Uniform on (0, 1): the inverse CDFs below diverge at 0, and Uniform() never
// returns 1.
double OpenUniform(Rng& rng) {
  double u;
  do {
    u = rng.Uniform();
  } while (u <= 0.0);
  return u;
}

// One coordinate of a component with location mu and scale s (Family).
double Draw(Family family, double mu, double s, Rng& rng) {
  switch (family) {
    case Family::kNormal:
      return mu + s * rng.Normal();
    case Family::kLaplace: {
      const double u = OpenUniform(rng);
      return mu + s * (u < 0.5 ? std::log(2.0 * u) : -std::log(2.0 * (1.0 - u)));
    }
    case Family::kGumbel:
      return mu + s * (-std::log(-std::log(OpenUniform(rng))) - kEulerGamma);
    case Family::kLognormal:
      return std::exp(mu + s * rng.Normal());
    case Family::kCauchy:
      return mu + s * std::tan(M_PI * (OpenUniform(rng) - 0.5));
  }
  return 0.0;  // Unreachable; keeps -Wreturn-type quiet.
}

// Cumulative mixture weights proportional to k draws of U(0, 1).
std::vector<double> CumulativeUniformWeights(int k, Rng& rng) {
  std::vector<double> cumulative(k);
  double total = 0.0;
  for (int j = 0; j < k; ++j) {
    total += rng.Uniform();
    cumulative[j] = total;
  }
  for (double& c : cumulative) c /= total;
  return cumulative;
}

}  // namespace

absl::string_view FamilyName(Family family) {
  switch (family) {
    case Family::kNormal:
      return "normal";
    case Family::kLaplace:
      return "laplace";
    case Family::kGumbel:
      return "gumbel";
    case Family::kLognormal:
      return "lognormal";
    case Family::kCauchy:
      return "cauchy";
  }
  return "";  // Unreachable; keeps -Wreturn-type quiet.
}

absl::StatusOr<Family> ParseFamily(absl::string_view name) {
  for (Family f :
       {Family::kNormal, Family::kLaplace, Family::kGumbel, Family::kLognormal, Family::kCauchy}) {
    if (name == FamilyName(f)) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown family '", name, "', expected normal, laplace, gumbel, lognormal or cauchy"));
}

template <typename Scalar>
Task<Scalar> GenerateTask(const TaskOptions& options, uint64_t seed) {
  Rng rng(seed);
  const int d = options.d, k = options.k, n = options.n;
  Matrix<double> means(d, k);
  for (int j = 0; j < k; ++j) {
    for (int l = 0; l < d; ++l) means(l, j) = rng.Uniform();
  }
  std::vector<double> cumulative;
  if (!options.equal_weights) cumulative = CumulativeUniformWeights(k, rng);
  Matrix<double> scales = Matrix<double>::Constant(d, k, options.scale);
  if (!options.isotropic) {
    for (int j = 0; j < k; ++j) {
      for (int l = 0; l < d; ++l) scales(l, j) = options.scale * rng.Uniform();
    }
  }
  Matrix<double> points(d, n);
  Task<Scalar> task;
  task.components.resize(n);
  for (int i = 0; i < n; ++i) {
    int j;
    if (options.equal_weights) {
      j = static_cast<int>(rng.Below(k));
    } else {
      // Clamped because rounding can leave the last cumulative weight below 1.
      j = std::min<int>(std::upper_bound(cumulative.begin(), cumulative.end(), rng.Uniform()) -
                            cumulative.begin(),
                        k - 1);
    }
    task.components[i] = j;
    for (int l = 0; l < d; ++l) points(l, i) = Draw(options.family, means(l, j), scales(l, j), rng);
  }
  if (options.family == Family::kLognormal) {
    // The locations were the logs' means; report the components' means.
    means = (means.array() + scales.array().square() / 2).exp();
  }
  if (options.min_max_scale) {
    for (int l = 0; l < d; ++l) {
      const double lo = points.row(l).minCoeff();
      const double range = points.row(l).maxCoeff() - lo;
      // Dividing (not multiplying by 1 / range) maps the largest value to
      // exactly 1; a constant dimension maps to 0.
      const double divisor = range > 0 ? range : 1.0;
      points.row(l) = (points.row(l).array() - lo) / divisor;
      means.row(l) = (means.row(l).array() - lo) / divisor;
    }
  }
  if (options.unequal_dimensions) {
    for (int l = 0; l < d; ++l) {
      const double scale = 0.5 + 49.5 * rng.Uniform();
      const double offset = -100 + 200 * rng.Uniform();
      points.row(l) = points.row(l).array() * scale + offset;
      means.row(l) = means.row(l).array() * scale + offset;
    }
  }
  task.points = points.cast<Scalar>();
  task.means = means.cast<Scalar>();
  return task;
}

TaskSize DrawTaskSize(const TaskOptions& options, uint64_t seed) {
  Rng rng(seed ^ 0x5eed0fd1e5c0ffeeull);
  const auto draw = [&rng](int most) {
    const int least = std::min(2, most);
    return least + static_cast<int>(rng.Below(most - least + 1));
  };
  TaskSize size;
  size.d = draw(options.d);
  size.k = draw(options.k);
  return size;
}

template Task<float> GenerateTask<float>(const TaskOptions&, uint64_t);
template Task<double> GenerateTask<double>(const TaskOptions&, uint64_t);

}  // namespace kmt
