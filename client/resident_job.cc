#include "client/resident_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/cluster_sums.h"
#include "core/init.h"
#include "core/lloyd_steps.h"
#include "core/seeding.h"
#include "core/sparse.h"
#include "core/validation.h"
#include "proto/csr_payload.h"
#include "proto/raw_payload.h"
#include "proto/request.h"

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Status AddStepSums(const v1::JobResponse& a, int d, int k, bool weighted, ClusterSums* into) {
  const bool rows = a.has_center_sums_csr();
  if (a.center_counts_size() != k || a.center_sums_size() != (rows ? 0 : int64_t{k} * d) ||
      a.center_weights_size() != (weighted ? k : 0)) {
    return absl::InternalError(absl::StrCat("a step answered ", a.center_counts_size(), " counts, ",
                                            a.center_sums_size(), " sums and ",
                                            a.center_weights_size(), " weights for k = ", k,
                                            ", d = ", d, weighted ? " on weighted points" : ""));
  }
  if (rows) {
    absl::StatusOr<CsrMatrix<double>> csr =
        CsrFromProto<double>(a.center_sums_csr(), d, "center_sums_csr");
    if (!csr.ok() || csr->rows() != k) {
      return absl::InternalError(absl::StrCat(
          "a step answered center_sums_csr ",
          csr.ok() ? absl::StrCat("of ", csr->rows(), " rows") : csr.status().message(),
          " for k = ", k, ", d = ", d));
    }
    // Center j's sum at its cluster's columns, 0 elsewhere, which adds
    // nothing: the bits of adding center_sums, without a d x k buffer.
    for (int j = 0; j < k; ++j) {
      for (int64_t p = csr->indptr()[j]; p < csr->indptr()[j + 1]; ++p) {
        into->sums(csr->indices()[p], j) += csr->values()[p];
      }
    }
  } else {
    into->sums += Eigen::Map<const Matrix<double>>(a.center_sums().data(), d, k);
  }
  for (int j = 0; j < k; ++j) {
    into->counts[j] += a.center_counts(j);
    into->weights[j] += weighted ? a.center_weights(j) : static_cast<double>(a.center_counts(j));
  }
  return absl::OkStatus();
}

