#include "core/transformer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/constructions.h"
#include "core/validation.h"

namespace kmt {
namespace {

template <typename Scalar>
absl::Status BeforeLayer(const RunOptions& options, int layer) {
  return options.before_layer ? options.before_layer(layer) : absl::OkStatus();
}

// Labels and objective of the current centers.
template <typename Scalar>
void AssignAndScore(const Matrix<Scalar>& points, RunResult<Scalar>* result) {
  Vector<Scalar> sq_dist;
  AssignNearest(points, result->centers, &result->labels, &sq_dist);
  result->objective = sq_dist.template cast<double>().sum();
}

template <typename Scalar>
absl::Status RunDense(const Model<Scalar>& model, const Matrix<Scalar>& points,
                      const RunOptions& options, RunResult<Scalar>* result) {
  const int d = model.d, m = model.registers();
  const Matrix<Scalar> codes = CenterRegisters<Scalar>(model.embedding, model.k);
  Matrix<Scalar> x = EmbedPoints(points, m);
  Matrix<Scalar> c = EmbedCenters(result->centers, model.embedding);
  for (int t = 0; t < options.layers; ++t) {
    if (absl::Status s = BeforeLayer<Scalar>(options, t); !s.ok()) return s;
    const LayerWeights<Scalar>& w = model.layers[t % model.layers.size()];
    if (model.reembed && t > 0) {
      // Only the centers carry over: points start again from [X; 0].
      x = EmbedPoints(points, m);
      c.bottomRows(m) = codes;
    }
    const Matrix<Scalar> a1 = Attend(w.points_to_centers, x, c);
    const Matrix<Scalar> a2 = Attend(w.points_to_points, x, x);
    // The residual adds the self-attention block first: under the exact
    // constructions it cancels the old value exactly, so the new value is the
    // cross block's output to the last bit.
    x += a2;
    x += a1;
    std::vector<bool> support;
    const Matrix<Scalar> a3 = Attend(w.centers_to_points, c, x, &support);
    const Matrix<Scalar> a4 = Attend(w.centers_to_centers, c, c);
    Matrix<Scalar> next = c + a4;
    next += a3;
    int empty = 0;
    if (model.keep_empty_centers) {
      for (int j = 0; j < model.k; ++j) {
        if (support[j]) continue;
        next.col(j) = c.col(j);
        ++empty;
      }
    }
    c = std::move(next);
    result->centers = c.topRows(d);
    result->empty_cluster_events += empty;
    result->layers_run = t + 1;
    AssignAndScore(points, result);
    const double objective = result->objective;
    result->layer_objectives.push_back(objective);
    if (options.record_trajectory) {
      LayerRecord<Scalar> record;
      record.registers = x.bottomRows(m);
      AssignNearest<Scalar>(record.registers, codes, &record.labels);
      record.centers = result->centers;
      record.objective = objective;
      record.empty_clusters = empty;
      result->trajectory.push_back(std::move(record));
    }
  }
  return absl::OkStatus();
}

// The Lloyd construction with this embedding, k clusters.
template <typename Scalar>
absl::Status RunFast(Embedding embedding, int k, const Matrix<Scalar>& points,
                     const RunOptions& options, RunResult<Scalar>* result) {
  const int d = static_cast<int>(points.rows());
  const Labels& labels = result->labels;
  for (int t = 0; t < options.layers; ++t) {
    if (absl::Status s = BeforeLayer<Scalar>(options, t); !s.ok()) return s;
    ClusterSums sums(d, k);
    AccumulateClusterSums(points, labels, &sums);
    const int empty = ApplyMeans(sums, &result->centers);
    result->empty_cluster_events += empty;
    result->layers_run = t + 1;
    if (options.record_trajectory) {
      LayerRecord<Scalar> record;
      const Matrix<Scalar> codes = CenterRegisters<Scalar>(embedding, k);
      record.registers.resize(codes.rows(), points.cols());
      for (Eigen::Index i = 0; i < points.cols(); ++i) {
        record.registers.col(i) = codes.col(labels[i]);
      }
      record.labels = labels;
      record.centers = result->centers;
      record.empty_clusters = empty;
      result->trajectory.push_back(std::move(record));
    }
    // The next layer's theta1 is this layer's objective pass.
    AssignAndScore(points, result);
    result->layer_objectives.push_back(result->objective);
    if (options.record_trajectory) {
      result->trajectory.back().objective = result->objective;
    }
  }
  return absl::OkStatus();
}

// The checks every run makes of its data against the model's d and k.
template <typename Scalar>
absl::Status ValidateRun(absl::string_view name, int d, int k,
                         const Matrix<Scalar>& points,
                         const Matrix<Scalar>& initial_centers,
                         const RunOptions& options) {
  if (absl::Status s = ValidatePoints(points); !s.ok()) return s;
  if (points.rows() != d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "points have d = ", points.rows(), ", model ", name, " expects d = ", d));
  }
  if (initial_centers.cols() != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial centers have k = ", initial_centers.cols(),
                     ", model ", name, " expects k = ", k));
  }
  if (absl::Status s = ValidateCenters(points, initial_centers); !s.ok()) {
    return s;
  }
  if (options.layers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers = ", options.layers, ", must not be negative"));
  }
  return absl::OkStatus();
}

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Start(const Matrix<Scalar>& points,
                                        const Matrix<Scalar>& initial_centers,
                                        Path path) {
  RunResult<Scalar> result;
  result.centers = initial_centers;
  result.path = path;
  AssignAndScore(points, &result);
  return result;
}

}  // namespace

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> RunTransformer(
    const Model<Scalar>& model, const Matrix<Scalar>& points,
    const Matrix<Scalar>& initial_centers, const RunOptions& options) {
  if (absl::Status s = ValidateModel(model); !s.ok()) return s;
  if (absl::Status s = ValidateRun(model.name, model.d, model.k, points,
                                   initial_centers, options);
      !s.ok()) {
    return s;
  }
  const bool exact = MatchLloyd(model).has_value();
  if (options.path == Path::kFast && !exact) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model ", model.name,
        " is not an exact Lloyd construction: the fast path cannot run it"));
  }
  const bool fast = exact && options.path != Path::kDense;
  absl::StatusOr<RunResult<Scalar>> result =
      Start(points, initial_centers, fast ? Path::kFast : Path::kDense);
  const absl::Status s =
      fast ? RunFast(model.embedding, model.k, points, options, &*result)
           : RunDense(model, points, options, &*result);
  if (!s.ok()) return s;
  return result;
}

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> RunLloyd(const LloydOptions& lloyd,
                                           const Matrix<Scalar>& points,
                                           const Matrix<Scalar>& initial_centers,
                                           const RunOptions& options) {
  const int d = static_cast<int>(points.rows());
  const int k = static_cast<int>(initial_centers.cols());
  if (!std::isinf(lloyd.beta) || options.path == Path::kDense) {
    absl::StatusOr<Model<Scalar>> model = LloydConstruction<Scalar>(d, k, lloyd);
    if (!model.ok()) return model.status();
    return RunTransformer(*model, points, initial_centers, options);
  }
  if (absl::Status s = ValidateLloydOptions(d, k, lloyd); !s.ok()) return s;
  if (absl::Status s = ValidateRun(LloydModelName(lloyd), d, k, points,
                                   initial_centers, options);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<RunResult<Scalar>> result =
      Start(points, initial_centers, Path::kFast);
  const absl::Status s = RunFast(lloyd.embedding, k, points, options, &*result);
  if (!s.ok()) return s;
  return result;
}

template absl::StatusOr<RunResult<float>> RunTransformer<float>(
    const Model<float>&, const Matrix<float>&, const Matrix<float>&,
    const RunOptions&);
template absl::StatusOr<RunResult<double>> RunTransformer<double>(
    const Model<double>&, const Matrix<double>&, const Matrix<double>&,
    const RunOptions&);
template absl::StatusOr<RunResult<float>> RunLloyd<float>(
    const LloydOptions&, const Matrix<float>&, const Matrix<float>&,
    const RunOptions&);
template absl::StatusOr<RunResult<double>> RunLloyd<double>(
    const LloydOptions&, const Matrix<double>&, const Matrix<double>&,
    const RunOptions&);

}  // namespace kmt
