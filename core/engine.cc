#include "core/engine.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/distances.h"
#include "core/padding.h"
#include "core/point_moments.h"
#include "core/validation.h"

namespace kmt {

template <typename Scalar>
ServedModel<Scalar> ServedModel<Scalar>::Exact(const Algorithm& algorithm,
                                               const ServedCircuit& served) {
  // Served circuits are the algorithms' own table: one that is not a
  // valid circuit is a programming error.
  assert(ValidateLloydOptions(1, 1, served.options).ok());
  ServedModel m;
  m.name_ = served.name.empty() ? LloydModelName(served.options) : served.name;
  m.description_ = served.description.empty() ? algorithm.description() : served.description;
  m.lloyd_ = served.options;
  m.algorithm_ = &algorithm;
  return m;
}

template <typename Scalar>
absl::StatusOr<ServedModel<Scalar>> ServedModel<Scalar>::FromWeights(Model<Scalar> weights,
                                                                     std::string description) {
  if (absl::Status s = ValidateModel(weights); !s.ok()) return s;
  ServedModel m;
  m.name_ = weights.name;
  m.description_ = std::move(description);
  m.fast_ = MatchLloyd(weights).has_value();
  if (!m.fast_ && weights.reembed && !weights.unit_norm && !weights.norm_coordinate) {
    Model<Scalar> guarded = weights;
    guarded.guard = true;
    m.guarded_ = std::make_shared<const Model<Scalar>>(std::move(guarded));
  }
  m.weights_ = std::make_shared<const Model<Scalar>>(std::move(weights));
  return m;
}

template <typename Scalar>
Embedding ServedModel<Scalar>::embedding() const {
  return weights_ != nullptr ? weights_->embedding : lloyd_.embedding;
}

template <typename Scalar>
InputScaling ServedModel<Scalar>::input_scaling() const {
  return weights_ != nullptr ? weights_->input_scaling : InputScaling::kNone;
}

template <typename Scalar>
InitMethod ServedModel<Scalar>::default_init() const {
  if (weights_ == nullptr || weights_->trained_inits.empty()) return kDefaultInit;
  return weights_->trained_inits.front();
}

template <typename Scalar>
const std::vector<ParameterSpec>& ServedModel<Scalar>::parameters() const {
  static const std::vector<ParameterSpec> kNone;
  return weights_ != nullptr ? kNone : algorithm_->parameters();
}

template <typename Scalar>
std::vector<ModelSize> ServedModel<Scalar>::accepted_sizes() const {
  if (weights_ == nullptr) return {};
  std::vector<ModelSize> sizes = {{.d = weights_->d, .k = weights_->k}};
  sizes.insert(sizes.end(), weights_->padded_sizes.begin(), weights_->padded_sizes.end());
  return sizes;
}

template <typename Scalar>
absl::StatusOr<ClusterPlan<Scalar>> ServedModel<Scalar>::Plan(const Batch<Scalar>& batch) const {
  const BatchSpec<Scalar>& spec = batch.spec();
  const ParameterValues& given = spec.parameters;
  ClusterPlan<Scalar> plan{.model = this, .batch = &batch};
  if (weights_ != nullptr) {
    const std::vector<ModelSize> sizes = accepted_sizes();
    const ModelSize size{.d = batch.d(), .k = batch.k()};
    if (std::find(sizes.begin(), sizes.end(), size) == sizes.end()) {
      std::string padded;
      for (size_t i = 1; i < sizes.size(); ++i) {
        absl::StrAppend(&padded, i == 1 ? "" : ", ", "(", sizes[i].d, ", ", sizes[i].k, ")");
      }
      return absl::InvalidArgumentError(
          absl::StrCat("model ", name_, " was trained for d = ", weights_->d, ", k = ", weights_->k,
                       padded.empty() ? "" : " and serves by padding (d, k) = ", padded,
                       "; the batch has d = ", batch.d(), ", k = ", batch.k()));
    }
    if (!given.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          given.begin()->first, " applies to the exact models; ", name_, " is learned"));
    }
    if (spec.guard && guarded_ == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "guard applies to learned models that re-embed; ", name_,
          fast_ ? " is an exact Lloyd construction" : " carries its registers or norms over"));
    }
    const char* exact_only = spec.weights.size() > 0                            ? "weights"
                             : spec.tol                                         ? "tol"
                             : spec.empty_clusters != EmptyClusterPolicy::kKeep ? "empty_clusters"
                                                                                : nullptr;
    if (exact_only != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(exact_only, " applies to the exact models; ", name_, " is learned"));
    }
    plan.dense = !fast_;
    return plan;
  }
  // The circuit was checked when the model was made (Exact), and the
  // batch's d and k by Batch::Validate.
  if (spec.guard) {
    return absl::InvalidArgumentError(
        absl::StrCat("guard applies to the learned models; ", name_, " is exact"));
  }
  absl::StatusOr<ParameterValues> resolved =
      ResolveParameters(name_, algorithm_->parameters(), given, algorithm_->unread_hint());
  if (!resolved.ok()) return resolved.status();
  if (spec.weights.size() > 0 && !algorithm_->weighted()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", name_, " takes no weights: ", algorithm_->name(),
        " has no standard weighted form (ListModels says which models accept weights)"));
  }
  plan.parameters = *std::move(resolved);
  plan.dense = algorithm_->RunsDense(plan.parameters);
  // What the fast path alone does: convergence and the empty-cluster
  // policies need the centers of every layer from their clusters' sums.
  if (plan.dense && (spec.tol || spec.weights.size() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.tol ? "tol" : "weights", " applies to runs on the fast path; ", name_,
                     " with these parameters runs the dense evaluator"));
  }
  if (spec.empty_clusters != EmptyClusterPolicy::kKeep &&
      (plan.dense || !algorithm_->UpdatesFromSums())) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty_clusters = ", EmptyClusterPolicyName(spec.empty_clusters),
                     " applies to models "
                     "whose centers are their clusters' means (Lloyd's, spherical k-means); ",
                     name_, " keeps an empty cluster's center"));
  }
  return plan;
}