std::vector<int64_t> ShardFirsts(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> firsts(sizes.size(), 0);
  for (size_t s = 1; s < sizes.size(); ++s) firsts[s] = firsts[s - 1] + sizes[s - 1];
  return firsts;
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> AnswerRows(const MatrixForms& forms, int d) {
  absl::StatusOr<Matrix<Scalar>> m = ReadRows<Scalar>(forms, d);
  if (!m.ok()) return absl::InternalError(absl::StrCat("a step answered ", m.status().message()));
  return m;
}
template absl::StatusOr<Matrix<float>> AnswerRows<float>(const MatrixForms&, int);
template absl::StatusOr<Matrix<double>> AnswerRows<double>(const MatrixForms&, int);

namespace {

// Shards whose every step first asks `check`.
class CheckedShards : public ShardSet {
 public:
  CheckedShards(ShardSet& shards, StopCheck check) : shards_(shards), check_(std::move(check)) {}
  std::vector<int64_t> Sizes() const override { return shards_.Sizes(); }
  absl::StatusOr<std::vector<v1::JobResponse>> Round(
      const std::vector<std::optional<v1::JobRequest>>& requests) override {
    if (absl::Status s = check_(); !s.ok()) return s;
    return shards_.Round(requests);
  }
  absl::Status Restart() override {
    if (absl::Status s = check_(); !s.ok()) return s;
    return shards_.Restart();
  }
  int moves() const override { return shards_.moves(); }
  bool labels_stay() const override { return shards_.labels_stay(); }
  bool runs_steps_in_place() const override { return shards_.runs_steps_in_place(); }

 private:
  ShardSet& shards_;
  StopCheck check_;
};

// One step of `make(s)` for every shard s (none where it gives none).
absl::StatusOr<std::vector<v1::JobResponse>> AskEach(
    ShardSet& job, const std::function<std::optional<v1::JobRequest>(size_t)>& make) {
  std::vector<std::optional<v1::JobRequest>> requests;
  const size_t shards = job.Sizes().size();
  requests.reserve(shards);
  for (size_t s = 0; s < shards; ++s) requests.push_back(make(s));
  return job.Round(requests);
}

// k-means++ with `trials` candidates per center over the job's shards
// (core/seeding.h), weighted (w D^2) if the shards are, one Round per
// seeding round; progress is logged after 1, 2, 4, 8, ... centers.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> Seed(ShardSet& job, int d, int k, uint64_t seed, int trials,
                                    bool weighted,
                                    const std::function<void(const std::string&)>& log) {
  const std::vector<int64_t> sizes = job.Sizes();
  int chosen = 1;
  const StopCheck progress = [&] {
    if (log && (chosen & (chosen - 1)) == 0) {
      log(absl::StrCat("k-means++: ", chosen, " of ", k, " centers chosen"));
    }
    ++chosen;
    return absl::OkStatus();
  };
  // A shard with nothing to do is not asked, except in a weighted job's
  // first round, which asks every shard for its sum of weights.
  bool ask_every_shard = weighted;
  return ShardedKMeansPlusPlus<Scalar>(
      sizes, d, k, seed, trials,
      [&](const std::vector<SeedRequest<Scalar>>& requests)
          -> absl::StatusOr<std::vector<SeedAnswer<Scalar>>> {
        const bool ask_all = ask_every_shard;
        ask_every_shard = false;
        absl::StatusOr<std::vector<v1::JobResponse>> answers =
            AskEach(job, [&](size_t s) -> std::optional<v1::JobRequest> {
              const SeedRequest<Scalar>& r = requests[s];
              if (!ask_all && r.add.size() == 0 && r.indices.empty() && r.targets.empty() &&
                  r.candidates.size() == 0) {
                return std::nullopt;
              }
              v1::JobRequest request;
              v1::SeedStep* step = request.mutable_seed();
              if (r.add.size() > 0) {
                WriteMatrix(r.add, wire::AddCenters(step));
              }
              step->mutable_point_indices()->Assign(r.indices.begin(), r.indices.end());
              step->mutable_draw_targets()->Assign(r.targets.begin(), r.targets.end());
              if (r.candidates.size() > 0) {
                WriteMatrix(r.candidates, wire::Candidates(step));
              }
              return request;
            });
        if (!answers.ok()) return answers.status();
        std::vector<SeedAnswer<Scalar>> out(requests.size());
        for (size_t s = 0; s < requests.size(); ++s) {
          const v1::JobResponse& a = (*answers)[s];
          out[s].potential = a.potential();
          absl::StatusOr<Matrix<Scalar>> points = AnswerRows<Scalar>(wire::Points(a), d);
          if (!points.ok()) return points.status();
          out[s].points = *std::move(points);
          out[s].candidate_potentials.assign(a.candidate_potentials().begin(),
                                             a.candidate_potentials().end());
        }
        return out;
      },
      progress, weighted);
}

// k-means‖ over the job's shards. The first center is k-means++'s (seed
// steps); then each round takes the previous round's points into the
// shards' distances (one step, which answers their potentials) and samples
// about l = oversampling * k points by them (a second step, given the
// summed potential), for `rounds` rounds or more while there are fewer than
// k candidates and a point lies away from them. A last step takes the last
// round's points in and answers the weight of the points nearest each
// candidate, and greedy k-means++ weighted by those weights chooses the k
// centers among them, here.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> SeedKMeansParallel(ShardSet& job, int d, int k, uint64_t seed,
                                                  const ResidentJobOptions& options, bool weighted,
                                                  ResidentJobResult* result) {
  if (options.kmeans_parallel_rounds < 1 || !std::isfinite(options.kmeans_parallel_oversampling) ||
      options.kmeans_parallel_oversampling <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "k-means|| with ", options.kmeans_parallel_rounds, " rounds and oversampling ",
        options.kmeans_parallel_oversampling, ": needs at least 1 round and oversampling > 0"));
  }
  absl::StatusOr<Matrix<Scalar>> first = Seed<Scalar>(job, d, 1, seed, 1, weighted, nullptr);
  if (!first.ok()) return first.status();
  Matrix<Scalar> candidates = *first, fresh = *first;
  const double oversampling = options.kmeans_parallel_oversampling * k;
  // Beyond `rounds`, a round that finds too few candidates is run again, but
  // not forever: only a dataset of fewer than k distinct points (of positive
  // weight) stops with fewer.
  const int most_rounds = options.kmeans_parallel_rounds + 64;
  const auto take_in = [&]() -> absl::StatusOr<double> {
    v1::JobRequest request;
    v1::KMeansParallelStep* step = request.mutable_kmeans_parallel();
    WriteMatrix(fresh, wire::AddCenters(step));
    absl::StatusOr<std::vector<v1::JobResponse>> answers =
        AskEach(job, [&](size_t) -> std::optional<v1::JobRequest> { return request; });
    if (!answers.ok()) return answers.status();
    double potential = 0;
    for (const v1::JobResponse& a : *answers) potential += a.potential();
    return potential;
  };
  absl::StatusOr<double> potential = take_in();
  if (!potential.ok()) return potential.status();
  const std::vector<int64_t> firsts = ShardFirsts(job.Sizes());
  int round = 0;
  while (*potential > 0) {
    ++round;
    absl::StatusOr<std::vector<v1::JobResponse>> answers =
        AskEach(job, [&](size_t s) -> std::optional<v1::JobRequest> {
          v1::JobRequest request;
          v1::KMeansParallelStep* step = request.mutable_kmeans_parallel();
          step->set_oversampling(oversampling);
          step->set_potential(*potential);
          step->set_seed(seed);
          step->set_round(round);
          step->set_first_point(firsts[s]);
          return request;
        });
    if (!answers.ok()) return answers.status();
    int64_t taken = 0;
    std::vector<Matrix<Scalar>> sampled;
    for (const v1::JobResponse& a : *answers) {
      absl::StatusOr<Matrix<Scalar>> points = AnswerRows<Scalar>(wire::SampledPoints(a), d);
      if (!points.ok()) return points.status();
      if (points->cols() != a.sampled_indices_size()) {
        return absl::InternalError(absl::StrCat("a k-means|| step answered ", points->size(),
                                                " values for ", a.sampled_indices_size(),
                                                " points in d = ", d));
      }
      taken += a.sampled_indices_size();
      sampled.push_back(*std::move(points));
    }
    fresh.resize(d, taken);
    Scalar* at = fresh.data();
    for (const Matrix<Scalar>& points : sampled) {
      at = std::copy(points.data(), points.data() + points.size(), at);
    }
    candidates.conservativeResize(d, candidates.cols() + taken);
    candidates.rightCols(taken) = fresh;
    if (options.log) {
      options.log(absl::StrCat("k-means||: round ", round, " sampled ", taken, " points (",
                               candidates.cols(), " candidates) at potential ", *potential));
    }
    if ((round >= options.kmeans_parallel_rounds && candidates.cols() >= k) ||
        round >= most_rounds) {
      break;
    }
    if (taken > 0) potential = take_in();
    if (!potential.ok()) return potential.status();
  }
  result->init_rounds = round;
  result->init_candidates = candidates.cols();
  if (options.log) {
    options.log(absl::StrCat("k-means||: ", round, " rounds, ", candidates.cols(), " candidates"));
  }

  // The last round's points taken in, the shards weigh every candidate.
  v1::JobRequest request;
  v1::KMeansParallelStep* last = request.mutable_kmeans_parallel();
  if (*potential > 0) {
    WriteMatrix(fresh, wire::AddCenters(last));
  }
  last->set_return_weights(true);
  absl::StatusOr<std::vector<v1::JobResponse>> answers =
      AskEach(job, [&](size_t) -> std::optional<v1::JobRequest> { return request; });
  if (!answers.ok()) return answers.status();
  // In double, so that counts beyond 2^24 stay exact.
  Vector<double> weights = Vector<double>::Zero(candidates.cols());
  for (const v1::JobResponse& a : *answers) {
    if (a.candidate_weights_size() != candidates.cols()) {
      return absl::InternalError(absl::StrCat("a k-means|| step answered ",
                                              a.candidate_weights_size(), " weights for ",
                                              candidates.cols(), " candidates"));
    }
    weights += Eigen::Map<const Vector<double>>(a.candidate_weights().data(), candidates.cols());
  }
  const Eigen::Index positive = (weights.array() > 0).count();
  if (positive >= k) {
    absl::StatusOr<Matrix<double>> centers = ChooseInitialCenters<double>(
        candidates.template cast<double>(), k, InitMethod::kKMeansPlusPlus, seed, {}, &weights);
    if (!centers.ok()) return centers.status();
    return centers->template cast<Scalar>();
  }
  // Fewer than k distinct points: each is a center, the first repeated.
  Matrix<Scalar> centers(d, k);
  Eigen::Index j = 0;
  for (Eigen::Index c = 0; c < candidates.cols(); ++c) {
    if (weights[c] > 0) centers.col(j++) = candidates.col(c);
  }
  for (; j < k; ++j) centers.col(j) = centers.col(0);
  if (options.log) {
    options.log(absl::StrCat("k-means||: only ", positive, " distinct points for k = ", k,
                             "; the first is repeated"));
  }
  return centers;
}

