#include "core/engine.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kmt {

template <typename Scalar>
ServedModel<Scalar> ServedModel<Scalar>::Exact(const Algorithm& algorithm,
                                               const ServedCircuit& served) {
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
absl::Status ServedModel<Scalar>::Accepts(const Batch<Scalar>& batch) const {
  const ParameterValues& given = batch.spec().parameters;
  if (weights_ != nullptr) {
    if (batch.d() != weights_->d || batch.k() != weights_->k) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", name_, " was trained for d = ", weights_->d, ", k = ", weights_->k,
                       "; the batch has d = ", batch.d(), ", k = ", batch.k()));
    }
    if (!given.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          given.begin()->first, " applies to the exact models; ", name_, " is learned"));
    }
    return absl::OkStatus();
  }
  if (absl::Status s = ValidateLloydOptions(batch.d(), batch.k(), lloyd_); !s.ok()) return s;
  return CheckParameters(name_, algorithm_->parameters(), given, algorithm_->unread_hint());
}

template <typename Scalar>
ParameterValues ServedModel<Scalar>::Resolve(const Batch<Scalar>& batch) const {
  return ResolveParameters(parameters(), batch.spec().parameters);
}

template <typename Scalar>
bool ServedModel<Scalar>::RunsDense(const Batch<Scalar>& batch) const {
  if (weights_ != nullptr) return !fast_;
  return algorithm_->RunsDense(Resolve(batch));
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

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Cluster(const ServedModel<Scalar>& model,
                                          const Batch<Scalar>& batch, const StopCheck& check) {
  if (absl::Status s = model.Accepts(batch); !s.ok()) return s;
  const BatchSpec<Scalar>& spec = batch.spec();
  const Algorithm& algorithm = model.algorithm();
  const ParameterValues parameters = model.Resolve(batch);
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
  // The model sees the batch through its input map; centers it is given
  // are mapped too, centers it chooses are chosen among the mapped points.
  const InputMap<Scalar> map(model.input_scaling(), points);
  const Matrix<Scalar> mapped = map.identity() ? Matrix<Scalar>() : map.ToModel(points);
  const Matrix<Scalar>& model_points = map.identity() ? points : mapped;
  Matrix<Scalar> initial;
  if (given.size() > 0) {
    initial = map.ToModel(given);
  } else {
    absl::StatusOr<Matrix<Scalar>> chosen = ChooseInitialCenters(
        model_points, spec.k, spec.init.value_or(model.default_init()), spec.seed, check);
    if (!chosen.ok()) return chosen.status();
    initial = *std::move(chosen);
  }

  // A dense circuit of an exact model has weights only for this d, k and
  // parameters: it is built for the batch.
  Model<Scalar> circuit;
  Evaluator<Scalar> evaluator{.embedding = model.embedding(),
                              .k = spec.k,
                              .algorithm = &algorithm,
                              .parameters = &parameters};
  const bool dense = model.RunsDense(batch);
  if (model.exact() && dense) {
    if (absl::Status s =
            algorithm.DenseCircuit(batch.d(), spec.k, model.circuit(), parameters, &circuit);
        !s.ok()) {
      return s;
    }
    evaluator.weights = &circuit;
  } else if (dense) {
    evaluator.weights = model.weights();
  }
  const RunOptions options{
      .layers = spec.layers,
      .record_trajectory = spec.record_trajectory,
      .seed = spec.seed,
      .cluster_sums = spec.cluster_sums,
      .before_layer = [&check](int) { return check ? check() : absl::OkStatus(); }};
  absl::StatusOr<RunResult<Scalar>> run =
      Evaluate(evaluator, points, model_points, map, initial, options);
  if (!run.ok()) return run.status();
  // Coordinates within MaxCoordinate cannot overflow; fixed weights can
  // still move centers anywhere. No non-finite number leaves the engine.
  if (!std::isfinite(run->objective) || !run->centers.allFinite()) {
    return absl::InternalError(absl::StrCat("model ", model.name(),
                                            " produced non-finite centers or objective on this "
                                            "batch; its weights are unfit for these points"));
  }
  return run;
}

#define KMT_INSTANTIATE(S)                                                                 \
  template class ServedModel<S>;                                                           \
  template std::vector<ServedModel<S>> ExactModels<S>();                                   \
  template absl::StatusOr<RunResult<S>> Cluster<S>(const ServedModel<S>&, const Batch<S>&, \
                                                   const StopCheck&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
