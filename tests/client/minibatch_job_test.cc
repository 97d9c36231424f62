// The mini-batch driver (client/minibatch_job.h) and its rules
// (core/minibatch.h) over shards held in memory, answered by plain loops:
// the steps against scikit-learn's algorithm written out on all points
// with the same draws, a batch split over shards, the reassignment rule and
// the stopping rules.
#include "client/minibatch_job.h"

#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <vector>

#include "client/resident_job.h"
#include "core/random.h"
#include "proto/job_matrices.h"
#include "proto/raw_payload.h"

namespace kmt {
namespace {

// The nearest center of `x` (ties: the lower index) and its squared distance.
std::pair<int, double> Nearest(const Matrix<double>& centers, const Vector<double>& x) {
  int best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int j = 0; j < centers.cols(); ++j) {
    const double distance = (centers.col(j) - x).squaredNorm();
    if (distance < best_distance) best = j, best_distance = distance;
  }
  return {best, best_distance};
}

// Float64 shards of `points` (d x n) split at `splits`, answering
// sample-sums steps by plain loops.
class MemoryShards : public ShardSet {
 public:
  MemoryShards(const Matrix<double>& points, std::vector<int64_t> sizes)
      : points_(points), sizes_(std::move(sizes)) {}
  std::vector<int64_t> Sizes() const override { return sizes_; }
  absl::StatusOr<std::vector<v1::JobResponse>> Round(
      const std::vector<std::optional<v1::JobRequest>>& requests) override {
    const std::vector<int64_t> firsts = ShardFirsts(sizes_);
    const int d = static_cast<int>(points_.rows());
    std::vector<v1::JobResponse> answers(requests.size());
    for (size_t s = 0; s < requests.size(); ++s) {
      if (!requests[s]) continue;
      ++asked_;
      const v1::SampleSumsStep& step = requests[s]->sample_sums();
      EXPECT_TRUE(requests[s]->has_sample_sums());
      const int k = step.k();
      Matrix<double> centers(d, k);
      if (k > 0) DecodeFloat64(step.centers_f64(), centers.data());
      ClusterSums sums(d, k);
      double objective = 0;
      for (const int64_t row : step.rows()) {
        EXPECT_LT(row, sizes_[s]);
        const Vector<double> x = points_.col(firsts[s] + row);
        const auto [j, distance] = Nearest(centers, x);
        sums.sums.col(j) += x;
        ++sums.counts[j];
        objective += distance;
      }
      if (k > 0) {
        answers[s].set_objective(objective);
        answers[s].mutable_center_counts()->Add(sums.counts.begin(), sums.counts.end());
        answers[s].mutable_center_sums()->Add(sums.sums.data(),
                                              sums.sums.data() + sums.sums.size());
      }
      Matrix<double> fetched(d, step.fetch_rows_size());
      for (int i = 0; i < step.fetch_rows_size(); ++i) {
        fetched.col(i) = points_.col(firsts[s] + step.fetch_rows(i));
      }
      if (fetched.cols() > 0) WriteMatrix(fetched, wire::Points(&answers[s]));
    }
    return answers;
  }
  absl::Status Restart() override { return absl::OkStatus(); }
  int moves() const override { return 0; }
  int asked() const { return asked_; }

 private:
  const Matrix<double>& points_;
  std::vector<int64_t> sizes_;
  int asked_ = 0;
};

// scikit-learn 1.2's MiniBatchKMeans.fit after its initialisation, on all
// points at once, in double; returns the centers and sets `steps`.
Matrix<double> ScikitLearnSteps(const Matrix<double>& points, Matrix<double> centers,
                                const MiniBatchRules& options, NumpyRandomState* random,
                                int64_t* steps) {
  const int64_t n = points.cols();
  const int k = static_cast<int>(centers.cols());
  std::vector<double> counts(k, 0);
  int64_t since = 0;
  *steps = 0;
  for (int64_t step = 0; step < options.steps; ++step) {
    const std::vector<int64_t> rows = random->RandInt(0, n, options.batch_size);
    since += options.batch_size;
    bool reassign = since >= 10 * k;
    for (const double w : counts) reassign |= w == 0;
    if (reassign) since = 0;
    Matrix<double> sums = Matrix<double>::Zero(points.rows(), k);
    std::vector<double> mass(k, 0);
    for (const int64_t row : rows) {
      const int j = Nearest(centers, points.col(row)).first;
      sums.col(j) += points.col(row);
      ++mass[j];
    }
    for (int j = 0; j < k; ++j) {
      if (mass[j] == 0) continue;
      centers.col(j) = (centers.col(j) * counts[j] + sums.col(j)) / (counts[j] + mass[j]);
      counts[j] += mass[j];
    }
    if (reassign) {
      const double top = *std::max_element(counts.begin(), counts.end());
      std::vector<int> low;
      double least = std::numeric_limits<double>::infinity();
      for (int j = 0; j < k; ++j) {
        if (counts[j] < options.reassignment_ratio * top) {
          low.push_back(j);
        } else {
          least = std::min(least, counts[j]);
        }
      }
      if (!low.empty()) {
        const std::vector<int64_t> picks =
            random->ChoiceWithoutReplacement(options.batch_size, static_cast<int64_t>(low.size()));
        for (size_t i = 0; i < low.size(); ++i) {
          centers.col(low[i]) = points.col(rows[picks[i]]);
          counts[low[i]] = least;
        }
      }
    }
    *steps = step + 1;
  }
  return centers;
}

TEST(MiniBatchJob, StepsAreScikitLearnsOverShards) {
  constexpr int kD = 3, kK = 5;
  Rng rng(3);
  Matrix<double> points(kD, 900);
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    for (int l = 0; l < kD; ++l) points(l, i) = static_cast<double>(i % 7) + rng.Normal() * 0.3;
  }
  MiniBatchOptions options{.rules = {.k = kK,
                                     .batch_size = 64,
                                     .steps = 60,
                                     .max_no_improvement = -1,
                                     // Large enough that some steps reassign.
                                     .reassignment_ratio = 0.3,
                                     .float64 = true},
                           .random = NumpyRandomState(11),
                           .labels = false};
  // Every start at one place: the others take in nothing at first.
  options.centers = points.leftCols(kK);
  options.centers.col(3) = Vector<double>::Constant(kD, 50.0);
  MemoryShards shards(points, {300, 250, 350});
  absl::StatusOr<MiniBatchResult> got = RunMiniBatchJob(options, kD, shards);
  ASSERT_TRUE(got.ok()) << got.status();
  int64_t steps = 0;
  NumpyRandomState random = options.random;
  const Matrix<double> want =
      ScikitLearnSteps(points, options.centers, options.rules, &random, &steps);
  EXPECT_EQ(got->state.steps_run, steps);
  EXPECT_GT(got->state.reassigned, 0);
  EXPECT_LT((got->state.centers - want).cwiseAbs().maxCoeff(), 1e-12);
  // The stream is where scikit-learn's is, for the draws after the fit.
  EXPECT_EQ(got->state.random.pos(), random.pos());
  EXPECT_EQ(got->state.random.NextUint32(), random.NextUint32());
  EXPECT_GE(shards.asked(), 60);
}