// The k points "random" draws (core/init.h), each asked of its shard.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> RandomStart(ShardSet& job, int d, int k, uint64_t seed,
                                           const ResidentJobOptions& options) {
  const std::vector<int64_t> sizes = job.Sizes();
  const std::vector<int64_t> firsts = ShardFirsts(sizes);
  const int64_t n = firsts.back() + sizes.back();
  const std::vector<Scalar>* given = WeightsIn<Scalar>(options.weights);
  const Scalar* weights = given != nullptr ? given->data() : nullptr;
  const size_t weight_count = given != nullptr ? given->size() : 0;
  if (options.weighted && static_cast<int64_t>(weight_count) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("random initial centers on weighted shards need ", "the ", n, " weights, got ",
                     weight_count));
  }
  const std::vector<int64_t> chosen =
      RandomSubsetIndices<Scalar>(n, k, seed, options.weighted ? weights : nullptr);
  if (static_cast<int>(chosen.size()) < k) {
    return absl::InvalidArgumentError(
        absl::StrCat("only ", chosen.size(), " points have a positive weight, fewer than k = ", k));
  }
  // Per shard, the chosen points it holds, by index within it.
  std::vector<std::vector<int>> asked(sizes.size());
  std::vector<v1::JobRequest> requests(sizes.size());
  for (int j = 0; j < k; ++j) {
    const size_t s = std::upper_bound(firsts.begin(), firsts.end(), chosen[j]) - firsts.begin() - 1;
    asked[s].push_back(j);
    requests[s].mutable_seed()->add_point_indices(chosen[j] - firsts[s]);
  }
  absl::StatusOr<std::vector<v1::JobResponse>> answers =
      AskEach(job, [&](size_t s) -> std::optional<v1::JobRequest> {
        if (asked[s].empty()) return std::nullopt;
        return requests[s];
      });
  if (!answers.ok()) return answers.status();
  Matrix<Scalar> centers(d, k);
  for (size_t s = 0; s < sizes.size(); ++s) {
    const v1::JobResponse& a = (*answers)[s];
    absl::StatusOr<Matrix<Scalar>> points = AnswerRows<Scalar>(wire::Points(a), d);
    if (!points.ok()) return points.status();
    if (points->cols() != static_cast<Eigen::Index>(asked[s].size())) {
      return absl::InternalError(absl::StrCat("a seed step answered ", points->size(),
                                              " values for ", asked[s].size(),
                                              " points in d = ", d));
    }
    for (size_t i = 0; i < asked[s].size(); ++i) centers.col(asked[s][i]) = points->col(i);
  }
  return centers;
}

