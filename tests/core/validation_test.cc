#include "core/validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/transformer.h"

namespace kmt {
namespace {

TEST(Validation, RowMajorPointsBecomeColumns) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};  // 3 points, d = 2
  const Matrix<double> points = *PointsFromRowMajor<double>(values, 3, 2);
  ASSERT_EQ(points.rows(), 2);
  ASSERT_EQ(points.cols(), 3);
  EXPECT_EQ(points(0, 1), 3);
  EXPECT_EQ(points(1, 2), 6);
}

TEST(Validation, ShapeMismatchNamesTheCounts) {
  const std::vector<float> values(1023, 0.f);
  EXPECT_EQ(PointsFromRowMajor<float>(values, 32, 32).status().message(),
            "points has 1023 values, expected n*d = 32*32");
  EXPECT_EQ(PointsFromRowMajor<float>(values, 0, 32).status().message(),
            "shape n = 0, d = 32, both must be at least 1");
  EXPECT_EQ(PointsFromRowMajor<float>(values, 1023, -1).status().message(),
            "shape n = 1023, d = -1, both must be at least 1");
  // n*d overflowing 64 bits is a mismatch, not a wrap-around.
  EXPECT_FALSE(PointsFromRowMajor<float>(values, int64_t{1} << 62, 8).ok());
}

TEST(Validation, NonFiniteValuesAreNamed) {
  std::vector<float> values(8, 0.f);
  values[5] = NAN;
  EXPECT_EQ(ValidatePoints(*PointsFromRowMajor<float>(values, 4, 2)).message(),
            "point 2 has NaN in dimension 1");
  values[5] = -INFINITY;
  EXPECT_EQ(ValidatePoints(*PointsFromRowMajor<float>(values, 4, 2)).message(),
            "point 2 has Inf in dimension 1");
}

TEST(Validation, CoordinatesThatWouldOverflowAreNamed) {
  const float bound = MaxCoordinate<float>(2);
  EXPECT_NEAR(bound, std::sqrt(std::numeric_limits<float>::max() / 32), 1e12);
  std::vector<float> values = {0, 0, 1, 1, -bound, bound, bound, -bound};
  EXPECT_TRUE(ValidatePoints(*PointsFromRowMajor<float>(values, 4, 2)).ok());
  values[5] = 1e19f;
  EXPECT_EQ(ValidatePoints(*PointsFromRowMajor<float>(values, 4, 2)).message(),
            absl::StrCat("point 2 has ", 1e19f, " in dimension 1, beyond +-", bound,
                         ": squared distances in d = 2 would overflow float"));
  EXPECT_EQ(ValidateCenters(*PointsFromRowMajor<float>({0, 0, 1, 1}, 2, 2),
                            *CentersFromRowMajor<float>({0, 0, -3e19f, 1}, 2, 2))
                .message(),
            absl::StrCat("center 1 has ", -3e19f, " in dimension 0, beyond +-", bound,
                         ": squared distances in d = 2 would overflow float"));
}

// Sparse points are bound as the same points made dense are: each nonzero
// within MaxCoordinate(d), the first beyond it named by its row and column.
TEST(Validation, SparseValuesThatWouldOverflowAreNamedAsDenseOnes) {
  const int d = 1000;
  const float bound = MaxCoordinate<float>(d);
  Matrix<float> dense = Matrix<float>::Zero(d, 3);
  dense(7, 0) = bound;
  dense(3, 2) = -bound;
  EXPECT_TRUE(ValidateSparseValues(CsrMatrix<float>::FromDense(dense)).ok());
  dense(999, 1) = std::nextafter(bound, std::numeric_limits<float>::infinity());
  const absl::Status s = ValidateSparseValues(CsrMatrix<float>::FromDense(dense));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.message().find(absl::StrCat("point 1 has ", dense(999, 1), " in dimension 999, beyond")),
      std::string::npos)
      << s.message();
  EXPECT_EQ(ValidatePoints(dense).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Validation, AtTheBoundEveryObjectiveIsFinite) {
  // Points at opposite corners of the allowed box: the largest distances.
  for (int d : {1, 2, 32}) {
    const float bound = MaxCoordinate<float>(d);
    Matrix<float> points(d, 6);
    for (int i = 0; i < 6; ++i) points.col(i).setConstant(i % 2 == 0 ? bound : -bound);
    points(0, 4) = 0;
    const Matrix<float> init = points.leftCols(2).rowwise().reverse();
    const RunResult<float> run = *RunLloyd<float>({}, points, init, {.layers = 3});
    EXPECT_TRUE(std::isfinite(run.objective)) << "d = " << d;
    for (double objective : run.layer_objectives) EXPECT_TRUE(std::isfinite(objective));
    EXPECT_TRUE(run.centers.allFinite());
  }
}

TEST(Validation, ANonFiniteAnswerNamesTheSampleWeightsTheSumsOrTheModel) {
  const Matrix<double> centers = Matrix<double>::Zero(2, 3);
  const Vector<double> none, small = Vector<double>::Constant(4, 0.5),
                             huge = Vector<double>::Constant(4, 1e300);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(ValidateAnswer(1.0, centers, huge, "m", false).ok());
  for (const bool exact : {false, true}) {
    const absl::Status weighted = ValidateAnswer(inf, centers, huge, "m", exact);
    EXPECT_EQ(weighted.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(weighted.message(),
              "the sample weights (the largest 1e+300) overflow double in the weighted sums or "
              "objective of these points; scale them down: only their ratios move the centers");
  }
  Matrix<double> nan_center = centers;
  nan_center(1, 2) = std::nan("");
  for (const Vector<double>* weights : {&none, &small}) {
    const absl::Status model = ValidateAnswer(1.0, nan_center, *weights, "m", false);
    EXPECT_EQ(model.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(model.message(),
              "model m produced non-finite centers or objective on this batch; its weights are "
              "unfit for these points");
    EXPECT_EQ(ValidateAnswer(inf, centers, *weights, "m", true),
              absl::InvalidArgumentError("the sums of these points overflow double: their squared "
                                         "distances to the centers, each within range, add up "
                                         "beyond it"));
  }
}

TEST(Validation, ClusterCounts) {
  EXPECT_TRUE(ValidateClusterCount(5, 5).ok());
  EXPECT_EQ(ValidateClusterCount(5, 0).message(), "k = 0, must be at least 1");
  EXPECT_EQ(ValidateClusterCount(4, 5).message(), "n = 4 points is fewer than k = 5 clusters");
  EXPECT_EQ(ValidatePoints(Matrix<double>(0, 4)).message(), "d = 0, must be at least 1");
  EXPECT_EQ(ValidatePoints(Matrix<double>(3, 0)).message(), "no points: n = 0");
  EXPECT_EQ(
      ValidateCenters<double>(Matrix<double>::Zero(3, 9), Matrix<double>::Zero(2, 3)).message(),
      "centers have d = 2, points have d = 3");
}

}  // namespace
}  // namespace kmt
