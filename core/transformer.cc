#include "core/transformer.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/omp_threads.h"
#include "core/simd_kernels.h"
#include "core/unit_norm.h"
#include "core/validation.h"

namespace kmt {
namespace {

absl::Status BeforeLayer(const RunOptions& options, int layer) {
  return options.before_layer ? options.before_layer(layer) : absl::OkStatus();
}

// The points two ways: in the caller's units, which results are reported
// against, and as the layers see them (the same object without scaling);
// whether each report keeps its labels' cluster sums.
template <typename Scalar>
struct Frame {
  const Matrix<Scalar>& points;
  const Matrix<Scalar>& model_points;
  const InputMap<Scalar>& map;
  bool cluster_sums = false;
  const Vector<Scalar>* weights = nullptr;    // the points' weights; null: 1 each
  const PointLanes<Scalar>* lanes = nullptr;  // the points', for the products' assignment
  // The assignment kernels of the SIMD level in use, taken once for the run.
  const typename SimdKernels<Scalar>::Assignment& kernels;
};

// Whether a normalizer puts weight on some key for every query, so that its
// support says nothing about a cluster's points.
bool WeighsEveryKey(Normalizer normalizer) {
  return normalizer == Normalizer::kSparsemax || normalizer == Normalizer::kNormmax ||
         normalizer == Normalizer::kGumbel;
}

// Centers (model units) into the result in the caller's units, with the
// labels and objective they give the caller's points. With `bounded`, the
// assignment goes through its bounds, whose labels() are the report's (a
// run copies them out once, at its end), and without `objective` the
// objective is NaN: the bounds then need not read the points they settle,
// nor the products compute the points' distances. Without `want_sums` the
// frame's cluster sums are not added (a run's last report, where the run
// does not return them).
template <typename Scalar>
void Report(const Frame<Scalar>& frame, const Matrix<Scalar>& model_centers,
            RunResult<Scalar>* result, BoundedAssignment<Scalar>* bounded = nullptr,
            bool objective = true, bool want_sums = true) {
  result->centers = frame.map.ToCaller(model_centers);
  ClusterSums* sums = nullptr;
  if (!want_sums) {
    result->cluster_sums.reset();
  } else if (frame.cluster_sums) {
    sums = &result->cluster_sums.emplace(static_cast<int>(frame.points.rows()),
                                         static_cast<int>(result->centers.cols()));
  }
  result->objective =
      bounded != nullptr
          ? bounded->Assign(result->centers, nullptr, sums, objective)
          : frame.kernels.AssignNearest(frame.points, result->centers, &result->labels, nullptr,
                                        sums, frame.weights, frame.lanes, objective);
}

// Dense runs of fewer points than this use the calling thread alone: their
// products are too small to split over threads, whose synchronisation then
// costs more than it gains (bench/core_bench BM_LearnedModelRun, 20 layers of
// a learned model: n = 512 took 18 ms on one thread and 139 ms on two; at
// n = 1,024, 64 ms and 43 ms).
constexpr Eigen::Index kDenseThreadsFrom = 1024;

// One exact Lloyd's step of the caller's problem: from centers (model
// units) whose nearest-center labels of the caller's points are `labels`,
// the means of those clusters (an empty cluster keeps its center), mapped
// back to the model's units; and how many clusters were empty. In the
// caller's units, so that under any input map the step cannot raise the
// caller's objective.
template <typename Scalar>
struct GuardStep {
  Matrix<Scalar> centers;
  Labels labels;  // the assignment the means are of
  int empty = 0;
};

template <typename Scalar>
GuardStep<Scalar> LloydStep(const Frame<Scalar>& frame, const Matrix<Scalar>& model_centers,
                            const Labels& labels) {
  static const ParameterValues kNone;
  Matrix<Scalar> centers = frame.map.ToCaller(model_centers);
  GuardStep<Scalar> step;
  step.empty = LloydAlgorithm().UpdateCenters({.parameters = kNone}, frame.points, frame.weights,
                                              labels, &centers);
  step.centers = frame.map.ToModel(centers);
  step.labels = labels;
  return step;
}

// The model's layers 0..layers-1; *centers ends as the last layer's centers
// in the model's units. Fewer initial centers than the model's k run as its
// first clusters, the others absent from every block (masked); with
// data_dims < d the points' coordinates from data_dims on are zero padding,
// and the centers' are reset to zero after every layer.
template <typename Scalar>
absl::Status RunDense(const Model<Scalar>& model, const Frame<Scalar>& frame,
                      const Matrix<Scalar>& initial_centers, const RunOptions& options, int layers,
                      int data_dims, Matrix<Scalar>* centers, RunResult<Scalar>* result) {
  std::optional<ScopedOmpThreads> one_thread;
  if (frame.points.cols() < kDenseThreadsFrom) one_thread.emplace(1);
  const int d = model.d, m = model.registers();
  const int k = static_cast<int>(initial_centers.cols());
  const Matrix<Scalar> codes = CenterRegisters<Scalar>(model.embedding, model.k).leftCols(k);
  // The norm layer on the data coordinates of tokens (spherical k-means).
  const auto unit_norm = [&](Matrix<Scalar>* tokens) {
    if (model.unit_norm) ScaleToUnitNorm<Scalar>(tokens->topRows(d));
  };
  Matrix<Scalar> x = EmbedPoints(frame.model_points, m, model.norm_coordinate);
  Matrix<Scalar> c =
      EmbedCentersOf(initial_centers, model.embedding, model.k, model.norm_coordinate);
  unit_norm(&x);
  unit_norm(&c);
  for (int t = 0; t < layers; ++t) {
    if (absl::Status s = BeforeLayer(options, t); !s.ok()) return s;
    const LayerWeights<Scalar>& w = model.layers[t % model.layers.size()];
    if (model.reembed && t > 0) {
      // Only the centers carry over: points start again from [X; 0].
      x = EmbedPoints(frame.model_points, m, model.norm_coordinate);
      unit_norm(&x);
      c.middleRows(d, m) = codes;
    }
    // The guard's candidate: one exact Lloyd's step from the centers this
    // layer starts from, whose labels the last report left.
    GuardStep<Scalar> lloyd;
    if (model.guard) lloyd = LloydStep(frame, Matrix<Scalar>(c.topRows(d)), result->labels);
    // Sampling blocks draw noise keyed by the run's seed and this layer.
    const Sampling sampling{.seed = options.seed, .layer = t};
    const Matrix<Scalar> a1 = Attend(w[BlockId::kPointsToCenters], x, c, nullptr, sampling);
    const Matrix<Scalar> a2 = Attend(w[BlockId::kPointsToPoints], x, x, nullptr, sampling);
    // The residual adds the self-attention block first: under the exact
    // constructions it cancels the old value exactly, so the new value is the
    // cross block's output to the last bit.
    x += a2;
    x += a1;
    // C <- C + A(C, X; to_points) + A(C, C; to_centers), a center without
    // support keeping its token; returns which kept it.
    const auto update_centers = [&](const AttentionBlock<Scalar>& to_points,
                                    const AttentionBlock<Scalar>& to_centers) {
      std::vector<bool> support;
      const Matrix<Scalar> a3 = Attend(to_points, c, x, &support, sampling);
      if (WeighsEveryKey(to_points.normalizer)) {
        // Sparsemax, normmax and Gumbel give some key weight whatever the
        // scores: a center has support when a point carries its code.
        support.assign(k, false);
        for (Eigen::Index i = 0; i < x.cols(); ++i) {
          for (int j = 0; j < k; ++j) {
            if (!support[j] && x.col(i).segment(d, m) == codes.col(j)) support[j] = true;
          }
        }
      }
      const Matrix<Scalar> a4 = Attend(to_centers, c, c, nullptr, sampling);
      Matrix<Scalar> next = c + a4;
      next += a3;
      std::vector<bool> kept(k, false);
      if (model.keep_empty_centers) {
        for (int j = 0; j < k; ++j) {
          if (support[j]) continue;
          next.col(j) = c.col(j);
          kept[j] = true;
        }
      }
      c = std::move(next);
      return kept;
    };
    const std::vector<bool> kept =
        update_centers(w[BlockId::kCentersToPoints], w[BlockId::kCentersToCenters]);
    const int empty_learned = static_cast<int>(std::count(kept.begin(), kept.end(), true));
    // Further center steps see the clusters the layer's update saw; an empty
    // cluster is counted once.
    for (const CenterStep<Scalar>& step : w.center_steps) {
      update_centers(step.to_points, step.to_centers);
    }
    if (w.center_feed_forward) {
      // A kept center's token is already whole: it skips the block too.
      const Matrix<Scalar> f = FeedForwardOutput(*w.center_feed_forward, c);
      for (int j = 0; j < k; ++j) {
        if (!kept[j]) c.col(j) += f.col(j);
      }
    }
    // Padding: the centers stay in the batch's own space, so that every
    // layer's labels and objective are the caller's and the next layer
    // starts from the centers reported.
    if (data_dims < d) c.middleRows(data_dims, d - data_dims).setZero();
    unit_norm(&c);
    int empty = empty_learned;
    result->layers_run = t + 1;
    Report(frame, Matrix<Scalar>(c.topRows(d)), result);
    // The guard keeps the step whose centers give the caller's points the
    // lower objective, the one the run reports, so the reported objectives
    // never increase. Under the global min-max map the model's own
    // objective is the caller's over the squared scale and would choose
    // alike; under a per-dimension map only the caller's is the caller's
    // problem.
    bool lloyd_kept = false;
    if (model.guard) {
      RunResult<Scalar> candidate;
      Report(frame, lloyd.centers, &candidate);
      // A learned step whose objective is not a number loses too.
      lloyd_kept = !(result->objective <= candidate.objective);
      if (lloyd_kept) {
        c.topRows(d) = lloyd.centers;
        result->centers = std::move(candidate.centers);
        result->labels = std::move(candidate.labels);
        result->objective = candidate.objective;
        result->cluster_sums = std::move(candidate.cluster_sums);
        empty = lloyd.empty;
      }
      ++(lloyd_kept ? result->guard_lloyd_layers : result->guard_learned_layers);
    }
    result->empty_cluster_events += empty;
    result->layer_objectives.push_back(result->objective);
    if (options.record_trajectory) {
      LayerRecord<Scalar> record;
      if (lloyd_kept) {
        // The registers Lloyd's assignment writes: each point the code of
        // the center it was nearest to.
        record.registers.resize(m, frame.points.cols());
        for (Eigen::Index i = 0; i < frame.points.cols(); ++i) {
          record.registers.col(i) = codes.col(lloyd.labels[i]);
        }
      } else {
        record.registers = x.middleRows(d, m);
      }
      AssignNearest<Scalar>(record.registers, codes, &record.labels);
      record.centers = result->centers;
      record.objective = result->objective;
      record.empty_clusters = empty;
      result->trajectory.push_back(std::move(record));
    }
  }
  *centers = c.topRows(d);
  return absl::OkStatus();
}

// Lloyd's assignment and the evaluator's center update, registers laid out
// by its embedding, for layers first..options.layers-1.
template <typename Scalar>
absl::Status RunFast(const Evaluator<Scalar>& evaluator, const Frame<Scalar>& frame,
                     const Matrix<Scalar>& initial_centers, const RunOptions& options, int first,
                     BoundedAssignment<Scalar>* bounded, RunResult<Scalar>* result) {
  const int k = evaluator.k;
  const Matrix<Scalar>& points = frame.model_points;
  Matrix<Scalar> centers = initial_centers;
  // The labels the layers see: the reported ones (the bounds' own, where
  // they report) unless the points are mapped.
  Labels model_labels;
  const Labels* labels = bounded != nullptr ? &bounded->labels() : &result->labels;
  if (!frame.map.identity()) {
    AssignNearest(points, centers, &model_labels);
    labels = &model_labels;
  }
  // Lloyd's update from the sums the last report added in its pass.
  const Algorithm& algorithm = *evaluator.algorithm;
  const bool reported_sums = algorithm.UpdatesFromSums() && frame.map.identity();
  static const ParameterValues kNone;
  const ParameterValues& parameters =
      evaluator.parameters != nullptr ? *evaluator.parameters : kNone;
  // The convergence rule compares each layer's assignment with the one
  // before, and its centers with the ones it started from.
  const bool converging = options.shift_tolerance.has_value();
  Labels previous;
  Matrix<Scalar> before;
  for (int t = first; t < options.layers; ++t) {
    if (absl::Status s = BeforeLayer(options, t); !s.ok()) return s;
    if (converging) before = centers;
    int empty = 0;
    if (reported_sums) {
      ClusterSums& sums = *result->cluster_sums;
      if (options.empty_clusters == EmptyClusterPolicy::kRelocateFarthest) {
        empty = RelocateEmptyClusters(points, frame.weights, *labels, centers, &sums);
        algorithm.CentersFromSums(sums, &centers);
      } else {
        empty = algorithm.CentersFromSums(sums, &centers);
        if (options.empty_clusters == EmptyClusterPolicy::kSplitLargest) {
          SplitLargestClusters(&sums, &centers);
        }
      }
    } else {
      empty = algorithm.UpdateCenters({.parameters = parameters, .seed = options.seed, .layer = t},
                                      points, frame.weights, *labels, &centers);
    }
    result->empty_cluster_events += empty;
    result->layers_run = t + 1;
    if (converging) {
      // The bounds count the labels their last call changed, which spares
      // keeping and comparing a copy.
      if (t > first &&
          (bounded != nullptr ? bounded->stats().back().changed == 0 : *labels == previous)) {
        result->convergence = Convergence::kLabelsUnchanged;
      } else if ((centers - before).template cast<double>().squaredNorm() <=
                 *options.shift_tolerance) {
        result->convergence = Convergence::kTolerance;
      } else if (bounded == nullptr) {
        previous = *labels;
      }
    }
    if (options.record_trajectory) {
      LayerRecord<Scalar> record;
      const Matrix<Scalar> codes = CenterRegisters<Scalar>(evaluator.embedding, k);
      record.registers.resize(codes.rows(), points.cols());
      for (Eigen::Index i = 0; i < points.cols(); ++i) {
        record.registers.col(i) = codes.col((*labels)[i]);
      }
      record.labels = *labels;
      record.centers = frame.map.ToCaller(centers);
      record.empty_clusters = empty;
      result->trajectory.push_back(std::move(record));
    }
    // The next layer's theta1 is this layer's objective pass; its
    // objective, where every layer's is kept or this layer is the last.
    const bool last = t == options.layers - 1 || result->convergence != Convergence::kNone;
    Report(frame, centers, result, bounded,
           options.layer_objectives || options.record_trajectory || last,
           !last || options.cluster_sums || bounded != nullptr);
    if (!frame.map.identity()) AssignNearest(points, centers, &model_labels);
    result->layer_objectives.push_back(result->objective);
    if (options.record_trajectory) {
      result->trajectory.back().objective = result->objective;
    }
    if (result->convergence != Convergence::kNone) break;
  }
  return absl::OkStatus();
}

// The checks every run makes of its data against the model's d and k.
template <typename Scalar>
absl::Status ValidateRun(absl::string_view name, int d, int k, const Matrix<Scalar>& points,
                         const Matrix<Scalar>& initial_centers, const RunOptions& options) {
  if (absl::Status s = ValidatePoints(points); !s.ok()) return s;
  if (points.rows() != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("points have d = ", points.rows(), ", model ", name, " expects d = ", d));
  }
  if (initial_centers.cols() != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "initial centers have k = ", initial_centers.cols(), ", model ", name, " expects k = ", k));
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

}  // namespace

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Evaluate(const Evaluator<Scalar>& evaluator,
                                           const Matrix<Scalar>& points,
                                           const Matrix<Scalar>& model_points,
                                           const InputMap<Scalar>& map,
                                           const Matrix<Scalar>& initial_centers,
                                           const RunOptions& options) {
  const Model<Scalar>* weights = evaluator.weights;
  const bool fast = weights == nullptr;
  // A dense model whose later layers are Lloyd's: how many are its own.
  const int dense_layers = fast || weights->lloyd_after == 0
                               ? options.layers
                               : std::min(options.layers, weights->lloyd_after);
  const bool then_lloyd = !fast && dense_layers < options.layers;
  // The fast path's Lloyd's update takes the sums each report adds.
  const bool fast_lloyd =
      (then_lloyd || (fast && evaluator.algorithm->UpdatesFromSums())) && map.identity();
  RunResult<Scalar> result;
  result.path = fast ? Path::kFast : Path::kDense;
  // The fast path's assignments are of the same points to moving centers:
  // bounds can spare most of their distances. (Mapped points are assigned
  // twice a layer, in both units; they keep to the products.)
  // Exact sums are kept there too, whichever path assigns.
  std::optional<BoundedAssignment<Scalar>> bounded;
  const bool may_pay =
      BoundsMayPay(points.cols(), evaluator.k) && evaluator.k <= kMostBoundedClusters;
  const bool exact = options.sums == SumsPath::kExact ||
                     (options.sums == SumsPath::kAuto && may_pay && fast_lloyd);
  const bool bounds = exact || options.assignment == AssignmentPath::kBounds ||
                      (options.assignment == AssignmentPath::kAuto && may_pay);
  if (fast && map.identity() && bounds && options.layers > 0) {
    bounded.emplace(points, evaluator.point_weights, options.assignment, exact);
  }
  // Without bounds, each of the layers assigns every point: the register
  // kernel's lanes of the points are made once for all of them.
  std::optional<PointLanes<Scalar>> lanes;
  const typename SimdKernels<Scalar>::Assignment& kernels = ActiveKernelsOf<Scalar>().assignment;
  if (fast && map.identity() && !bounded && options.layers > 0) {
    lanes.emplace(points, evaluator.k);
  }
  const Frame<Scalar> frame{points,
                            model_points,
                            map,
                            options.cluster_sums || fast_lloyd,
                            evaluator.point_weights,
                            lanes ? &*lanes : nullptr,
                            kernels};
  // The initial centers' objective: a dense run's first guard compares
  // with it, and with no layer it is the run's.
  Report(frame, initial_centers, &result, bounded ? &*bounded : nullptr,
         !fast || options.layers == 0 || options.layer_objectives || options.record_trajectory);
  absl::Status s;
  if (fast) {
    s = RunFast(evaluator, frame, initial_centers, options, 0, bounded ? &*bounded : nullptr,
                &result);
  } else {
    Matrix<Scalar> centers;
    const int data_dims = evaluator.data_dims > 0 ? evaluator.data_dims : weights->d;
    s = RunDense(*weights, frame, initial_centers, options, dense_layers, data_dims, &centers,
                 &result);
    if (s.ok() && then_lloyd) {
      s = RunFast<Scalar>({.embedding = weights->embedding, .k = evaluator.k}, frame, centers,
                          options, dense_layers, nullptr, &result);
    }
  }
  if (!s.ok()) return s;
  if (bounded) {
    result.labels = bounded->labels();
    result.assignments = bounded->stats();
  }
  if (!options.cluster_sums) result.cluster_sums.reset();
  return result;
}

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> RunTransformer(const Model<Scalar>& model,
                                                 const Matrix<Scalar>& points,
                                                 const Matrix<Scalar>& initial_centers,
                                                 const RunOptions& options) {
  if (absl::Status s = ValidateModel(model); !s.ok()) return s;
  if (absl::Status s = ValidateRun(model.name, model.d, model.k, points, initial_centers, options);
      !s.ok()) {
    return s;
  }
  const bool exact = MatchLloyd(model).has_value();
  if (options.path == Path::kFast && !exact) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model ", model.name, " is not an exact Lloyd construction: the fast path cannot run it"));
  }
  const bool fast = exact && options.path != Path::kDense;
  const InputMap<Scalar> map(model.input_scaling, points);
  const Matrix<Scalar> mapped = map.identity() ? Matrix<Scalar>() : map.ToModel(points);
  return Evaluate<Scalar>(
      {.weights = fast ? nullptr : &model, .embedding = model.embedding, .k = model.k}, points,
      map.identity() ? points : mapped, map, map.ToModel(initial_centers), options);
}

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> RunLloyd(const LloydOptions& lloyd, const Matrix<Scalar>& points,
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
  if (absl::Status s = ValidateRun(LloydModelName(lloyd), d, k, points, initial_centers, options);
      !s.ok()) {
    return s;
  }
  return Evaluate<Scalar>({.embedding = lloyd.embedding, .k = k}, points, points,
                          InputMap<Scalar>(InputScaling::kNone, points), initial_centers, options);
}

#define KMT_INSTANTIATE(S)                                                                      \
  template absl::StatusOr<RunResult<S>> Evaluate<S>(const Evaluator<S>&, const Matrix<S>&,      \
                                                    const Matrix<S>&, const InputMap<S>&,       \
                                                    const Matrix<S>&, const RunOptions&);       \
  template absl::StatusOr<RunResult<S>> RunTransformer<S>(const Model<S>&, const Matrix<S>&,    \
                                                          const Matrix<S>&, const RunOptions&); \
  template absl::StatusOr<RunResult<S>> RunLloyd<S>(const LloydOptions&, const Matrix<S>&,      \
                                                    const Matrix<S>&, const RunOptions&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