// The centers (d x k) as k compressed sparse rows of their nonzeros, in
// their precision: the means of sparse points are zero wherever no point of
// their cluster has a nonzero.
template <typename Scalar>
void PutCentersCsr(const Matrix<Scalar>& centers, v1::CsrPoints* csr) {
  std::vector<int64_t> indptr = {0};
  std::vector<int32_t> indices;
  std::vector<Scalar> values;
  for (Eigen::Index j = 0; j < centers.cols(); ++j) {
    for (Eigen::Index l = 0; l < centers.rows(); ++l) {
      if (centers(l, j) == 0) continue;
      indices.push_back(static_cast<int32_t>(l));
      values.push_back(centers(l, j));
    }
    indptr.push_back(static_cast<int64_t>(indices.size()));
  }
  EncodeInt64(indptr, csr->mutable_indptr_i64());
  EncodeInt32(indices, csr->mutable_indices_i32());
  WriteValues<Scalar>(values, wire::Values(csr));
  csr->set_float64(std::is_same_v<Scalar, double>);
}

// An assign step under `centers`; on `sparse` shards the centers go as
// their nonzeros (centers_csr) where that at least halves their bytes (a
// vocabulary's d at a large k, where each cluster's points touch a small
// part of the columns), and the sums come back as rows if `sparse_sums`.
template <typename Scalar>
v1::JobRequest AssignRequest(const Matrix<Scalar>& centers, bool sparse, bool sparse_sums,
                             bool labels, int64_t farthest, bool objective = true) {
  v1::JobRequest request;
  v1::AssignStep* step = request.mutable_assign();
  step->set_k(static_cast<int>(centers.cols()));
  const auto halves = [&] {
    const auto nonzeros = static_cast<double>((centers.array() != Scalar(0)).count());
    return nonzeros * (sizeof(int32_t) + sizeof(Scalar)) <=
           0.5 * static_cast<double>(centers.size()) * sizeof(Scalar);
  };
  if (sparse && halves()) {
    PutCentersCsr(centers, step->mutable_centers_csr());
  } else {
    WriteMatrix(centers, wire::Centers(step));
  }
  step->set_return_labels(labels);
  step->set_raw_labels(labels);
  step->set_farthest(farthest);
  step->set_omit_objective(!objective);
  step->set_sparse_sums(sparse_sums);
  return request;
}

