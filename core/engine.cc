#include "core/engine.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kmt {

template <typename Scalar>
ServedModel<Scalar> ServedModel<Scalar>::Exact(const LloydOptions& options,
                                               std::string description) {
  ServedModel m;
  m.name_ = LloydModelName(options);
  m.description_ = std::move(description);
  m.lloyd_ = options;
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
absl::Status ServedModel<Scalar>::Accepts(const Batch<Scalar>& batch) const {
  if (weights_ == nullptr) return ValidateLloydOptions(batch.d(), batch.k(), lloyd_);
  if (batch.d() != weights_->d || batch.k() != weights_->k) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", name_, " was trained for d = ", weights_->d, ", k = ", weights_->k,
                     "; the batch has d = ", batch.d(), ", k = ", batch.k()));
  }
  if (batch.spec().beta != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("beta applies to the exact models; ", name_, " is learned"));
  }
  return absl::OkStatus();
}

template <typename Scalar>
bool ServedModel<Scalar>::RunsDense(const Batch<Scalar>& batch) const {
  return weights_ != nullptr ? !fast_ : batch.spec().beta > 0;
}

template <typename Scalar>
std::vector<ServedModel<Scalar>> ExactModels() {
  return {
      ServedModel<Scalar>::Exact(
          {.embedding = Embedding::kOneHot},
          "Lloyd's algorithm, one-hot registers (d + k per token), hardmax "
          "center update; any d and k; beta > 0 makes the assignment a softmax"),
      ServedModel<Scalar>::Exact(
          {.embedding = Embedding::kBinary},
          "Lloyd's algorithm, binary registers (d + ceil(log2 k) per token); "
          "any d and k; beta > 0 makes the assignment a softmax"),
      ServedModel<Scalar>::Exact({.embedding = Embedding::kOneHot, .theta3 = Theta3Form::kLinear},
                                 "Lloyd's algorithm, one-hot registers, linear-attention center "
                                 "update (paper A's form); with beta > 0 it is soft k-means"),
  };
}

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Cluster(const ServedModel<Scalar>& model,
                                          const Batch<Scalar>& batch, const StopCheck& check) {
  if (absl::Status s = model.Accepts(batch); !s.ok()) return s;
  const BatchSpec<Scalar>& spec = batch.spec();
  // The model sees the batch through its input map; centers it is given
  // are mapped too, centers it chooses are chosen among the mapped points.
  const InputMap<Scalar> map(model.input_scaling(), spec.points);
  const Matrix<Scalar> mapped = map.identity() ? Matrix<Scalar>() : map.ToModel(spec.points);
  const Matrix<Scalar>& model_points = map.identity() ? spec.points : mapped;
  Matrix<Scalar> initial;
  if (spec.given_centers.size() > 0) {
    initial = map.ToModel(spec.given_centers);
  } else {
    absl::StatusOr<Matrix<Scalar>> chosen =
        ChooseInitialCenters(model_points, spec.k, spec.init, spec.seed, check);
    if (!chosen.ok()) return chosen.status();
    initial = *std::move(chosen);
  }

  // An exact construction with a softmax assignment has weights only for
  // this d, k and beta: they are built for the batch.
  Model<Scalar> softmax_construction;
  Evaluator<Scalar> evaluator{.embedding = model.embedding(), .k = spec.k};
  if (model.exact() && spec.beta > 0) {
    absl::StatusOr<Model<Scalar>> built = LloydConstruction<Scalar>(
        batch.d(), spec.k,
        {.embedding = model.embedding(), .theta3 = model.theta3(), .beta = spec.beta});
    if (!built.ok()) return built.status();
    softmax_construction = *std::move(built);
    evaluator.weights = &softmax_construction;
  } else if (model.RunsDense(batch)) {
    evaluator.weights = model.weights();
  }
  const RunOptions options{
      .layers = spec.layers,
      .record_trajectory = spec.record_trajectory,
      .before_layer = [&check](int) { return check ? check() : absl::OkStatus(); }};
  absl::StatusOr<RunResult<Scalar>> run =
      Evaluate(evaluator, spec.points, model_points, map, initial, options);
  if (!run.ok()) return run.status();
  if (spec.cluster_sums) {
    run->cluster_sums.emplace(batch.d(), spec.k);
    AccumulateClusterSums(spec.points, run->labels, &*run->cluster_sums);
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
