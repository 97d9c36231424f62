#include "core/constructions.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace kmt {
namespace {

// Projection of tokens of size dim onto rows [first, first + count).
template <typename Scalar>
Matrix<Scalar> Projector(int dim, int first, int count) {
  Matrix<Scalar> p = Matrix<Scalar>::Zero(dim, dim);
  p.block(first, first, count, count).setIdentity();
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

template <typename Scalar>
bool SameFeedForward(const std::optional<FeedForward<Scalar>>& a,
                     const std::optional<FeedForward<Scalar>>& b) {
  if (!a || !b) return !a && !b;
  return a->W1 == b->W1 && a->b1 == b->b1 && a->W2 == b->W2 && a->b2 == b->b2;
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
  if (options.score == ScoreKind::kDotProduct &&
      (options.embedding != Embedding::kOneHot || options.theta3 != Theta3Form::kLinear)) {
    return absl::InvalidArgumentError(
        "the dot-product Lloyd circuit has one-hot registers and a linear theta3");
  }
  if (!(options.beta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("inverse temperature ", options.beta, " must be positive"));
  }
  return absl::OkStatus();
}

std::string LloydModelName(const LloydOptions& options) {
  std::string name = absl::StrCat("lloyd-", EmbeddingName(options.embedding));
  if (options.score == ScoreKind::kDotProduct) {
    absl::StrAppend(&name, "-dot");
  } else if (options.theta3 == Theta3Form::kLinear) {
    absl::StrAppend(&name, "-linear");
  }
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
  model.norm_coordinate = options.score == ScoreKind::kDotProduct;
  const int m = model.registers(), dim = model.dim();
  const Matrix<Scalar> px = Projector<Scalar>(dim, 0, d);
  const Matrix<Scalar> pr = Projector<Scalar>(dim, d, m);
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
  if (model.norm_coordinate) {
    // Theorem 2.2. A point's query is [x; 0; -1/2] and a key [c; 0; ||c||^2],
    // so theta1 scores <x, c> - ||c||^2 / 2 = (||x||^2 - ||x - c||^2) / 2,
    // largest at the nearest center, and theta2 (keys the points) largest at
    // the point itself. theta4 also clears the old norm, and the
    // feed-forward block writes the new one: relu(c_l)^2 + relu(-c_l)^2 =
    // c_l^2, summed into the last coordinate.
    const Matrix<Scalar> norm = Projector<Scalar>(dim, dim - 1, 1);
    for (BlockId id : {BlockId::kPointsToCenters, BlockId::kPointsToPoints}) {
      AttentionBlock<Scalar>& b = w[id];
      b.score = ScoreKind::kDotProduct;
      b.K = px + norm;
      b.bQ[dim - 1] = Scalar(-0.5);
    }
    AttentionBlock<Scalar>& theta4 = w[BlockId::kCentersToCenters];
    theta4.score = ScoreKind::kDotProduct;
    theta4.V = -(px + norm);
    FeedForward<Scalar> ffn;
    ffn.W1 = Matrix<Scalar>::Zero(2 * d, dim);
    ffn.W1.topLeftCorner(d, d).setIdentity();
    ffn.W1.bottomLeftCorner(d, d) = -Matrix<Scalar>::Identity(d, d);
    ffn.b1 = Vector<Scalar>::Zero(2 * d);
    ffn.W2 = Matrix<Scalar>::Zero(dim, 2 * d);
    ffn.W2.row(dim - 1).setOnes();
    ffn.b2 = Vector<Scalar>::Zero(dim);
    w.center_feed_forward = std::move(ffn);
  }
  model.layers.push_back(std::move(w));

  model.name = LloydModelName(options);
  return model;
}

template <typename Scalar>
std::optional<Theta3Form> MatchLloyd(const Model<Scalar>& model) {
  if (model.reembed || model.unit_norm || !model.keep_empty_centers || model.d < 1 || model.k < 1) {
    return std::nullopt;
  }
  const LloydOptions candidates[] = {
      {.embedding = model.embedding, .theta3 = Theta3Form::kHardmax},
      {.embedding = model.embedding, .theta3 = Theta3Form::kLinear},
      {.embedding = model.embedding,
       .theta3 = Theta3Form::kLinear,
       .score = ScoreKind::kDotProduct},
  };
  for (const LloydOptions& options : candidates) {
    absl::StatusOr<Model<Scalar>> exact = LloydConstruction<Scalar>(model.d, model.k, options);
    if (!exact.ok() || exact->norm_coordinate != model.norm_coordinate) continue;
    const LayerWeights<Scalar>& e = exact->layers[0];
    bool same = !model.layers.empty();
    for (const LayerWeights<Scalar>& w : model.layers) {
      same = same && w.center_steps.empty() &&
             SameFeedForward(w.center_feed_forward, e.center_feed_forward);
      for (BlockId id : kBlockIds) same = same && SameBlock(w[id], e[id]);
    }
    if (same) return options.theta3;
  }
  return std::nullopt;
}

#define KMT_INSTANTIATE(S)                                                               \
  template absl::StatusOr<Model<S>> LloydConstruction<S>(int, int, const LloydOptions&); \
  template std::optional<Theta3Form> MatchLloyd<S>(const Model<S>&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