// Scikit-learn's relocation of the clusters whose points weigh nothing
// under `centers`: the step asked again for each shard's farthest points,
// merged in the order core/empty_clusters.h's RelocateEmptyClusters takes
// them on all points at once (farthest first, the lower index first), each
// moved from its cluster into an empty one. Returns how many moved.
// `sparse`, `sparse_sums`: the shards are sparse, and which sums they
// answer (AssignRequest).
template <typename Scalar>
absl::StatusOr<int64_t> Relocate(ShardSet& job, const Matrix<Scalar>& centers, bool sparse,
                                 bool sparse_sums, ClusterSums* sums) {
  std::vector<int> empty;
  for (size_t j = 0; j < sums->weights.size(); ++j) {
    if (!(sums->weights[j] > 0)) empty.push_back(static_cast<int>(j));
  }
  if (empty.empty()) return 0;
  const int d = static_cast<int>(centers.rows());
  const v1::JobRequest request =
      AssignRequest(centers, sparse, sparse_sums, false, static_cast<int64_t>(empty.size()));
  absl::StatusOr<std::vector<v1::JobResponse>> answers =
      AskEach(job, [&](size_t) -> std::optional<v1::JobRequest> { return request; });
  if (!answers.ok()) return answers.status();
  struct Far {
    Scalar distance;  // as the shard computed it
    int64_t index;
    size_t shard;
    int at;  // within the shard's answer
  };
  std::vector<Far> far;
  const std::vector<int64_t> firsts = ShardFirsts(job.Sizes());
  std::vector<Matrix<Scalar>> far_points(answers->size());
  for (size_t s = 0; s < answers->size(); ++s) {
    const v1::JobResponse& a = (*answers)[s];
    const int m = a.far_indices_size();
    absl::StatusOr<Matrix<Scalar>> points = AnswerRows<Scalar>(wire::FarPoints(a), d);
    if (!points.ok()) return points.status();
    far_points[s] = *std::move(points);
    if (a.far_distances_size() != m || a.far_labels_size() != m || a.far_weights_size() != m ||
        far_points[s].cols() != m) {
      return absl::InternalError(absl::StrCat(
          "an assign step answered ", m, " far points with ", a.far_distances_size(),
          " distances and ", far_points[s].cols(), " points of coordinates in d = ", d));
    }
    for (int i = 0; i < m; ++i) {
      far.push_back({static_cast<Scalar>(a.far_distances(i)), firsts[s] + a.far_indices(i), s, i});
    }
  }
  const size_t take = std::min(far.size(), empty.size());
  std::partial_sort(far.begin(), far.begin() + static_cast<std::ptrdiff_t>(take), far.end(),
                    [](const Far& a, const Far& b) {
                      return a.distance > b.distance ||
                             (a.distance == b.distance && a.index < b.index);
                    });
  for (size_t r = 0; r < take; ++r) {
    const v1::JobResponse& a = (*answers)[far[r].shard];
    const double w = a.far_weights(far[r].at);
    MoveToEmptyCluster(w * far_points[far[r].shard].col(far[r].at).template cast<double>(), w,
                       a.far_labels(far[r].at), empty[r], sums);
  }
  return static_cast<int64_t>(take);
}

// The trajectory's figures into `result` (its timings added).
template <typename Scalar>
void TakeTrajectory(LloydTrajectory<Scalar> trajectory, ResidentJobResult* result) {
  result->initial_objective = trajectory.initial_objective;
  result->objective = trajectory.objective;
  result->objectives = std::move(trajectory.objectives);
  result->labels_changed = std::move(trajectory.labels_changed);
  result->counts = std::move(trajectory.counts);
  result->iterations_run = trajectory.iterations_run;
  result->convergence = trajectory.convergence;
  result->empty_cluster_events += trajectory.empty_cluster_events;
  result->relocations += trajectory.relocations;
  result->iteration_seconds = std::move(trajectory.iteration_seconds);
  result->labels_seconds += trajectory.labels_seconds;
  result->centers = std::move(trajectory.centers);
}