TEST(MiniBatchJob, ReassignsTheLightCentersAtMostHalfTheBatch) {
  ClusterSums sums(1, 4);  // nothing taken in this step
  MiniBatchState state{.centers = Matrix<double>::Zero(1, 4), .counts = {100, 0.5, 3, 0.25}};
  // Below 0.01 * 100: centers 1 and 3; at most 0.5 * 2 = 1 of them: the
  // lighter, 3.
  EXPECT_EQ(MiniBatchUpdate(sums, true, 0.01, 2, true, &state), std::vector<int>{3});
  EXPECT_EQ(state.counts, (std::vector<double>{100, 0.5, 3, 0.5}));
  state.counts = {100, 0.5, 3, 0.25};
  EXPECT_EQ(MiniBatchUpdate(sums, true, 0.01, 100, true, &state), (std::vector<int>{1, 3}));
  EXPECT_EQ(state.counts, (std::vector<double>{100, 3, 3, 3}));
  EXPECT_TRUE(MiniBatchUpdate(sums, false, 0.01, 100, true, &state).empty());
}

TEST(MiniBatchJob, UpdateIsSculleysRateRoundedForFloat32) {
  ClusterSums sums(1, 2);
  sums.sums(0, 0) = 1.0;  // one point at 1 for center 0, none for center 1
  sums.counts = {1, 0};
  sums.weights = {1, 0};
  MiniBatchState state{.centers = Matrix<double>(1, 2), .counts = {2, 5}};
  state.centers << 0.1f, 7;
  MiniBatchUpdate(sums, false, 0, 10, false, &state);
  EXPECT_EQ(state.centers(0, 0),
            static_cast<double>(static_cast<float>((double{0.1f} * 2 + 1) / 3)));
  EXPECT_EQ(state.centers(0, 1), 7);
  EXPECT_EQ(state.counts, (std::vector<double>{3, 5}));
}

TEST(MiniBatchJob, StopsAfterMaxNoImprovementSteps) {
  MiniBatchRules options{.batch_size = 10, .steps = 100, .max_no_improvement = 3};
  MiniBatchState state;
  std::string why;
  // Step 0 is the initialisation's inertia; the smoothed inertia falls at
  // steps 1 and 2, then stays.
  const std::vector<double> inertias = {50, 40, 30, 30, 30, 30};
  int stopped = -1;
  for (int step = 0; step < static_cast<int>(inertias.size()); ++step) {
    if (MiniBatchConverged(options, step, 9, 0, inertias[step], &state, &why)) {
      stopped = step;
      break;
    }
  }
  EXPECT_EQ(stopped, 5);
  EXPECT_EQ(why, "lack of improvement in inertia");
}

TEST(MiniBatchJob, RefusesABatchLargerThanTheData) {
  Matrix<double> points = Matrix<double>::Zero(2, 10);
  MemoryShards shards(points, {10});
  MiniBatchOptions options{.rules = {.k = 2, .batch_size = 11, .steps = 1, .float64 = true}};
  options.centers = Matrix<double>::Zero(2, 2);
  absl::StatusOr<MiniBatchResult> got = RunMiniBatchJob(options, 2, shards);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(),
            "batch_size 11, steps 1, center tolerance 0, reassignment ratio 0.01 on n = 10 "
            "points: needs 1 <= batch_size <= n and the others not negative");
}

}  // namespace
}  // namespace kmt
