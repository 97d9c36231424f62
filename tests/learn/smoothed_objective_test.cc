// The smoothed objective: an upper bound of the k-means objective that
// tightens as tau falls, whose weights are softmax or the core's sparsemax of
// -r / tau.
#include "learn/smoothed_objective.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/normalizers.h"
#include "core/random.h"
#include "tests/support/random_weights.h"

namespace kmt {
namespace {

TEST(SmoothedObjective, BoundsTheObjectiveFromAboveAndTightensWithTau) {
  Rng rng(5);
  const Matrix<double> points = NormalMatrix<double>(2, 50, rng),
                       centers = NormalMatrix<double>(2, 5, rng);
  double objective = 0;
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    objective += (centers.colwise() - points.col(i)).colwise().squaredNorm().minCoeff();
  }
  for (LossForm form : {LossForm::kSoftmax, LossForm::kSparsemax}) {
    double previous = INFINITY;
    for (double tau : {1.0, 0.1, 0.01, 1e-4}) {
      const double loss = SmoothedObjective<double>(points, centers, tau, form, 1.0, nullptr);
      EXPECT_GE(loss, objective * (1 - 1e-12));
      EXPECT_LE(loss, previous);
      previous = loss;
    }
    EXPECT_NEAR(previous, objective, 1e-6 * objective);
  }
}

TEST(SmoothedObjective, WeighsDistancesByTheNormalizerOfMinusRByTau) {
  Rng rng(6);
  const Matrix<double> points = NormalMatrix<double>(3, 20, rng),
                       centers = NormalMatrix<double>(3, 4, rng);
  const double tau = 0.3;
  for (LossForm form : {LossForm::kSoftmax, LossForm::kSparsemax}) {
    SCOPED_TRACE(LossFormName(form));
    double want = 0;
    for (Eigen::Index i = 0; i < points.cols(); ++i) {
      const Vector<double> r = (centers.colwise() - points.col(i)).colwise().squaredNorm();
      const Vector<double> z = -r / tau;
      const Vector<double> w = form == LossForm::kSparsemax
                                   ? Sparsemax<double>(z)
                                   : Vector<double>((z.array() - z.maxCoeff()).exp() /
                                                    (z.array() - z.maxCoeff()).exp().sum());
      want += w.dot(r);
    }
    EXPECT_NEAR(SmoothedObjective<double>(points, centers, tau, form, 1.0, nullptr), want,
                1e-12 * want);
  }
}

TEST(SmoothedObjective, LossFormsParseWhatTheyPrint) {
  for (LossForm form : {LossForm::kSoftmax, LossForm::kSparsemax}) {
    EXPECT_EQ(*ParseLossForm(LossFormName(form)), form);
  }
  EXPECT_EQ(ParseLossForm("hardmax").status().message(),
            "unknown loss form 'hardmax', expected softmax or sparsemax");
}

}  // namespace
}  // namespace kmt