// Lloyd's steps on a job's only shard run where it is (LloydStepsStep): one
// request, the shard answering the trajectory RunLloydSteps gives from its
// assignments, the same as the steps asked one by one.
template <typename Scalar>
absl::Status LloydInPlace(ShardSet& job, const ResidentJobOptions& options, Matrix<Scalar> centers,
                          ResidentJobResult* result) {
  const int d = static_cast<int>(centers.rows()), k = options.k;
  v1::JobRequest request;
  v1::LloydStepsStep* step = request.mutable_lloyd_steps();
  *step->mutable_start() =
      AssignRequest(centers, options.sparse, false, options.labels, 0).assign();
  step->set_iterations(options.iterations);
  step->set_center_tol(options.center_tol);
  step->set_relocate(options.empty_clusters == EmptyClusterPolicy::kRelocateFarthest);
  step->set_iteration_objectives(options.iteration_objectives);
  absl::StatusOr<std::vector<v1::JobResponse>> answers =
      AskEach(job, [&](size_t) -> std::optional<v1::JobRequest> { return request; });
  if (!answers.ok()) return answers.status();
  const v1::JobResponse& a = answers->front();
  const v1::LloydStepsAnswer& steps = a.lloyd();
  LloydTrajectory<Scalar> trajectory;
  absl::StatusOr<Matrix<Scalar>> final_centers =
      ReadMatrix<Scalar>(wire::Centers(steps), "k", k, d);
  if (!final_centers.ok()) return final_centers.status();
  if (steps.labels_changed_size() != steps.objectives_size() || a.center_counts_size() != k) {
    return absl::InternalError(absl::StrCat("a lloyd-steps step answered ", a.center_counts_size(),
                                            " counts and ", steps.objectives_size(),
                                            " objectives for ", steps.labels_changed_size(),
                                            " label changes, k = ", k));
  }
  trajectory.centers = *std::move(final_centers);
  trajectory.initial_objective = steps.initial_objective();
  trajectory.objective = a.objective();
  trajectory.objectives.assign(steps.objectives().begin(), steps.objectives().end());
  trajectory.labels_changed.assign(steps.labels_changed().begin(), steps.labels_changed().end());
  trajectory.counts.assign(a.center_counts().begin(), a.center_counts().end());
  trajectory.iterations_run = steps.iterations_run();
  trajectory.convergence = ConvergenceOf(steps.convergence());
  trajectory.empty_cluster_events = steps.empty_cluster_events();
  trajectory.relocations = steps.relocations();
  trajectory.iteration_seconds.assign(steps.iteration_seconds().begin(),
                                      steps.iteration_seconds().end());
  trajectory.labels_seconds = steps.labels_seconds();
  if (options.labels && !job.labels_stay()) {
    absl::StatusOr<Labels> labels = StepLabels(a);
    if (!labels.ok()) return labels.status();
    result->labels = *std::move(labels);
  }
  TakeTrajectory(std::move(trajectory), result);
  result->steps_in_place = true;
  return absl::OkStatus();
}

// Lloyd's steps from `centers` on the shards, into `result` (RunLloydSteps:
// each assignment one step asked of every shard, the sums added in shard
// order, so that a repeated step gives the same bits). A job held in one
// shard that can run them where it is does so, unless the caller watches
// each step (log, on_iteration).
template <typename Scalar>
absl::Status Lloyd(ShardSet& job, const ResidentJobOptions& options, Matrix<Scalar> centers,
                   ResidentJobResult* result) {
  if (options.sparse && options.steps_in_place && job.Sizes().size() == 1 &&
      job.runs_steps_in_place() && !options.log && !options.on_iteration) {
    return LloydInPlace(job, options, std::move(centers), result);
  }
  const int d = static_cast<int>(centers.rows()), k = options.k;
  const LloydRules rules{
      .iterations = options.iterations,
      .center_tol = options.center_tol,
      .relocate = options.empty_clusters == EmptyClusterPolicy::kRelocateFarthest,
      .iteration_objectives = options.iteration_objectives};
  LloydTrajectory<Scalar> trajectory;
  trajectory.centers = std::move(centers);
  const LloydAssign<Scalar> assign = [&](const Matrix<Scalar>& at, bool last,
                                         bool objective) -> absl::StatusOr<LloydAssignment> {
    const v1::JobRequest request = AssignRequest(at, options.sparse, options.sparse_sums,
                                                 last && options.labels, 0, objective);
    absl::StatusOr<std::vector<v1::JobResponse>> answers =
        AskEach(job, [&](size_t) -> std::optional<v1::JobRequest> { return request; });
    if (!answers.ok()) return answers.status();
    LloydAssignment step{.sums = ClusterSums(d, k), .objective = 0, .compared = true};
    for (const v1::JobResponse& a : *answers) {
      if (absl::Status s = AddStepSums(a, d, k, options.weighted, &step.sums); !s.ok()) return s;
      step.objective += a.objective();
      step.compared &= a.labels_compared();
      step.changed += a.labels_changed();
    }
    if (last && options.labels && !job.labels_stay()) {
      for (const v1::JobResponse& a : *answers) {
        absl::StatusOr<Labels> labels = StepLabels(a);
        if (!labels.ok()) return labels.status();
        result->labels.insert(result->labels.end(), labels->begin(), labels->end());
      }
    }
    return step;
  };
  const LloydRelocate<Scalar> relocate = [&](const Matrix<Scalar>& at, ClusterSums* sums) {
    return Relocate(job, at, options.sparse, options.sparse_sums, sums);
  };
  LloydWatch watch;
  if (options.log) {
    watch.assigned = [&](int t, bool last, const LloydAssignment& step) {
      const bool with_objective = !std::isnan(step.objective);
      // The labels step is numbered for the iterations before it.
      options.log(
          absl::StrCat("step ", last ? trajectory.iterations_run : t,
                       with_objective ? absl::StrCat(" objective ", step.objective) : std::string(),
                       t > 0 && step.compared ? absl::StrCat(", labels changed ", step.changed)
                                              : std::string()));
    };
    watch.relocated = [&](int64_t moved) {
      options.log(absl::StrCat("relocated ", moved, " empty clusters"));
    };
  }
  if (options.on_iteration) watch.updated = options.on_iteration;
  if (absl::Status s = RunLloydSteps<Scalar>(rules, assign, relocate, watch, &trajectory);
      !s.ok()) {
    return s;
  }
  TakeTrajectory(std::move(trajectory), result);
  return absl::OkStatus();
}

