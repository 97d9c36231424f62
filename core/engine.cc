#include "core/engine.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kmt {

template <typename Scalar>
ServedModel<Scalar> ServedModel<Scalar>::Exact(const LloydOptions& options, std::string description,
                                               Algorithm algorithm,
                                               std::vector<ParameterSpec> parameters,
                                               std::string name) {
  ServedModel m;
  m.name_ = name.empty() ? LloydModelName(options) : std::move(name);
  m.description_ = std::move(description);
  m.lloyd_ = options;
  m.algorithm_ = algorithm;
  m.parameters_ = std::move(parameters);
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

namespace {

// The parameters the batch sets, by name: beta and gamma when not 0, tau
// when present.
template <typename Scalar>
std::vector<std::pair<const char*, double>> Given(const Batch<Scalar>& batch) {
  const BatchSpec<Scalar>& spec = batch.spec();
  std::vector<std::pair<const char*, double>> given;
  if (spec.beta != 0) given.emplace_back("beta", spec.beta);
  if (spec.tau) given.emplace_back("tau", *spec.tau);
  if (spec.gamma != 0) given.emplace_back("gamma", spec.gamma);
  return given;
}

const ParameterSpec* FindParameter(const std::vector<ParameterSpec>& specs,
                                   absl::string_view name) {
  for (const ParameterSpec& p : specs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace

template <typename Scalar>
absl::Status ServedModel<Scalar>::Accepts(const Batch<Scalar>& batch) const {
  if (weights_ != nullptr) {
    if (batch.d() != weights_->d || batch.k() != weights_->k) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", name_, " was trained for d = ", weights_->d, ", k = ", weights_->k,
                       "; the batch has d = ", batch.d(), ", k = ", batch.k()));
    }
  } else if (absl::Status s = ValidateLloydOptions(batch.d(), batch.k(), lloyd_); !s.ok()) {
    return s;
  }
  for (const auto& [name, value] : Given(batch)) {
    const ParameterSpec* spec = FindParameter(parameters_, name);
    if (spec == nullptr) {
      if (weights_ != nullptr && absl::string_view(name) == "beta") {
        return absl::InvalidArgumentError(
            absl::StrCat("beta applies to the exact models; ", name_, " is learned"));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          name, " = ", value, ": model ", name_, " has no parameter ", name,
          absl::string_view(name) == "beta" && algorithm_ == Algorithm::kLloyd
              ? " (a softmax assignment is soft-kmeans, or lloyd-onehot-linear with beta)"
              : ""));
    }
    const bool low = spec->min_exclusive ? value <= spec->min : value < spec->min;
    if (low || value > spec->max) {
      return absl::InvalidArgumentError(absl::StrCat(name, " = ", value, " is out of range for ",
                                                     name_, ": ", spec->min_exclusive ? "(" : "[",
                                                     spec->min, ", ", spec->max, "]"));
    }
  }
  return absl::OkStatus();
}

template <typename Scalar>
VariantParameters ServedModel<Scalar>::Resolve(const Batch<Scalar>& batch) const {
  // A parameter the batch leaves unset (0 for beta and gamma) takes the
  // model's default.
  const auto value = [&](const char* name, std::optional<double> given) {
    const ParameterSpec* spec = FindParameter(parameters_, name);
    return !given && spec != nullptr ? spec->default_value : given.value_or(0);
  };
  const auto set = [](double v) { return v != 0 ? std::optional<double>(v) : std::nullopt; };
  const BatchSpec<Scalar>& spec = batch.spec();
  const double gamma = value("gamma", set(spec.gamma));
  return {.beta = value("beta", set(spec.beta)),
          .tau = value("tau", spec.tau),
          .gamma = gamma == 0 ? std::numeric_limits<double>::infinity() : gamma,
          .seed = spec.seed};
}

template <typename Scalar>
bool ServedModel<Scalar>::RunsDense(const Batch<Scalar>& batch) const {
  if (weights_ != nullptr) return !fast_;
  // Lloyd's circuit with a softmax assignment (lloyd-onehot-linear's beta).
  const double beta = Resolve(batch).beta;
  return algorithm_ == Algorithm::kLloyd && std::isfinite(beta) && beta > 0;
}

