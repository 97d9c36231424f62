#include "core/minibatch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace kmt {
namespace {

// A value as the job's arrays hold it: a float32 job's rounded to float.
double Stored(double value, bool float64) {
  return float64 ? value : static_cast<double>(static_cast<float>(value));
}

}  // namespace

absl::Status CheckMiniBatch(const MiniBatchRules& rules, int64_t n, const MiniBatchState& state) {
  if (rules.k < 1 || state.centers.cols() != rules.k ||
      state.counts.size() != static_cast<size_t>(rules.k)) {
    return absl::InvalidArgumentError(absl::StrCat("k = ", rules.k, " with ", state.centers.cols(),
                                                   " centers and ", state.counts.size(),
                                                   " counts: needs k >= 1 and k of each"));
  }
  if (rules.batch_size < 1 || rules.batch_size > n || rules.steps < 0 || !(rules.center_tol >= 0) ||
      !(rules.reassignment_ratio >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size ", rules.batch_size, ", steps ", rules.steps, ", center tolerance ",
        rules.center_tol, ", reassignment ratio ", rules.reassignment_ratio, " on n = ", n,
        " points: needs 1 <= batch_size <= n and the others not negative"));
  }
  return absl::OkStatus();
}

std::vector<int> MiniBatchUpdate(const ClusterSums& sums, bool reassign, double reassignment_ratio,
                                 int64_t batch_size, bool float64, MiniBatchState* state) {
  Matrix<double>& centers = state->centers;
  const int k = static_cast<int>(centers.cols());
  std::vector<double>& counts = state->counts;
  for (int j = 0; j < k; ++j) {
    if (!(sums.weights[j] > 0)) continue;
    // As scikit-learn's float32 arrays: the old weight's product and the
    // division in double, the center and its weight each rounded once.
    const double total = counts[j] + sums.weights[j];
    for (Eigen::Index l = 0; l < centers.rows(); ++l) {
      centers(l, j) = Stored((centers(l, j) * counts[j] + sums.sums(l, j)) / total, float64);
    }
    counts[j] = Stored(total, float64);
  }
  std::vector<int> moved;
  if (!reassign || !(reassignment_ratio > 0)) return moved;
  // The threshold in the counts' own precision (numpy compares a float32
  // array with a float64 scalar in float32).
  const double threshold =
      Stored(reassignment_ratio * *std::max_element(counts.begin(), counts.end()), float64);
  std::vector<bool> low(k);
  int64_t chosen = 0;
  for (int j = 0; j < k; ++j) chosen += low[j] = counts[j] < threshold;
  // At most half the batch's points become new centers: the lightest keep
  // their place (ties in the order of a stable sort, where numpy's
  // quicksort may take others).
  const int64_t most = static_cast<int64_t>(0.5 * static_cast<double>(batch_size));
  if (static_cast<double>(chosen) > 0.5 * static_cast<double>(batch_size)) {
    std::vector<int> order(k);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return counts[a] < counts[b]; });
    for (int r = static_cast<int>(std::min<int64_t>(most, k)); r < k; ++r) low[order[r]] = false;
  }
  double least = std::numeric_limits<double>::infinity();
  for (int j = 0; j < k; ++j) {
    if (low[j]) {
      moved.push_back(j);
    } else {
      least = std::min(least, counts[j]);
    }
  }
  // Not so light that they are reassigned again at once.
  for (const int j : moved) counts[j] = least;
  return moved;
}

bool MiniBatchReassigns(int k, int64_t batch_size, MiniBatchState* state) {
  state->since_reassign += batch_size;
  const bool empty =
      std::any_of(state->counts.begin(), state->counts.end(), [](double w) { return w == 0; });
  if (empty || state->since_reassign >= int64_t{10} * k) {
    state->since_reassign = 0;
    return true;
  }
  return false;
}

