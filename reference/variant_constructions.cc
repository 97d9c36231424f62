#include "reference/variant_constructions.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/constructions.h"

namespace kmt {
namespace {

absl::Status CheckRegisterPenalty(double register_penalty) {
  if (!(register_penalty > 0) || !std::isfinite(register_penalty)) {
    return absl::InvalidArgumentError(
        absl::StrCat("register penalty ", register_penalty, " must be positive and finite"));
  }
  return absl::OkStatus();
}

// Queries and keys of a block that weighs each cluster's own points: the
// data coordinates scaled by data_scale, the registers by
// sqrt(register_penalty), so another cluster's point scores
// 2 register_penalty lower.
template <typename Scalar>
Matrix<Scalar> ClusterRestrictedProjection(int d, int m, double data_scale,
                                           double register_penalty) {
  Matrix<Scalar> qk = Matrix<Scalar>::Zero(d + m, d + m);
  qk.topLeftCorner(d, d).diagonal().setConstant(static_cast<Scalar>(data_scale));
  qk.bottomRightCorner(m, m).diagonal().setConstant(
      static_cast<Scalar>(std::sqrt(register_penalty)));
  return qk;
}

}  // namespace

template <typename Scalar>
absl::StatusOr<Model<Scalar>> ClusterRestrictedConstruction(int d, int k, Normalizer normalizer,
                                                            double beta, double tau,
                                                            double register_penalty) {
  if (normalizer != Normalizer::kSparsemax && normalizer != Normalizer::kNormmax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a cluster-restricted theta3 is sparsemax or normmax, not ", NormalizerName(normalizer)));
  }
  if (absl::Status s = CheckRegisterPenalty(register_penalty); !s.ok()) return s;
  const double scale = normalizer == Normalizer::kSparsemax ? beta : 1.0;
  if (!(scale > 0) || !std::isfinite(scale)) {
    return absl::InvalidArgumentError(absl::StrCat("beta ", beta, " must be positive and finite"));
  }
  absl::StatusOr<Model<Scalar>> model = LloydConstruction<Scalar>(d, k, {});
  if (!model.ok()) return model;
  const Matrix<Scalar> qk = ClusterRestrictedProjection<Scalar>(d, model->registers(),
                                                                std::sqrt(scale), register_penalty);
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
  if (absl::Status s = CheckRegisterPenalty(register_penalty); !s.ok()) return s;
  if (!(gamma > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("gamma ", gamma, " must be positive"));
  }
  absl::StatusOr<Model<Scalar>> model = LloydConstruction<Scalar>(d, k, {});
  if (!model.ok()) return model;
  const int m = model->registers();
  const bool nearest = std::isinf(gamma);
  const Matrix<Scalar> qk =
      ClusterRestrictedProjection<Scalar>(d, m, nearest ? 1.0 : std::sqrt(gamma), register_penalty);
  // The draw attends as theta3 does, values the points' data, but over
  // the cluster's own points and by Gumbel-max instead of their mean.
  CenterStep<Scalar> draw;
  draw.to_points = model->layers[0][BlockId::kCentersToPoints];
  draw.to_points.Q = qk;
  draw.to_points.K = qk;
  draw.to_points.normalizer = Normalizer::kGumbel;
  draw.to_points.beta = nearest ? std::numeric_limits<Scalar>::infinity() : Scalar(1);
  draw.to_centers = model->layers[0][BlockId::kCentersToCenters];
  model->layers[0].center_steps.push_back(std::move(draw));
  model->name = "kmedoids";
  return model;
}

#define KMT_INSTANTIATE(S)                                                                         \
  template absl::StatusOr<Model<S>> ClusterRestrictedConstruction<S>(int, int, Normalizer, double, \
                                                                     double, double);              \
  template absl::StatusOr<Model<S>> KMedoidsConstruction<S>(int, int, double, double);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