template <typename Scalar>
std::vector<ServedModel<Scalar>> ExactModels() {
  std::vector<ServedModel<Scalar>> models;
  for (const Algorithm* algorithm : Algorithms()) {
    for (const ServedCircuit& served : algorithm->served()) {
      models.push_back(ServedModel<Scalar>::Exact(*algorithm, served));
    }
  }
  return models;
}

namespace {

// scikit-learn's tolerance in squared units of the points: tol times the
// mean over dimensions of their (unweighted, population) variance.
template <typename Scalar>
double ShiftTolerance(const Matrix<Scalar>& points, double tol) {
  if (tol == 0) return 0;
  PointMoments moments;
  moments.Add(points.data(), points.cols(), static_cast<int>(points.rows()));
  return tol * moments.MeanVariance();
}

// The squared distances a batch asked for, of `points` to the final centers.
template <typename Scalar>
Matrix<Scalar> Distances(DistanceOutput output, const Matrix<Scalar>& points,
                         const RunResult<Scalar>& run) {
  if (output == DistanceOutput::kNearest) {
    Matrix<Scalar> nearest(1, points.cols());
    for (Eigen::Index i = 0; i < points.cols(); ++i) {
      nearest(0, i) = (points.col(i) - run.centers.col(run.labels[i])).squaredNorm();
    }
    return nearest;
  }
  Matrix<Scalar> all;
  SquaredDistances<Scalar>(points, SquaredNorms<Scalar>(points), run.centers,
                           SquaredNorms<Scalar>(run.centers), &all);
  return all.transpose();
}

}  // namespace

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Cluster(const ServedModel<Scalar>& model,
                                          const Batch<Scalar>& batch, const StopCheck& check) {
  absl::StatusOr<ClusterPlan<Scalar>> plan = model.Plan(batch);
  if (!plan.ok()) return plan.status();
  return Cluster(*plan, check);
}

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Cluster(const ClusterPlan<Scalar>& plan, const StopCheck& check) {
  const ServedModel<Scalar>& model = *plan.model;
  const Batch<Scalar>& batch = *plan.batch;
  const BatchSpec<Scalar>& spec = batch.spec();
  const Algorithm& algorithm = model.algorithm();
  const ParameterValues& parameters = plan.parameters;
  // The algorithm's preparation (spherical k-means' norm layer) of the
  // points and given centers; results are reported for what it made.
  Matrix<Scalar> prepared_points, prepared_centers;
  const bool prepares = model.exact() && algorithm.Prepares();
  if (prepares) {
    prepared_points = spec.points;
    if (absl::Status s = algorithm.Prepare(&prepared_points, "point"); !s.ok()) return s;
    if (spec.given_centers.size() > 0) {
      prepared_centers = spec.given_centers;
      if (absl::Status s = algorithm.Prepare(&prepared_centers, "center"); !s.ok()) return s;
    }
  }
  const Matrix<Scalar>& points = prepares ? prepared_points : spec.points;
  const Matrix<Scalar>& given = prepares ? prepared_centers : spec.given_centers;
  const Vector<Scalar>* weights = spec.weights.size() > 0 ? &spec.weights : nullptr;
  // The model sees the batch through its input map; centers it is given
  // are mapped too, centers it chooses are chosen among the mapped points.
  // A batch below a learned model's size runs padded (padding.h): zero
  // coordinates up to the model's d, its centers the model's first
  // clusters; the result is cut back to the batch's d below.
  const Model<Scalar>* own = model.weights();
  const bool padded = own != nullptr && (batch.d() < own->d || spec.k < own->k);
  const Matrix<Scalar> padded_points = padded ? PadRows(points, own->d) : Matrix<Scalar>();
  const Matrix<Scalar>& run_points = padded ? padded_points : points;
  const InputMap<Scalar> map(model.input_scaling(), run_points);
  const Matrix<Scalar> mapped = map.identity() ? Matrix<Scalar>() : map.ToModel(run_points);
  const Matrix<Scalar>& model_points = map.identity() ? run_points : mapped;

  // A dense circuit of an exact model has weights only for this d, k and
  // parameters: it is built for the batch.
  Model<Scalar> circuit;
  Evaluator<Scalar> evaluator{.embedding = model.embedding(),
                              .k = spec.k,
                              .algorithm = &algorithm,
                              .parameters = &parameters,
                              .point_weights = weights,
                              .data_dims = batch.d()};
  if (model.exact() && plan.dense) {
    if (absl::Status s =
            algorithm.DenseCircuit(batch.d(), spec.k, model.circuit(), parameters, &circuit);
        !s.ok()) {
      return s;
    }
    evaluator.weights = &circuit;
  } else if (plan.dense) {
    evaluator.weights = spec.guard ? model.guarded_weights() : model.weights();
  }

  // Restart r starts from seed + r; the lowest objective wins (ties: the
  // first).
  absl::StatusOr<RunResult<Scalar>> best;
  std::vector<double> objectives;
  for (int r = 0; r < spec.n_init; ++r) {
    // A deadline or cancellation stops the restarts too (a run of 0
    // layers checks nothing itself).
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    const uint64_t seed = spec.seed + static_cast<uint64_t>(r);
    Matrix<Scalar> initial;
    if (given.size() > 0) {
      initial = map.ToModel(padded ? PadRows(given, own->d) : given);
    } else {
      absl::StatusOr<Matrix<Scalar>> chosen = ChooseInitialCenters(
          model_points, spec.k, spec.init.value_or(model.default_init()), seed, check, weights);
      if (!chosen.ok()) return chosen.status();
      initial = *std::move(chosen);
    }
    const RunOptions options{
        .layers = spec.layers,
        .record_trajectory = spec.record_trajectory,
        .layer_objectives = spec.layer_objectives,
        .seed = seed,
        .cluster_sums = spec.cluster_sums,
        .before_layer = [&check](int) { return check ? check() : absl::OkStatus(); },
        .shift_tolerance = spec.tol ? std::optional<double>(ShiftTolerance(model_points, *spec.tol))
                                    : std::nullopt,
        .empty_clusters = spec.empty_clusters};
    absl::StatusOr<RunResult<Scalar>> run =
        Evaluate(evaluator, run_points, model_points, map, initial, options);
    if (!run.ok()) return run.status();
    if (padded) Unpad(points, batch.d(), &*run);
    if (spec.guard) {
      // The answer is never behind exact Lloyd's from the same initial
      // centers for the same layers: the lower of the two final objectives
      // answers (a learned one that is not a number loses).
      const Matrix<Scalar> start =
          given.size() > 0 ? given
                           : Matrix<Scalar>(map.ToCaller(initial).topLeftCorner(batch.d(), spec.k));
      absl::StatusOr<RunResult<Scalar>> lloyd =
          RunLloyd<Scalar>({}, points, start,
                           {.layers = spec.layers,
                            .cluster_sums = spec.cluster_sums,
                            .before_layer = options.before_layer});
      if (!lloyd.ok()) return lloyd.status();
      if (!(run->objective <= lloyd->objective)) {
        lloyd->guard_learned_layers = run->guard_learned_layers;
        lloyd->guard_lloyd_layers = run->guard_lloyd_layers;
        lloyd->guard_lloyd_answered = true;
        run = std::move(lloyd);
      }
    }
    if (absl::Status s =
            ValidateAnswer(run->objective, run->centers, spec.weights, model.name(), model.exact());
        !s.ok()) {
      return s;
    }
    objectives.push_back(run->objective);
    if (r == 0 || run->objective < best->objective) {
      best = std::move(run);
      best->best_restart = r;
    }
  }
  if (spec.n_init > 1) best->restart_objectives = std::move(objectives);
  if (spec.distances != DistanceOutput::kNone) {
    best->distances = Distances(spec.distances, points, *best);
  }
  return best;
}

#define KMT_INSTANTIATE(S)                                                                 \
  template class ServedModel<S>;                                                           \
  template std::vector<ServedModel<S>> ExactModels<S>();                                   \
  template absl::StatusOr<RunResult<S>> Cluster<S>(const ServedModel<S>&, const Batch<S>&, \
                                                   const StopCheck&);                      \
  template absl::StatusOr<RunResult<S>> Cluster<S>(const ClusterPlan<S>&, const StopCheck&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
