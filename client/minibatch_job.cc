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
#include "proto/minibatch_state.h"
#include "proto/raw_payload.h"

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;

// The centers as a step sends them, in the job's precision.
void PutCenters(const Matrix<double>& centers, bool float64, v1::SampleSumsStep* step) {
  if (float64) {
    WriteMatrix(centers, wire::Centers(step));
  } else {
    WriteMatrix(Matrix<float>(centers.cast<float>()), wire::Centers(step));
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
      got = AnswerRows<double>(wire::Points(a), d);
    } else if (absl::StatusOr<Matrix<float>> narrow = AnswerRows<float>(wire::Points(a), d);
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

absl::StatusOr<MiniBatchResult> RunMiniBatchJob(const MiniBatchOptions& options, int d,
                                                ShardSet& shards) {
  const MiniBatchRules& rules = options.rules;
  const int k = rules.k;
  const bool float64 = rules.float64;
  const std::vector<int64_t> sizes = shards.Sizes();
  const std::vector<int64_t> firsts = ShardFirsts(sizes);
  const int64_t n = firsts.empty() ? 0 : firsts.back() + sizes.back();
  MiniBatchResult result;
  MiniBatchState& state = result.state;
  state.centers = options.centers;
  state.counts.assign(std::max(k, 0), 0);
  state.random = options.random;
  if (options.centers.rows() != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial centers of ", options.centers.rows(), " dimensions for d = ", d));
  }
  if (absl::Status s = CheckMiniBatch(rules, n, state); !s.ok()) return s;
  const auto round = [&](const std::vector<std::optional<v1::JobRequest>>& requests)
      -> absl::StatusOr<std::vector<v1::JobResponse>> {
    if (options.check) {
      if (absl::Status s = options.check(); !s.ok()) return s;
    }
    return shards.Round(requests);
  };
  const auto start = Clock::now();
  if (sizes.size() == 1 && options.steps_on_server) {
    // One shard: every step on it, in one request.
    v1::JobRequest request;
    v1::MiniBatchStepsStep* steps = request.mutable_minibatch_steps();
    steps->set_k(k);
    steps->set_batch_size(rules.batch_size);
    steps->set_steps(rules.steps);
    steps->set_center_tol(rules.center_tol);
    steps->set_max_no_improvement(rules.max_no_improvement);
    steps->set_reassignment_ratio(rules.reassignment_ratio);
    PutMiniBatchState(state, steps->mutable_state());
    absl::StatusOr<std::vector<v1::JobResponse>> answers = round({request});
    if (!answers.ok()) return answers.status();
    absl::StatusOr<MiniBatchState> after = GetMiniBatchState((*answers)[0].minibatch(), d, k);
    if (!after.ok()) return after.status();
    state = *std::move(after);
    result.steps_on_server = true;
  } else {
    const MiniBatchSums sums = [&](const std::vector<int64_t>& rows, const Matrix<double>& centers,
                                   double* objective) -> absl::StatusOr<ClusterSums> {
      const ShardRows split = SplitRows(firsts, rows);
      std::vector<std::optional<v1::JobRequest>> requests(sizes.size());
      for (size_t s = 0; s < sizes.size(); ++s) {
        if (split.rows[s].empty()) continue;
        v1::JobRequest request;
        v1::SampleSumsStep* sample = request.mutable_sample_sums();
        sample->set_k(k);
        PutCenters(centers, float64, sample);
        sample->mutable_rows()->Assign(split.rows[s].begin(), split.rows[s].end());
        sample->set_sparse_sums(options.sparse);
        requests[s] = std::move(request);
      }
      absl::StatusOr<std::vector<v1::JobResponse>> answers = round(requests);
      if (!answers.ok()) return answers.status();
      // Added in shard order, so a repeated step gives the same bits.
      ClusterSums total(d, k);
      *objective = 0;
      for (size_t s = 0; s < sizes.size(); ++s) {
        if (split.rows[s].empty()) continue;
        if (absl::Status status = AddStepSums((*answers)[s], d, k, options.weighted, &total);
            !status.ok()) {
          return status;
        }
        *objective += (*answers)[s].objective();
      }
      return total;
    };
    const MiniBatchRows fetch =
        [&](const std::vector<int64_t>& rows) -> absl::StatusOr<Matrix<double>> {
      if (options.check) {
        if (absl::Status s = options.check(); !s.ok()) return s;
      }
      return FetchRows(shards, firsts, rows, d, float64);
    };
    if (absl::Status s = RunMiniBatchSteps(rules, n, sums, fetch, nullptr, &state); !s.ok()) {
      return s;
    }
  }
  result.steps_seconds = SecondsSince(start);
  if (options.labels) {
    // One pass over every shard for the labels and the objective, without
    // the sums nor the state an assign step keeps for the next.
    const auto labels_start = Clock::now();
    v1::JobRequest request;
    v1::SampleSumsStep* last = request.mutable_sample_sums();
    last->set_k(k);
    PutCenters(state.centers, float64, last);
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
    result.labels_seconds = SecondsSince(labels_start);
  }
  return result;
}

absl::StatusOr<MiniBatchResult> RunMiniBatchJobOnReplicas(ReplicaShardOptions replicas,
                                                          MiniBatchOptions options, int64_t n,
                                                          int d, ShardSource source) {
  options.weighted = HasWeights(replicas.weights);
  options.rules.float64 = IsFloat64(source);
  options.sparse = IsSparse(source);
  replicas.count_label_changes = false;
  const auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<ReplicaShards>> shards =
      ReplicaShards::Load(std::move(replicas), n, d, std::move(source));
  if (!shards.ok()) return shards.status();
  const double load_seconds = SecondsSince(start);
  absl::StatusOr<MiniBatchResult> result = RunMiniBatchJob(options, d, **shards);
  if (result.ok()) result->load_seconds = load_seconds;
  return result;
}

}  // namespace kmt
