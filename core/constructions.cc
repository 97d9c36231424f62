#include "core/constructions.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kmt {
namespace {

// Projection onto the data rows (data = true) or the register rows.
template <typename Scalar>
Matrix<Scalar> Projector(int d, int m, bool data) {
  Matrix<Scalar> p = Matrix<Scalar>::Zero(d + m, d + m);
  if (data) {
    p.topLeftCorner(d, d).setIdentity();
  } else {
    p.bottomRightCorner(m, m).setIdentity();
  }
  return p;
}

template <typename Scalar>
AttentionBlock<Scalar> Block(const Matrix<Scalar>& qk, const Matrix<Scalar>& v, ScoreKind score,
                             Normalizer normalizer) {
  AttentionBlock<Scalar> b = AttentionBlock<Scalar>::Zero(qk.rows());
  b.Q = qk;
  b.K = qk;
  b.V = v;
  b.score = score;
  b.normalizer = normalizer;
  return b;
}

template <typename Scalar>
bool SameBlock(const AttentionBlock<Scalar>& a, const AttentionBlock<Scalar>& b) {
  return a.score == b.score && a.normalizer == b.normalizer && a.ties == b.ties &&
         a.beta == b.beta && a.tau == b.tau && a.Q == b.Q && a.K == b.K && a.V == b.V &&
         a.bQ == b.bQ && a.bK == b.bK && a.bV == b.bV;
}

}  // namespace

absl::string_view Theta3FormName(Theta3Form form) {
  return form == Theta3Form::kHardmax ? "hardmax" : "linear";
}

