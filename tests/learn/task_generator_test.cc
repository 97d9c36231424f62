// The generator keeps old seeds' tasks (the tests' Gaussian clusters are its
// default tasks) and draws each family, weighting and scaling option with the
// intended shape.
#include "learn/task_generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "core/random.h"
#include "tests/support/gaussian_clusters.h"

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

// Point minus its component mean, for every coordinate: the drawn noise of
// an additive family when the task is not min-max scaled.
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

// The tests' problems without the trainer are the default tasks.
TEST(TaskGenerator, DefaultTasksAreTheTestSupportsGaussianClusters) {
  for (bool min_max_scale : {false, true}) {
    SCOPED_TRACE(testing::Message() << "min_max_scale=" << min_max_scale);
    const Task<double> task = GenerateTask<double>(
        {.n = 300, .d = 5, .k = 7, .scale = 0.2, .min_max_scale = min_max_scale}, 23);
    const Clusters<double> clusters = GaussianClusters<double>(
        {.n = 300, .d = 5, .k = 7, .scale = 0.2, .min_max_scale = min_max_scale}, 23);
    EXPECT_EQ(clusters.points, task.points);
    EXPECT_EQ(clusters.components, task.components);
  }
  EXPECT_EQ(GaussianClusters<float>({.n = 300, .d = 5, .k = 7}, 24).points,
            GenerateTask<float>({.n = 300, .d = 5, .k = 7}, 24).points);
}

TEST(TaskGenerator, EachAdditiveFamilyHasItsCentredLocationAndSpread) {
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
      {Family::kCauchy, 0.0, 2.0, false},
  };
  const double scale = 0.5;
  for (const Expected& e : expected) {
    SCOPED_TRACE(FamilyName(e.family));
    const std::vector<double> noise = Noise(GenerateTask<double>(
        {.n = 100000, .d = 1, .k = 1, .scale = scale, .min_max_scale = false, .family = e.family},
        5));
    // Standard errors at n = 100000 are at most ~0.005; the tolerances allow
    // about four of them.
    EXPECT_NEAR(Quantile(noise, 0.5) / scale, e.median, 0.02);
    EXPECT_NEAR((Quantile(noise, 0.75) - Quantile(noise, 0.25)) / scale, e.iqr, 0.03 * e.iqr);
    if (e.has_mean) {
      EXPECT_NEAR(Mean(noise) / scale, 0.0, 0.03);
    }
  }
}

TEST(TaskGenerator, LognormalPointsAreTheExpOfANormalAroundTheLocation) {
  // One component: the log of every coordinate is N(mu, s^2), so every point
  // is positive and the component's mean is exp(mu + s^2 / 2).
  const double scale = 0.5;
  const Task<double> task = GenerateTask<double>({.n = 100000,
                                                  .d = 2,
                                                  .k = 1,
                                                  .scale = scale,
                                                  .min_max_scale = false,
                                                  .family = Family::kLognormal},
                                                 5);
  EXPECT_GT(task.points.minCoeff(), 0.0);
  for (int l = 0; l < 2; ++l) {
    SCOPED_TRACE(l);
    // mu recovered from the reported mean.
    const double mu = std::log(task.means(l, 0)) - scale * scale / 2;
    EXPECT_GE(mu, 0.0);
    EXPECT_LT(mu, 1.0);
    std::vector<double> z, x;
    for (Eigen::Index i = 0; i < task.points.cols(); ++i) {
      x.push_back(task.points(l, i));
      z.push_back((std::log(task.points(l, i)) - mu) / scale);
    }
    // Standard normal: standard errors at n = 100000 are about 0.003 for the
    // mean, 0.0022 for the sd and 0.004 for a quartile; the tolerances allow
    // about four of them.
    EXPECT_NEAR(Mean(z), 0.0, 0.013);
    EXPECT_NEAR(StandardDeviation(z), 1.0, 0.01);
    EXPECT_NEAR(Quantile(z, 0.25), -0.6744897501960817, 0.016);
    EXPECT_NEAR(Quantile(z, 0.75), 0.6744897501960817, 0.016);
    // The points themselves are skewed: mean above median, by a factor
    // exp(s^2 / 2) ~ 1.13.
    EXPECT_NEAR(Mean(x) / task.means(l, 0), 1.0, 0.01);
    EXPECT_NEAR(Mean(x) / Quantile(x, 0.5), std::exp(scale * scale / 2), 0.01);
  }
}