bool MiniBatchConverged(const MiniBatchRules& rules, int64_t step, int64_t n, double shift,
                        double batch_inertia, MiniBatchState* state, std::string* why) {
  // Per point, to compare batches of any size; the first step's inertia is
  // the initialisation's, left out.
  batch_inertia /= static_cast<double>(rules.batch_size);
  if (step == 0) {
    if (rules.log) {
      rules.log(
          absl::StrCat("Minibatch step 1/", rules.steps, ": mean batch inertia: ", batch_inertia));
    }
    return false;
  }
  if (!state->has_ewa) {
    state->ewa_inertia = batch_inertia;
    state->has_ewa = true;
  } else {
    const double alpha =
        std::min(static_cast<double>(rules.batch_size) * 2.0 / static_cast<double>(n + 1), 1.0);
    state->ewa_inertia = state->ewa_inertia * (1 - alpha) + batch_inertia * alpha;
  }
  if (rules.log) {
    rules.log(absl::StrCat("Minibatch step ", step + 1, "/", rules.steps, ": mean batch inertia: ",
                           batch_inertia, ", ewa inertia: ", state->ewa_inertia));
  }
  if (rules.center_tol > 0 && shift <= rules.center_tol) {
    *why = "small centers change";
    return true;
  }
  if (step == 1 || state->ewa_inertia < state->ewa_inertia_min) {
    state->no_improvement = 0;
    state->ewa_inertia_min = state->ewa_inertia;
  } else {
    ++state->no_improvement;
  }
  if (rules.max_no_improvement >= 0 && state->no_improvement >= rules.max_no_improvement) {
    *why = "lack of improvement in inertia";
    return true;
  }
  return false;
}

absl::Status RunMiniBatchSteps(const MiniBatchRules& rules, int64_t n, const MiniBatchSums& sums,
                               const MiniBatchRows& fetch, const StopCheck& check,
                               MiniBatchState* state) {
  if (absl::Status s = CheckMiniBatch(rules, n, *state); !s.ok()) return s;
  for (Eigen::Index i = 0; i < state->centers.size(); ++i) {
    state->centers.data()[i] = Stored(state->centers.data()[i], rules.float64);
  }
  for (int64_t step = 0; step < rules.steps; ++step) {
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    const std::vector<int64_t> rows = state->random.RandInt(0, n, rules.batch_size);
    double inertia = 0;
    absl::StatusOr<ClusterSums> batch = sums(rows, state->centers, &inertia);
    if (!batch.ok()) return batch.status();
    const bool reassign = MiniBatchReassigns(rules.k, rules.batch_size, state);
    const Matrix<double> before = rules.center_tol > 0 ? state->centers : Matrix<double>();
    const std::vector<int> moved = MiniBatchUpdate(*batch, reassign, rules.reassignment_ratio,
                                                   rules.batch_size, rules.float64, state);
    if (!moved.empty()) {
      // New centers among the batch's points, uniformly, without
      // replacement (scikit-learn's random_state.choice on the batch).
      const std::vector<int64_t> picks = state->random.ChoiceWithoutReplacement(
          rules.batch_size, static_cast<int64_t>(moved.size()));
      std::vector<int64_t> picked(picks.size());
      for (size_t i = 0; i < picks.size(); ++i) picked[i] = rows[picks[i]];
      absl::StatusOr<Matrix<double>> points = fetch(picked);
      if (!points.ok()) return points.status();
      for (size_t i = 0; i < moved.size(); ++i) state->centers.col(moved[i]) = points->col(i);
      state->reassigned += static_cast<int64_t>(moved.size());
      if (rules.log) {
        rules.log(
            absl::StrCat("[MiniBatchKMeans] Reassigning ", moved.size(), " cluster centers."));
      }
    }
    const double shift = rules.center_tol > 0 ? (state->centers - before).squaredNorm() : 0.0;
    state->steps_run = step + 1;
    std::string why;
    if (MiniBatchConverged(rules, step, n, shift, inertia, state, &why)) {
      if (rules.log) {
        rules.log(absl::StrCat("Converged (", why, ") at step ", step + 1, "/", rules.steps));
      }
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace kmt