template <typename Scalar>
std::vector<ServedModel<Scalar>> ExactModels() {
  const double inf = std::numeric_limits<double>::infinity();
  using M = ServedModel<Scalar>;
  return {
      M::Exact({.embedding = Embedding::kOneHot},
               "Lloyd's algorithm, one-hot registers (d + k per token), hardmax center update; "
               "any d and k"),
      M::Exact({.embedding = Embedding::kBinary},
               "Lloyd's algorithm, binary registers (d + ceil(log2 k) per token); any d and k"),
      M::Exact({.embedding = Embedding::kOneHot, .theta3 = Theta3Form::kLinear},
               "Lloyd's algorithm, one-hot registers, linear-attention center update (paper A's "
               "form); beta > 0 makes the assignment a softmax, run by the dense evaluator (soft "
               "k-means; soft-kmeans runs it in O(n k d))",
               Algorithm::kLloyd,
               {{.name = "beta",
                 .description = "inverse temperature of the softmax assignment; default: hardmax",
                 .default_value = inf,
                 .min = 0,
                 .max = inf,
                 .min_exclusive = true}}),
      M::Exact({.embedding = Embedding::kOneHot,
                .theta3 = Theta3Form::kLinear,
                .score = ScoreKind::kDotProduct},
               "Lloyd's algorithm as paper A's Theorem 2.2 circuit: dot-product attention over "
               "tokens carrying their squared norm (d + k + 1 per token), a ReLU^2 feed-forward "
               "block recomputing the centers' norms; any d and k"),
      M::Exact({.embedding = Embedding::kOneHot, .theta3 = Theta3Form::kLinear},
               "soft k-means: responsibilities softmax_j(-beta ||x_i - c_j||^2), centers their "
               "weighted means (theta1 softmax, theta3 linear attention); any d and k",
               Algorithm::kSoftKMeans,
               {{.name = "beta",
                 .description = "inverse temperature of the responsibilities, in 1 / squared "
                                "units of the data; Lloyd's as beta grows",
                 .default_value = 100,
                 .min = 0,
                 .max = inf,
                 .min_exclusive = true}},
               "soft-kmeans"),
      M::Exact({.embedding = Embedding::kOneHot},
               "trimmed k-means: each center the mean of the r points of its cluster nearest it, "
               "r chosen by normmax (the r maximising the mean of -||x_i - c_j||^2 over them "
               "minus tau / r); far points of a cluster do not move its center",
               Algorithm::kTrimmedKMeans,
               {{.name = "tau",
                 .description = "normmax's regularization, in squared units of the data: 0 keeps "
                                "the nearest point only, larger keeps more (Lloyd's as tau grows)",
                 .default_value = 1,
                 .min = 0,
                 .max = inf}},
               "trimmed-kmeans"),
      M::Exact({.embedding = Embedding::kOneHot},
               "robust k-means: each center the sparsemax(-beta ||x_i - c_j||^2)-weighted mean "
               "of its cluster's points; far points get weight exactly 0",
               Algorithm::kRobustKMeans,
               {{.name = "beta",
                 .description = "inverse temperature of the sparsemax, in 1 / squared units of the "
                                "data: small is the cluster's mean, large its nearest point",
                 .default_value = 1,
                 .min = 0,
                 .max = inf,
                 .min_exclusive = true}},
               "robust-kmeans"),
      M::Exact({.embedding = Embedding::kOneHot},
               "randomized k-medoids: each center the mean of its cluster, then a point of the "
               "cluster drawn with probability proportional to exp(-gamma ||x_i - mean||^2) "
               "(Gumbel-max, keyed by seed, layer and cluster); centers are always data points",
               Algorithm::kKMedoids,
               {{.name = "gamma",
                 .description = "inverse temperature of the draw, in 1 / squared units of the "
                                "data; infinity: the point nearest the mean",
                 .default_value = inf,
                 .min = 0,
                 .max = inf}},
               "kmedoids"),
      M::Exact({.embedding = Embedding::kOneHot},
               "spherical k-means: points and centers of unit norm (a norm layer), assignment by "
               "largest cosine, centers the normalized means; a point of norm 0 is an error",
               Algorithm::kSphericalKMeans, {}, "spherical-kmeans"),
  };
}

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Cluster(const ServedModel<Scalar>& model,
                                          const Batch<Scalar>& batch, const StopCheck& check) {
  if (absl::Status s = model.Accepts(batch); !s.ok()) return s;
  const BatchSpec<Scalar>& spec = batch.spec();
  const VariantParameters parameters = model.Resolve(batch);
  // Spherical k-means' norm layer: the points and given centers become
  // directions, and results are reported for those.
  Matrix<Scalar> unit_points, unit_centers;
  const bool spherical = model.algorithm() == Algorithm::kSphericalKMeans;
  if (spherical) {
    unit_points = spec.points;
    if (absl::Status s = NormalizeColumns(&unit_points, "point"); !s.ok()) return s;
    if (spec.given_centers.size() > 0) {
      unit_centers = spec.given_centers;
      if (absl::Status s = NormalizeColumns(&unit_centers, "center"); !s.ok()) return s;
    }
  }
  const Matrix<Scalar>& points = spherical ? unit_points : spec.points;
  const Matrix<Scalar>& given = spherical ? unit_centers : spec.given_centers;
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

  // Lloyd's circuit with a softmax assignment has weights only for this d,
  // k and beta: they are built for the batch.
  Model<Scalar> softmax_construction;
  Evaluator<Scalar> evaluator{.embedding = model.embedding(),
                              .k = spec.k,
                              .algorithm = model.algorithm(),
                              .parameters = parameters};
  const bool dense = model.RunsDense(batch);
  if (model.exact() && dense) {
    absl::StatusOr<Model<Scalar>> built = LloydConstruction<Scalar>(
        batch.d(), spec.k,
        {.embedding = model.embedding(), .theta3 = model.theta3(), .beta = parameters.beta});
    if (!built.ok()) return built.status();
    softmax_construction = *std::move(built);
    evaluator.weights = &softmax_construction;
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
