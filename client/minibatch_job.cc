#include "client/minibatch_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/resident_job.h"

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A value as the job's arrays hold it: a float32 job's rounded to float.
double Stored(double value, bool float64) {
  return float64 ? value : static_cast<double>(static_cast<float>(value));
}

// The centers as a step sends them, in the job's precision.
void PutCenters(const Matrix<double>& centers, bool float64, v1::SampleSumsStep* step) {
  if (float64) {
    PutBytes(centers, step->mutable_centers_f32(), step->mutable_centers_f64());
  } else {
    PutBytes(Matrix<float>(centers.cast<float>()), step->mutable_centers_f32(),
             step->mutable_centers_f64());
  }
}

// Rows of the dataset split by shard: per shard, the rows within it, in the
// order given, and where each sits in that order.
struct ShardRows {
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<int64_t>> at;
};

ShardRows SplitRows(const std::vector<int64_t>& firsts, const std::vector<int64_t>& rows) {
  ShardRows out;
  out.rows.resize(firsts.size());
  out.at.resize(firsts.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t s = std::upper_bound(firsts.begin(), firsts.end(), rows[i]) - firsts.begin() - 1;
    out.rows[s].push_back(rows[i] - firsts[s]);
    out.at[s].push_back(static_cast<int64_t>(i));
  }
  return out;
}

// The points of dataset rows `rows` (d x rows.size()), each from its shard.
absl::StatusOr<Matrix<double>> FetchRows(ShardSet& shards, const std::vector<int64_t>& firsts,
                                         const std::vector<int64_t>& rows, int d, bool float64) {
  const ShardRows split = SplitRows(firsts, rows);
  std::vector<std::optional<v1::JobRequest>> requests(firsts.size());
  for (size_t s = 0; s < firsts.size(); ++s) {
    if (split.rows[s].empty()) continue;
    v1::JobRequest request;
    request.mutable_sample_sums()->mutable_fetch_rows()->Assign(split.rows[s].begin(),
                                                                split.rows[s].end());
    requests[s] = std::move(request);
  }
  absl::StatusOr<std::vector<v1::JobResponse>> answers = shards.Round(requests);
  if (!answers.ok()) return answers.status();
  Matrix<double> points(d, static_cast<Eigen::Index>(rows.size()));
  for (size_t s = 0; s < firsts.size(); ++s) {
    if (split.rows[s].empty()) continue;
    const v1::JobResponse& a = (*answers)[s];
    absl::StatusOr<Matrix<double>> got;
    if (float64) {
      got = GetMatrix<double>(a.points(), a.points_f64(), d, "points");
    } else if (absl::StatusOr<Matrix<float>> narrow =
                   GetMatrix<float>(a.points(), a.points_f64(), d, "points");
               narrow.ok()) {
      got = narrow->cast<double>();
    } else {
      got = narrow.status();
    }
    if (!got.ok()) return got.status();
    if (got->cols() != static_cast<Eigen::Index>(split.rows[s].size())) {
      return absl::InternalError(absl::StrCat("a sample-sums step answered ", got->cols(),
                                              " points for ", split.rows[s].size(), " rows"));
    }
    for (size_t i = 0; i < split.at[s].size(); ++i) points.col(split.at[s][i]) = got->col(i);
  }
  return points;
}

}  // namespace

