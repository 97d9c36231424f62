// The generator keeps old seeds' tasks and draws each family, weighting and
// scaling option with the intended shape.
#include "learn/task_generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/random.h"

namespace kmt {
namespace {

constexpr Family kFamilies[] = {Family::kNormal, Family::kLaplace, Family::kGumbel,
                                Family::kLognormal, Family::kCauchy};

// Sample quantile by nearest rank; enough for checks far looser than a rank.
double Quantile(std::vector<double> values, double p) {
  const size_t rank = static_cast<size_t>(p * (values.size() - 1));
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}

double Mean(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / values.size();
}

double StandardDeviation(const std::vector<double>& values) {
  const double mean = Mean(values);
  double sum = 0.0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return std::sqrt(sum / (values.size() - 1));
}

// Point minus its component mean, for every coordinate: the drawn noise when
// the task is not min-max scaled.
std::vector<double> Noise(const Task<double>& task) {
  std::vector<double> noise;
  for (Eigen::Index i = 0; i < task.points.cols(); ++i) {
    for (Eigen::Index l = 0; l < task.points.rows(); ++l) {
      noise.push_back(task.points(l, i) - task.means(l, task.components[i]));
    }
  }
  return noise;
}

std::vector<int> Counts(const Task<double>& task, int k) {
  std::vector<int> counts(k);
  for (int j : task.components) ++counts[j];
  return counts;
}

TEST(TaskGenerator, DefaultOptionsDrawTheOriginalNormalMixture) {
  const int n = 200, d = 3, k = 4;
  const double scale = 0.1;
  const uint64_t seed = 17;
  // The original generator written out plainly.
  Rng rng(seed);
  Matrix<double> means(d, k), points(d, n);
  Labels components(n);
  for (int j = 0; j < k; ++j) {
    for (int l = 0; l < d; ++l) means(l, j) = rng.Uniform();
  }
  for (int i = 0; i < n; ++i) {
    components[i] = static_cast<int>(rng.Below(k));
    for (int l = 0; l < d; ++l) points(l, i) = means(l, components[i]) + scale * rng.Normal();
  }
  const Task<double> raw =
      GenerateTask<double>({.n = n, .d = d, .k = k, .scale = scale, .min_max_scale = false}, seed);
  EXPECT_EQ(raw.components, components);
  EXPECT_EQ(raw.points, points);
  EXPECT_EQ(raw.means, means);

  for (int l = 0; l < d; ++l) {
    double lo = points(l, 0), hi = points(l, 0);
    for (int i = 0; i < n; ++i) {
      lo = std::min(lo, points(l, i));
      hi = std::max(hi, points(l, i));
    }
    for (int i = 0; i < n; ++i) points(l, i) = (points(l, i) - lo) / (hi - lo);
    for (int j = 0; j < k; ++j) means(l, j) = (means(l, j) - lo) / (hi - lo);
  }
  const Task<double> scaled = GenerateTask<double>({.n = n, .d = d, .k = k, .scale = scale}, seed);
  EXPECT_EQ(scaled.components, components);
  EXPECT_EQ(scaled.points, points);
  EXPECT_EQ(scaled.means, means);
  const Task<float> single = GenerateTask<float>({.n = n, .d = d, .k = k, .scale = scale}, seed);
  EXPECT_EQ(single.points, points.cast<float>());
  EXPECT_EQ(single.means, means.cast<float>());
}

TEST(TaskGenerator, EachFamilyHasItsCentredLocationAndSpread) {
  struct Expected {
    Family family;
    double median;  // of the unscaled noise
    double iqr;     // upper minus lower quartile of the unscaled noise
    bool has_mean;  // centred to mean 0
  };
  const double gamma = 0.57721566490153286061, z75 = 0.6744897501960817;
  const Expected expected[] = {
      {Family::kNormal, 0.0, 2 * z75, true},
      {Family::kLaplace, 0.0, 2 * std::log(2.0), true},
      {Family::kGumbel, -std::log(std::log(2.0)) - gamma,
       std::log(std::log(4.0)) - std::log(-std::log(0.75)), true},
      {Family::kLognormal, 1.0 - std::exp(0.5), std::exp(z75) - std::exp(-z75), true},
      {Family::kCauchy, 0.0, 2.0, false},
  };
  const double scale = 0.5;
  for (const Expected& e : expected) {
    SCOPED_TRACE(FamilyName(e.family));
    const std::vector<double> noise = Noise(GenerateTask<double>(
        {.n = 100000, .d = 1, .k = 1, .scale = scale, .min_max_scale = false, .family = e.family},
        5));
    // Standard errors at n = 100000 are at most ~0.007 (lognormal mean); the
    // tolerances allow about four of them.
    EXPECT_NEAR(Quantile(noise, 0.5) / scale, e.median, 0.02);
    EXPECT_NEAR((Quantile(noise, 0.75) - Quantile(noise, 0.25)) / scale, e.iqr, 0.03 * e.iqr);
    if (e.has_mean) {
      EXPECT_NEAR(Mean(noise) / scale, 0.0, 0.03);
    }
  }
}

TEST(TaskGenerator, CauchyNoiseHasAHeavyTailNormalNoiseDoesNot) {
  const double scale = 0.1;
  for (Family family : {Family::kCauchy, Family::kNormal}) {
    SCOPED_TRACE(FamilyName(family));
    const std::vector<double> noise = Noise(GenerateTask<double>(
        {.n = 100000, .d = 1, .k = 1, .scale = scale, .min_max_scale = false, .family = family},
        8));
    const auto far = std::count_if(noise.begin(), noise.end(),
                                   [&](double x) { return std::abs(x) > 50 * scale; });
    // P(|Cauchy| > 50) = 2 atan(1/50) / pi ~ 1.3%, about 1270 of 100000.
    if (family == Family::kCauchy) {
      EXPECT_GT(far, 1000);
    } else {
      EXPECT_EQ(far, 0);
    }
  }
}

TEST(TaskGenerator, UnequalWeightsGiveUnequalCountsEqualWeightsDoNot) {
  const int n = 10000, k = 5;
  // Binomial(n, 1/k) standard deviation is 40.
  const double sd = std::sqrt(n * (1.0 / k) * (1.0 - 1.0 / k));
  bool some_unequal = false;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    SCOPED_TRACE(seed);
    const TaskOptions equal{.n = n, .d = 2, .k = k};
    for (int c : Counts(GenerateTask<double>(equal, seed), k)) {
      EXPECT_NEAR(c, n / k, 4 * sd);
    }
    TaskOptions unequal = equal;
    unequal.equal_weights = false;
    const std::vector<int> counts = Counts(GenerateTask<double>(unequal, seed), k);
    const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
    if (*hi - *lo > 20 * sd) some_unequal = true;
  }
  EXPECT_TRUE(some_unequal);
}

TEST(TaskGenerator, AnisotropicScalesDifferPerComponent) {
  const int d = 4, k = 3;
  const double scale = 0.2;
  for (bool isotropic : {true, false}) {
    SCOPED_TRACE(isotropic ? "isotropic" : "anisotropic");
    const Task<double> task = GenerateTask<double>({.n = 30000,
                                                    .d = d,
                                                    .k = k,
                                                    .scale = scale,
                                                    .min_max_scale = false,
                                                    .isotropic = isotropic},
                                                   3);
    double lowest = INFINITY, highest = 0.0;
    for (int j = 0; j < k; ++j) {
      for (int l = 0; l < d; ++l) {
        std::vector<double> noise;
        for (int i = 0; i < task.points.cols(); ++i) {
          if (task.components[i] == j) noise.push_back(task.points(l, i) - task.means(l, j));
        }
        const double sd = StandardDeviation(noise) / scale;
        lowest = std::min(lowest, sd);
        highest = std::max(highest, sd);
      }
    }
    // About 10000 points per component: each sample sd is within ~4% of its
    // scale.
    if (isotropic) {
      EXPECT_GT(lowest, 0.96);
      EXPECT_LT(highest, 1.04);
    } else {
      EXPECT_GT(lowest, 0.5 * 0.96);
      EXPECT_LT(highest, 1.5 * 1.04);
      EXPECT_GT(highest / lowest, 1.3);
    }
  }
}

TEST(TaskGenerator, MinMaxScalingMapsEveryDimensionOntoZeroOne) {
  for (Family family : kFamilies) {
    SCOPED_TRACE(FamilyName(family));
    const TaskOptions options{
        .n = 1000, .d = 6, .k = 4, .family = family, .equal_weights = false, .isotropic = false};
    const Task<double> scaled = GenerateTask<double>(options, 21);
    const Task<float> single = GenerateTask<float>(options, 21);
    TaskOptions raw_options = options;
    raw_options.min_max_scale = false;
    const Task<double> raw = GenerateTask<double>(raw_options, 21);
    EXPECT_EQ(scaled.components, raw.components);
    EXPECT_GE(scaled.points.minCoeff(), 0.0);
    EXPECT_LE(scaled.points.maxCoeff(), 1.0);
    for (int l = 0; l < options.d; ++l) {
      SCOPED_TRACE(l);
      EXPECT_EQ(scaled.points.row(l).minCoeff(), 0.0);
      EXPECT_EQ(scaled.points.row(l).maxCoeff(), 1.0);
      EXPECT_EQ(single.points.row(l).minCoeff(), 0.0f);
      EXPECT_EQ(single.points.row(l).maxCoeff(), 1.0f);
      // Means move with the points: the same affine map of the raw task.
      const double lo = raw.points.row(l).minCoeff();
      const double range = raw.points.row(l).maxCoeff() - lo;
      for (int i = 0; i < options.n; ++i) {
        EXPECT_NEAR(scaled.points(l, i), (raw.points(l, i) - lo) / range, 1e-12);
      }
      for (int j = 0; j < options.k; ++j) {
        EXPECT_NEAR(scaled.means(l, j), (raw.means(l, j) - lo) / range, 1e-12);
      }
    }
  }
}

TEST(TaskGenerator, SameSeedSameTaskDifferentSeedDifferentTask) {
  for (Family family : kFamilies) {
    for (bool equal_weights : {true, false}) {
      for (bool isotropic : {true, false}) {
        SCOPED_TRACE(testing::Message() << FamilyName(family) << " equal_weights=" << equal_weights
                                        << " isotropic=" << isotropic);
        const TaskOptions options{.n = 300,
                                  .d = 4,
                                  .k = 5,
                                  .family = family,
                                  .equal_weights = equal_weights,
                                  .isotropic = isotropic};
        const Task<float> a = GenerateTask<float>(options, 9);
        const Task<float> b = GenerateTask<float>(options, 9);
        const Task<float> c = GenerateTask<float>(options, 10);
        EXPECT_EQ(a.points, b.points);
        EXPECT_EQ(a.means, b.means);
        EXPECT_EQ(a.components, b.components);
        EXPECT_NE(a.points, c.points);
        EXPECT_NE(a.means, c.means);
        EXPECT_NE(a.components, c.components);
      }
    }
  }
}

TEST(TaskGenerator, ParseFamilyRoundTripsAndRejectsUnknownNames) {
  for (Family family : kFamilies) {
    SCOPED_TRACE(FamilyName(family));
    const absl::StatusOr<Family> parsed = ParseFamily(FamilyName(family));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, family);
  }
  const absl::StatusOr<Family> unknown = ParseFamily("x");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(),
            "unknown family 'x', expected normal, laplace, gumbel, lognormal or cauchy");
}

}  // namespace
}  // namespace kmt