TEST(TaskGenerator, LognormalSpreadGrowsWithTheLocationAdditiveSpreadDoesNot) {
  // Noise that multiplies exp(mu): every component has the same ratio of
  // standard deviation to mean, sqrt(exp(s^2) - 1), whatever its location,
  // so the spread differs between components; with additive noise every
  // component has the same standard deviation. Twenty components in one
  // dimension spread their lognormal means over [1, e].
  const double scale = 0.1;
  const int k = 20;
  for (Family family : {Family::kLognormal, Family::kNormal}) {
    SCOPED_TRACE(FamilyName(family));
    const Task<double> task = GenerateTask<double>(
        {.n = 200000, .d = 1, .k = k, .scale = scale, .min_max_scale = false, .family = family}, 6);
    std::vector<std::vector<double>> per(k);
    for (Eigen::Index i = 0; i < task.points.cols(); ++i) {
      per[task.components[i]].push_back(task.points(0, i));
    }
    double lowest_cv = INFINITY, highest_cv = 0.0, lowest_sd = INFINITY, highest_sd = 0.0;
    for (int j = 0; j < k; ++j) {
      const double sd = StandardDeviation(per[j]);
      lowest_sd = std::min(lowest_sd, sd);
      highest_sd = std::max(highest_sd, sd);
      // Only meaningful for the positive lognormal points.
      lowest_cv = std::min(lowest_cv, sd / Mean(per[j]));
      highest_cv = std::max(highest_cv, sd / Mean(per[j]));
    }
    // About 10000 points per component: a sample sd is within ~3% (four
    // standard errors) of its value.
    if (family == Family::kLognormal) {
      const double cv = std::sqrt(std::exp(scale * scale) - 1);
      EXPECT_GT(lowest_cv, 0.97 * cv);
      EXPECT_LT(highest_cv, 1.03 * cv);
      EXPECT_GT(highest_sd / lowest_sd, 1.5);
    } else {
      EXPECT_GT(lowest_sd, 0.97 * scale);
      EXPECT_LT(highest_sd, 1.03 * scale);
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

// The generator's draws after the d x k means: the next `count` uniforms.
std::vector<double> UniformsAfterMeans(uint64_t seed, int d, int k, int count) {
  Rng rng(seed);
  for (int i = 0; i < d * k; ++i) rng.Uniform();
  std::vector<double> u(count);
  for (double& x : u) x = rng.Uniform();
  return u;
}

TEST(TaskGenerator, UnequalWeightsAreProportionalToUniformDrawsEqualWeightsAreEqual) {
  const int n = 20000, d = 2, k = 5;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    SCOPED_TRACE(seed);
    const TaskOptions equal{.n = n, .d = d, .k = k};
    // Binomial(n, 1/k) standard deviation is about 57.
    const double sd = std::sqrt(n * (1.0 / k) * (1.0 - 1.0 / k));
    for (int c : Counts(GenerateTask<double>(equal, seed), k)) {
      EXPECT_NEAR(c, n / k, 4 * sd);
    }
    TaskOptions unequal = equal;
    unequal.equal_weights = false;
    // The weights: k uniforms drawn after the means, normalised.
    const std::vector<double> u = UniformsAfterMeans(seed, d, k, k);
    double total = 0.0;
    for (double x : u) total += x;
    const std::vector<int> counts = Counts(GenerateTask<double>(unequal, seed), k);
    for (int j = 0; j < k; ++j) {
      const double w = u[j] / total;
      EXPECT_NEAR(counts[j], n * w, 4 * std::sqrt(n * w * (1 - w)) + 1) << "component " << j;
    }
  }
}

TEST(TaskGenerator, AnisotropicScalesAreScaleTimesUniformPerComponentAndDimension) {
  const int d = 4, k = 3;
  const double scale = 0.2;
  const uint64_t seed = 3;
  // The scales: d x k uniforms drawn after the means, component by component.
  const std::vector<double> u = UniformsAfterMeans(seed, d, k, d * k);
  for (bool isotropic : {true, false}) {
    SCOPED_TRACE(isotropic ? "isotropic" : "anisotropic");
    const Task<double> task = GenerateTask<double>({.n = 30000,
                                                    .d = d,
                                                    .k = k,
                                                    .scale = scale,
                                                    .min_max_scale = false,
                                                    .isotropic = isotropic},
                                                   seed);
    double lowest = INFINITY, highest = 0.0;
    for (int j = 0; j < k; ++j) {
      for (int l = 0; l < d; ++l) {
        SCOPED_TRACE(testing::Message() << "component " << j << " dimension " << l);
        std::vector<double> noise;
        for (int i = 0; i < task.points.cols(); ++i) {
          if (task.components[i] == j) noise.push_back(task.points(l, i) - task.means(l, j));
        }
        // About 10000 points per component: each sample sd is within ~3%
        // (four standard errors) of its scale.
        const double sd = StandardDeviation(noise);
        const double expected = isotropic ? scale : scale * u[j * d + l];
        EXPECT_NEAR(sd / expected, 1.0, 0.03);
        lowest = std::min(lowest, sd / scale);
        highest = std::max(highest, sd / scale);
      }
    }
    if (!isotropic) {
      // Scale times U(0, 1): never above the scale, and spread over (0, 1).
      EXPECT_LT(highest, 1.03);
      EXPECT_LT(lowest, 0.5);
      EXPECT_GT(highest, 0.5);
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

TEST(TaskGenerator, UnequalDimensionsScaleAndShiftEachDimensionOfTheSameTask) {
  const TaskOptions options{.n = 300, .d = 8, .k = 3};
  TaskOptions unequal = options;
  unequal.unequal_dimensions = true;
  const Task<double> base = GenerateTask<double>(options, 4);
  const Task<double> task = GenerateTask<double>(unequal, 4);
  EXPECT_EQ(task.components, base.components);
  double smallest = 1e9, largest = 0;
  for (int l = 0; l < options.d; ++l) {
    SCOPED_TRACE(l);
    // The min-max scaled dimension spans [0, 1]: its image spans [offset,
    // offset + scale].
    const double offset = task.points.row(l).minCoeff();
    const double scale = task.points.row(l).maxCoeff() - offset;
    EXPECT_GE(scale, 0.5);
    EXPECT_LE(scale, 50);
    EXPECT_GE(offset, -100);
    EXPECT_LE(offset, 100);
    for (int i = 0; i < options.n; ++i) {
      EXPECT_NEAR(task.points(l, i), offset + scale * base.points(l, i), 1e-9);
    }
    smallest = std::min(smallest, scale);
    largest = std::max(largest, scale);
  }
  EXPECT_GT(largest / smallest, 2);
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

TEST(TaskGenerator, RandomSizesCoverTwoToTheMostAndDependOnTheSeedAlone) {
  const TaskOptions options{.d = 6, .k = 4};
  std::set<int> ds, ks;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const TaskSize size = DrawTaskSize(options, seed);
    ds.insert(size.d);
    ks.insert(size.k);
    EXPECT_EQ(DrawTaskSize(options, seed).d, size.d);
    EXPECT_EQ(DrawTaskSize(options, seed).k, size.k);
  }
  EXPECT_EQ(ds, (std::set<int>{2, 3, 4, 5, 6}));
  EXPECT_EQ(ks, (std::set<int>{2, 3, 4}));
  EXPECT_EQ(DrawTaskSize({.d = 1, .k = 1}, 7).d, 1);
  EXPECT_EQ(DrawTaskSize({.d = 1, .k = 1}, 7).k, 1);
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