std::vector<int> MiniBatchUpdate(const ClusterSums& sums, bool reassign, double reassignment_ratio,
                                 int64_t batch_size, bool float64, Matrix<double>* centers,
                                 MiniBatchState* state) {
  const int k = static_cast<int>(centers->cols());
  std::vector<double>& counts = state->counts;
  for (int j = 0; j < k; ++j) {
    if (!(sums.weights[j] > 0)) continue;
    // As scikit-learn's float32 arrays: the old weight's product and the
    // division in double, the center and its weight each rounded once.
    const double total = counts[j] + sums.weights[j];
    for (Eigen::Index l = 0; l < centers->rows(); ++l) {
      (*centers)(l, j) = Stored(((*centers)(l, j) * counts[j] + sums.sums(l, j)) / total, float64);
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

bool MiniBatchConverged(const MiniBatchOptions& options, int64_t step, int64_t n, double shift,
                        double batch_inertia, MiniBatchState* state, std::string* why) {
  // Per point, to compare batches of any size; the first step's inertia is
  // the initialisation's, left out.
  batch_inertia /= static_cast<double>(options.batch_size);
  if (step == 0) {
    if (options.log) {
      options.log(absl::StrCat("Minibatch step 1/", options.steps,
                               ": mean batch inertia: ", batch_inertia));
    }
    return false;
  }
  if (!state->has_ewa) {
    state->ewa_inertia = batch_inertia;
    state->has_ewa = true;
  } else {
    const double alpha =
        std::min(static_cast<double>(options.batch_size) * 2.0 / static_cast<double>(n + 1), 1.0);
    state->ewa_inertia = state->ewa_inertia * (1 - alpha) + batch_inertia * alpha;
  }
  if (options.log) {
    options.log(absl::StrCat("Minibatch step ", step + 1, "/", options.steps,
                             ": mean batch inertia: ", batch_inertia,
                             ", ewa inertia: ", state->ewa_inertia));
  }
  if (options.center_tol > 0 && shift <= options.center_tol) {
    *why = "small centers change";
    return true;
  }
  if (step == 1 || state->ewa_inertia < state->ewa_inertia_min) {
    state->no_improvement = 0;
    state->ewa_inertia_min = state->ewa_inertia;
  } else {
    ++state->no_improvement;
  }
  if (options.max_no_improvement >= 0 && state->no_improvement >= options.max_no_improvement) {
    *why = "lack of improvement in inertia";
    return true;
  }
  return false;
}

absl::StatusOr<MiniBatchResult> RunMiniBatchJob(const MiniBatchOptions& options, int d,
                                                ShardSet& shards) {
  const int k = options.k;
  const std::vector<int64_t> sizes = shards.Sizes();
  const std::vector<int64_t> firsts = ShardFirsts(sizes);
  const int64_t n = firsts.empty() ? 0 : firsts.back() + sizes.back();
  if (k < 1 || options.centers.rows() != d || options.centers.cols() != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "initial centers of shape ", options.centers.cols(), " x ", options.centers.rows(),
        " for k = ", k, ", d = ", d, ": need k >= 1 and k x d"));
  }
  if (options.batch_size < 1 || options.batch_size > n || options.steps < 0 ||
      !(options.center_tol >= 0) || !(options.reassignment_ratio >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size ", options.batch_size, ", steps ", options.steps, ", center tolerance ",
        options.center_tol, ", reassignment ratio ", options.reassignment_ratio, " on n = ", n,
        " points: needs 1 <= batch_size <= n and the others not negative"));
  }
  const auto round = [&](const std::vector<std::optional<v1::JobRequest>>& requests)
      -> absl::StatusOr<std::vector<v1::JobResponse>> {
    if (options.check) {
      if (absl::Status s = options.check(); !s.ok()) return s;
    }
    return shards.Round(requests);
  };
  MiniBatchResult result;
  result.random = options.random;
  result.centers = options.centers;
  for (Eigen::Index i = 0; i < result.centers.size(); ++i) {
    result.centers.data()[i] = Stored(result.centers.data()[i], options.float64);
  }
  MiniBatchState& state = result.state;
  state.counts.assign(k, 0);
  const auto start = Clock::now();
  for (int64_t step = 0; step < options.steps; ++step) {
    const std::vector<int64_t> rows = result.random.RandInt(0, n, options.batch_size);
    const ShardRows split = SplitRows(firsts, rows);
    std::vector<std::optional<v1::JobRequest>> requests(sizes.size());
    for (size_t s = 0; s < sizes.size(); ++s) {
      if (split.rows[s].empty()) continue;
      v1::JobRequest request;
      v1::SampleSumsStep* sample = request.mutable_sample_sums();
      sample->set_k(k);
      PutCenters(result.centers, options.float64, sample);
      sample->mutable_rows()->Assign(split.rows[s].begin(), split.rows[s].end());
      requests[s] = std::move(request);
    }
    absl::StatusOr<std::vector<v1::JobResponse>> answers = round(requests);
    if (!answers.ok()) return answers.status();
    // Added in shard order, so a repeated step gives the same bits.
    ClusterSums sums(d, k);
    double inertia = 0;
    for (size_t s = 0; s < sizes.size(); ++s) {
      if (split.rows[s].empty()) continue;
      absl::StatusOr<ClusterSums> shard = StepSums((*answers)[s], d, k, options.weighted);
      if (!shard.ok()) return shard.status();
      sums.Add(*shard);
      inertia += (*answers)[s].objective();
    }
    const bool reassign = MiniBatchReassigns(k, options.batch_size, &state);
    const Matrix<double> before = options.center_tol > 0 ? result.centers : Matrix<double>();
    const std::vector<int> moved =
        MiniBatchUpdate(sums, reassign, options.reassignment_ratio, options.batch_size,
                        options.float64, &result.centers, &state);
    if (!moved.empty()) {
      // New centers among the batch's points, uniformly, without
      // replacement (scikit-learn's random_state.choice on the batch).
      const std::vector<int64_t> picks = result.random.ChoiceWithoutReplacement(
          options.batch_size, static_cast<int64_t>(moved.size()));
      std::vector<int64_t> picked(picks.size());
      for (size_t i = 0; i < picks.size(); ++i) picked[i] = rows[picks[i]];
      if (options.check) {
        if (absl::Status s = options.check(); !s.ok()) return s;
      }
      absl::StatusOr<Matrix<double>> points = FetchRows(shards, firsts, picked, d, options.float64);
      if (!points.ok()) return points.status();
      for (size_t i = 0; i < moved.size(); ++i) result.centers.col(moved[i]) = points->col(i);
      result.reassigned += static_cast<int64_t>(moved.size());
      if (options.log) {
        options.log(
            absl::StrCat("[MiniBatchKMeans] Reassigning ", moved.size(), " cluster centers."));
      }
    }
    const double shift = options.center_tol > 0 ? (result.centers - before).squaredNorm() : 0.0;
    result.steps_run = step + 1;
    std::string why;
    if (MiniBatchConverged(options, step, n, shift, inertia, &state, &why)) {
      if (options.log) {
        options.log(absl::StrCat("Converged (", why, ") at step ", step + 1, "/", options.steps));
      }
      break;
    }
  }
  result.steps_seconds = Since(start);
  if (options.labels) {
    // One pass over every shard for the labels and the objective, without
    // the sums nor the state an assign step keeps for the next.
    const auto labels_start = Clock::now();
    v1::JobRequest request;
    v1::SampleSumsStep* last = request.mutable_sample_sums();
    last->set_k(k);
    PutCenters(result.centers, options.float64, last);
    last->set_all_rows(true);
    last->set_return_labels(true);
    last->set_omit_sums(true);
    absl::StatusOr<std::vector<v1::JobResponse>> answers =
        round(std::vector<std::optional<v1::JobRequest>>(sizes.size(), request));
    if (!answers.ok()) return answers.status();
    result.labels.reserve(static_cast<size_t>(n));
    for (const v1::JobResponse& a : *answers) {
      absl::StatusOr<Labels> labels = StepLabels(a);
      if (!labels.ok()) return labels.status();
      result.labels.insert(result.labels.end(), labels->begin(), labels->end());
      result.objective += a.objective();
    }
    if (static_cast<int64_t>(result.labels.size()) != n) {
      return absl::InternalError(absl::StrCat("the shards answered ", result.labels.size(),
                                              " labels for n = ", n, " points"));
    }
    result.labels_seconds = Since(labels_start);
  }
  return result;
}