// Every start (the given ones, or n_init of `options.seeding`), each
// seeded and iterated in Scalar; the lowest final objective kept.
template <typename Scalar>
absl::StatusOr<ResidentJobResult> RunStarts(const ResidentJobOptions& options,
                                            const std::vector<Matrix<Scalar>>& starts, int d,
                                            ShardSet& shards) {
  const int k = options.k;
  const int runs = starts.empty() ? options.n_init : static_cast<int>(starts.size());
  ResidentJobResult best;
  std::vector<double> objectives;
  for (int r = 0; r < runs; ++r) {
    ResidentJobResult result;
    const auto start = Clock::now();
    Matrix<Scalar> centers;
    if (!starts.empty()) {
      centers = starts[r];
    } else {
      const uint64_t seed = options.seed + static_cast<uint64_t>(r);
      // A new k-means++ starts from no chosen center, which only a new load
      // gives.
      if (r > 0 && options.seeding != ResidentSeeding::kRandom) {
        if (absl::Status s = shards.Restart(); !s.ok()) return s;
      }
      absl::StatusOr<Matrix<Scalar>> seeded =
          options.seeding == ResidentSeeding::kKMeansParallel
              ? SeedKMeansParallel<Scalar>(shards, d, k, seed, options, options.weighted, &result)
          : options.seeding == ResidentSeeding::kRandom
              ? RandomStart<Scalar>(shards, d, k, seed, options)
              : Seed<Scalar>(shards, d, k, seed,
                             options.seeding == ResidentSeeding::kPlainKMeansPlusPlus
                                 ? 1
                                 : GreedySeedingCandidates(k),
                             options.weighted, options.log);
      if (!seeded.ok()) return seeded.status();
      centers = *std::move(seeded);
    }
    result.init_seconds = SecondsSince(start);
    if (absl::Status s = Lloyd<Scalar>(shards, options, std::move(centers), &result); !s.ok()) {
      return s;
    }
    objectives.push_back(result.objective);
    const double init_seconds = best.init_seconds + result.init_seconds;
    const double labels_seconds = best.labels_seconds + result.labels_seconds;
    if (r == 0 || result.objective < best.objective) {
      best = std::move(result);
      best.best_restart = r;
    }
    best.init_seconds = init_seconds;
    best.labels_seconds = labels_seconds;
  }
  if (runs > 1) best.restart_objectives = std::move(objectives);
  return best;
}

}  // namespace

absl::StatusOr<Labels> StepLabels(const v1::JobResponse& answer) {
  if (answer.labels_i32().empty()) return Labels(answer.labels().begin(), answer.labels().end());
  if (answer.labels_i32().size() % sizeof(int32_t) != 0) {
    return absl::InternalError(absl::StrCat("an assign step answered ", answer.labels_i32().size(),
                                            " bytes of int32 labels"));
  }
  Labels labels(answer.labels_i32().size() / sizeof(int32_t));
  std::memcpy(labels.data(), answer.labels_i32().data(), answer.labels_i32().size());
  return labels;
}

namespace {

// RunStarts on the options' starts in Scalar: a float64 job's float ones
// widened; a float32 job's must be float (its shards hold float32 points).
template <typename Scalar>
absl::StatusOr<ResidentJobResult> RunGivenStarts(const ResidentJobOptions& options, int d,
                                                 ShardSet& shards) {
  std::vector<Matrix<Scalar>> starts;
  for (const std::variant<Matrix<float>, Matrix<double>>& given : options.starts) {
    if (std::is_same_v<Scalar, float> && std::holds_alternative<Matrix<double>>(given)) {
      return absl::InvalidArgumentError(
          "float64 initial centers for a float32 job: its shards hold float32 points");
    }
    Matrix<Scalar> start =
        std::visit([](const auto& m) { return Matrix<Scalar>(m.template cast<Scalar>()); }, given);
    if (start.rows() != d || start.cols() != options.k) {
      return absl::InvalidArgumentError(absl::StrCat("initial centers of shape ", start.cols(),
                                                     " x ", start.rows(), " for k = ", options.k,
                                                     ", d = ", d));
    }
    starts.push_back(std::move(start));
  }
  return RunStarts<Scalar>(options, starts, d, shards);
}

}  // namespace

