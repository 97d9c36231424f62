#include "learn/smoothed_objective.h"

#include "absl/strings/str_cat.h"
#include "core/distances.h"
#include "core/normalizers.h"

namespace kmt {

absl::string_view LossFormName(LossForm form) {
  return form == LossForm::kSoftmax ? "softmax" : "sparsemax";
}

absl::StatusOr<LossForm> ParseLossForm(absl::string_view name) {
  for (LossForm f : {LossForm::kSoftmax, LossForm::kSparsemax}) {
    if (name == LossFormName(f)) return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown loss form '", name, "', expected softmax or sparsemax"));
}

template <typename Scalar>
double SmoothedObjective(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, double tau,
                         LossForm form, Scalar scale, Matrix<Scalar>* d_centers) {
  // 1. Squared distances r (k x n).
  Matrix<Scalar> r;
  SquaredDistances<Scalar>(centers, SquaredNorms<Scalar>(centers), points,
                           SquaredNorms<Scalar>(points), &r);
  // 2. Weights per point over the centers, 3. the loss.
  const Scalar inv_tau = static_cast<Scalar>(1 / tau);
  Matrix<Scalar> w(r.rows(), r.cols());
  for (Eigen::Index i = 0; i < r.cols(); ++i) {
    const Vector<Scalar> z = -inv_tau * r.col(i);
    if (form == LossForm::kSoftmax) {
      w.col(i) = (z.array() - z.maxCoeff()).exp().matrix();
      w.col(i) /= w.col(i).sum();
    } else {
      w.col(i) = Sparsemax<Scalar>(z);
    }
  }
  const Vector<Scalar> per_point = w.cwiseProduct(r).colwise().sum().transpose();
  const double loss = per_point.template cast<double>().sum();
  if (d_centers == nullptr) return loss;

  // 3'. dL/dr_ij = w_ij + dL/dz_ij * (-1/tau), with dL/dz the normalizer's
  // Jacobian applied to r: softmax w_ij (r_ij - L_i), sparsemax on the
  // support r_ij - mean of r over the support.
  Matrix<Scalar> g(r.rows(), r.cols());
  for (Eigen::Index i = 0; i < r.cols(); ++i) {
    Vector<Scalar> dz(r.rows());
    if (form == LossForm::kSoftmax) {
      dz = w.col(i).cwiseProduct((r.col(i).array() - per_point[i]).matrix());
    } else {
      const auto support = (w.col(i).array() > 0).template cast<Scalar>();
      const Scalar mean = (support * r.col(i).array()).sum() / support.sum();
      dz = (support * (r.col(i).array() - mean)).matrix();
    }
    g.col(i) = w.col(i) - inv_tau * dz;
  }
  // 1'. r_ij = ||x_i - c_j||^2: dL/dc_j = 2 sum_i g_ij (c_j - x_i).
  const Vector<Scalar> g_rows = g.rowwise().sum();
  d_centers->noalias() +=
      scale * Scalar(2) * (centers * g_rows.asDiagonal() - points * g.transpose());
  return loss;
}

#define KMT_INSTANTIATE(S)                                                                      \
  template double SmoothedObjective<S>(const Matrix<S>&, const Matrix<S>&, double, LossForm, S, \
                                       Matrix<S>*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