namespace {

template <typename Scalar, typename Source>
absl::StatusOr<MiniBatchResult> RunOnReplicas(ReplicaShardOptions replicas,
                                              MiniBatchOptions options, int64_t n, int d,
                                              Source source) {
  options.weighted = !replicas.weights.empty() || !replicas.weights_f64.empty();
  options.float64 = std::is_same_v<Scalar, double>;
  replicas.count_label_changes = false;
  const auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<ReplicaShards>> shards =
      ReplicaShards::Load(std::move(replicas), n, d, std::move(source));
  if (!shards.ok()) return shards.status();
  const double load_seconds = Since(start);
  absl::StatusOr<MiniBatchResult> result = RunMiniBatchJob(options, d, **shards);
  if (result.ok()) result->load_seconds = load_seconds;
  return result;
}

}  // namespace

absl::StatusOr<MiniBatchResult> RunMiniBatchJobOnReplicas(ReplicaShardOptions replicas,
                                                          MiniBatchOptions options, int64_t n,
                                                          int d, PointSource source) {
  return RunOnReplicas<float>(std::move(replicas), std::move(options), n, d, std::move(source));
}

absl::StatusOr<MiniBatchResult> RunMiniBatchJobOnReplicas(ReplicaShardOptions replicas,
                                                          MiniBatchOptions options, int64_t n,
                                                          int d, PointSource64 source) {
  return RunOnReplicas<double>(std::move(replicas), std::move(options), n, d, std::move(source));
}

}  // namespace kmt