absl::StatusOr<ResidentJobResult> RunResidentJob(const ResidentJobOptions& options, int d,
                                                 ShardSet& unchecked) {
  std::optional<CheckedShards> checked;
  if (options.check) checked.emplace(unchecked, options.check);
  ShardSet& shards = checked ? static_cast<ShardSet&>(*checked) : unchecked;
  const std::vector<int64_t> sizes = shards.Sizes();
  int64_t n = 0;
  for (const int64_t size : sizes) n += size;
  if (options.iterations < 0 || std::isnan(options.center_tol) || options.n_init < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iterations ", options.iterations, ", center tolerance ", options.center_tol, ", n_init ",
        options.n_init, ": iterations may not be negative, n_init must be at least 1"));
  }
  if (options.k < 1 || n < options.k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", options.k, " needs 1 <= k <= n = ", n, " points"));
  }
  if (options.empty_clusters == EmptyClusterPolicy::kSplitLargest) {
    return absl::InvalidArgumentError(
        "a resident job keeps empty clusters or relocates them (keep or relocate-farthest), "
        "not split-largest");
  }
  absl::StatusOr<ResidentJobResult> best = options.float64
                                               ? RunGivenStarts<double>(options, d, shards)
                                               : RunGivenStarts<float>(options, d, shards);
  if (!best.ok()) return best.status();
  best->shards = static_cast<int>(sizes.size());
  best->shard_moves = shards.moves();
  return best;
}

namespace {

// RunResidentJobOnReplicas of Scalar points, dense or sparse.
template <typename Scalar>
absl::StatusOr<ResidentJobResult> RunOnReplicas(ReplicaShardOptions replicas,
                                                ResidentJobOptions options, double tol, int64_t n,
                                                int d, ShardSource source) {
  const std::vector<Scalar>* given = WeightsIn<Scalar>(replicas.weights);
  const std::vector<Scalar> weights = given != nullptr ? *given : std::vector<Scalar>();
  if (!(tol >= 0) || !std::isfinite(tol)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tol ", tol, ": must be finite and not negative"));
  }
  if (options.k < 1 || n < options.k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", options.k, " needs 1 <= k <= n = ", n, " points"));
  }
  if (!weights.empty()) {
    const Eigen::Map<const Vector<Scalar>> values(weights.data(), weights.size());
    if (absl::Status s = ValidateWeights(Vector<Scalar>(values), n); !s.ok()) return s;
    const Eigen::Index positive = (values.array() > 0).count();
    if (options.starts.empty() && positive < options.k) {
      return absl::InvalidArgumentError(absl::StrCat(
          "only ", positive, " points have a positive weight, fewer than k = ", options.k));
    }
  }
  options.weighted = !weights.empty();
  options.float64 = std::is_same_v<Scalar, double>;
  if (const auto* csr = std::get_if<CsrSource<Scalar>>(&source)) {
    options.sparse = true;
    const double nnz = csr->indptr.empty() ? 0.0 : static_cast<double>(csr->indptr.back());
    options.sparse_sums = 12 * nnz < 8.0 * options.k * d;
  }
  if (options.weighted && options.seeding == ResidentSeeding::kRandom) options.weights = weights;
  replicas.moments = tol > 0;
  const auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<ReplicaShards>> shards =
      ReplicaShards::Load(std::move(replicas), n, d, std::move(source));
  if (!shards.ok()) return shards.status();
  const double load_seconds = SecondsSince(start);
  if (tol > 0) options.center_tol = tol * (*shards)->MeanVariance();
  absl::StatusOr<ResidentJobResult> result = RunResidentJob(options, d, **shards);
  if (result.ok()) result->load_seconds = load_seconds;
  return result;
}

}  // namespace

absl::StatusOr<ResidentJobResult> RunResidentJobOnReplicas(ReplicaShardOptions replicas,
                                                           ResidentJobOptions options, double tol,
                                                           int64_t n, int d, ShardSource source) {
  return IsFloat64(source) ? RunOnReplicas<double>(std::move(replicas), std::move(options), tol, n,
                                                   d, std::move(source))
                           : RunOnReplicas<float>(std::move(replicas), std::move(options), tol, n,
                                                  d, std::move(source));
}

}  // namespace kmt