absl::StatusOr<Theta3Form> ParseTheta3Form(absl::string_view name) {
  for (Theta3Form f : {Theta3Form::kHardmax, Theta3Form::kLinear}) {
    if (name == Theta3FormName(f)) return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown theta3 form '", name, "', expected hardmax or linear"));
}

absl::Status ValidateLloydOptions(int d, int k, const LloydOptions& options) {
  if (d < 1 || k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Lloyd construction needs d >= 1 and k >= 1, got d = ", d, ", k = ", k));
  }
  if (options.embedding == Embedding::kNone) {
    return absl::InvalidArgumentError(
        "Lloyd construction needs cluster registers: embedding none has none");
  }
  if (options.theta3 == Theta3Form::kLinear && options.embedding != Embedding::kOneHot) {
    return absl::InvalidArgumentError(
        "linear theta3 needs one-hot registers: the binary code of cluster 0 "
        "is all zeros, so its dot products vanish");
  }
  if (!(options.beta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("inverse temperature ", options.beta, " must be positive"));
  }
  return absl::OkStatus();
}

std::string LloydModelName(const LloydOptions& options) {
  std::string name = absl::StrCat("lloyd-", EmbeddingName(options.embedding));
  if (options.theta3 == Theta3Form::kLinear) absl::StrAppend(&name, "-linear");
  if (!std::isinf(options.beta)) absl::StrAppend(&name, "-softmax");
  return name;
}

template <typename Scalar>
absl::StatusOr<Model<Scalar>> LloydConstruction(int d, int k, const LloydOptions& options) {
  if (absl::Status s = ValidateLloydOptions(d, k, options); !s.ok()) return s;
  Model<Scalar> model;
  model.d = d;
  model.k = k;
  model.embedding = options.embedding;
  const int m = model.registers();
  const Matrix<Scalar> px = Projector<Scalar>(d, m, true);
  const Matrix<Scalar> pr = Projector<Scalar>(d, m, false);
  const auto euclidean = ScoreKind::kEuclidean;
  const auto hardmax = Normalizer::kHardmax;

  LayerWeights<Scalar> w;
  AttentionBlock<Scalar>& theta1 = w[BlockId::kPointsToCenters];
  theta1 = Block<Scalar>(px, pr, euclidean, hardmax);
  theta1.ties = Ties::kLowestIndex;
  if (!std::isinf(options.beta)) {
    theta1.normalizer = Normalizer::kSoftmax;
    theta1.beta = static_cast<Scalar>(options.beta);
  }
  w[BlockId::kPointsToPoints] = Block<Scalar>(px, -pr, euclidean, hardmax);
  w[BlockId::kCentersToPoints] =
      options.theta3 == Theta3Form::kHardmax
          ? Block<Scalar>(pr, px, euclidean, hardmax)
          : Block<Scalar>(pr, px, ScoreKind::kDotProduct, Normalizer::kLinear);
  w[BlockId::kCentersToCenters] = Block<Scalar>(pr, -px, euclidean, hardmax);
  model.layers.push_back(std::move(w));

  model.name = LloydModelName(options);
  return model;
}

template <typename Scalar>
absl::StatusOr<Model<Scalar>> ClusterRestrictedConstruction(int d, int k, Normalizer normalizer,
                                                            double beta, double tau,
                                                            double register_penalty) {
  if (normalizer != Normalizer::kSparsemax && normalizer != Normalizer::kNormmax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a cluster-restricted theta3 is sparsemax or normmax, not ", NormalizerName(normalizer)));
  }
  if (!(register_penalty > 0) || !std::isfinite(register_penalty)) {
    return absl::InvalidArgumentError(
        absl::StrCat("register penalty ", register_penalty, " must be positive and finite"));
  }
  const double scale = normalizer == Normalizer::kSparsemax ? beta : 1.0;
  if (!(scale > 0) || !std::isfinite(scale)) {
    return absl::InvalidArgumentError(absl::StrCat("beta ", beta, " must be positive and finite"));
  }
  absl::StatusOr<Model<Scalar>> model = LloydConstruction<Scalar>(d, k, {});
  if (!model.ok()) return model;
  const int m = model->registers();
  Matrix<Scalar> qk = Matrix<Scalar>::Zero(d + m, d + m);
  qk.topLeftCorner(d, d).diagonal().setConstant(static_cast<Scalar>(std::sqrt(scale)));
  qk.bottomRightCorner(m, m).diagonal().setConstant(
      static_cast<Scalar>(std::sqrt(register_penalty)));
  AttentionBlock<Scalar>& theta3 = model->layers[0][BlockId::kCentersToPoints];
  theta3.Q = qk;
  theta3.K = qk;
  theta3.normalizer = normalizer;
  theta3.beta = 1;
  theta3.tau = static_cast<Scalar>(tau);
  model->name = normalizer == Normalizer::kSparsemax ? "robust-kmeans" : "trimmed-kmeans";
  return model;
}

template <typename Scalar>
absl::StatusOr<Model<Scalar>> KMedoidsConstruction(int d, int k, double gamma,
                                                   double register_penalty) {
  if (!(register_penalty > 0) || !std::isfinite(register_penalty)) {
    return absl::InvalidArgumentError(
        absl::StrCat("register penalty ", register_penalty, " must be positive and finite"));
  }
  if (!(gamma > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("gamma ", gamma, " must be positive"));
  }
  absl::StatusOr<Model<Scalar>> model = LloydConstruction<Scalar>(d, k, {});
  if (!model.ok()) return model;
  const int m = model->registers();
  const bool nearest = std::isinf(gamma);
  Matrix<Scalar> qk = Matrix<Scalar>::Zero(d + m, d + m);
  qk.topLeftCorner(d, d).diagonal().setConstant(
      static_cast<Scalar>(nearest ? 1.0 : std::sqrt(gamma)));
  qk.bottomRightCorner(m, m).diagonal().setConstant(
      static_cast<Scalar>(std::sqrt(register_penalty)));
  CenterStep<Scalar> draw;
  draw.to_points =
      Block<Scalar>(qk, Projector<Scalar>(d, m, true), ScoreKind::kEuclidean, Normalizer::kGumbel);
  draw.to_points.beta = nearest ? std::numeric_limits<Scalar>::infinity() : Scalar(1);
  draw.to_centers = model->layers[0][BlockId::kCentersToCenters];
  model->layers[0].center_steps.push_back(std::move(draw));
  model->name = "kmedoids";
  return model;
}

template <typename Scalar>
std::optional<Theta3Form> MatchLloyd(const Model<Scalar>& model) {
  if (model.reembed || model.unit_norm || !model.keep_empty_centers || model.d < 1 || model.k < 1) {
    return std::nullopt;
  }
  for (Theta3Form form : {Theta3Form::kHardmax, Theta3Form::kLinear}) {
    absl::StatusOr<Model<Scalar>> exact =
        LloydConstruction<Scalar>(model.d, model.k, {.embedding = model.embedding, .theta3 = form});
    if (!exact.ok()) continue;
    const LayerWeights<Scalar>& e = exact->layers[0];
    bool same = !model.layers.empty();
    for (const LayerWeights<Scalar>& w : model.layers) {
      same = same && w.center_steps.empty();
      for (BlockId id : kBlockIds) same = same && SameBlock(w[id], e[id]);
    }
    if (same) return form;
  }
  return std::nullopt;
}

#define KMT_INSTANTIATE(S)                                                                         \
  template absl::StatusOr<Model<S>> LloydConstruction<S>(int, int, const LloydOptions&);           \
  template std::optional<Theta3Form> MatchLloyd<S>(const Model<S>&);                               \
  template absl::StatusOr<Model<S>> ClusterRestrictedConstruction<S>(int, int, Normalizer, double, \
                                                                     double, double);              \
  template absl::StatusOr<Model<S>> KMedoidsConstruction<S>(int, int, double, double);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
