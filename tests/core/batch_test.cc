#include "core/batch.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kmt {
namespace {

BatchSpec<double> Spec() { return {.points = Matrix<double>::Random(3, 10), .k = 4, .layers = 2}; }

TEST(Batch, AValidSpecIsKept) {
  const BatchSpec<double> spec = Spec();
  const absl::StatusOr<Batch<double>> batch = Batch<double>::Validate(spec);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->d(), 3);
  EXPECT_EQ(batch->n(), 10);
  EXPECT_EQ(batch->k(), 4);
  EXPECT_EQ(batch->points(), spec.points);
}

TEST(Batch, EachProblemIsNamed) {
  struct Case {
    const char* what;
    std::function<void(BatchSpec<double>*)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"NaN point", [](auto* s) { s->points(1, 7) = NAN; }, "point 7 has NaN in dimension 1"},
      {"Inf point", [](auto* s) { s->points(2, 0) = INFINITY; }, "point 0 has Inf in dimension 2"},
      {"k = 0", [](auto* s) { s->k = 0; }, "k = 0, must be at least 1"},
      {"n < k", [](auto* s) { s->k = 11; }, "n = 10 points is fewer than k = 11 clusters"},
      {"centers' k", [](auto* s) { s->given_centers = Matrix<double>::Zero(3, 5); },
       "initial centers have k = 5, the batch asks for k = 4"},
      {"centers' d", [](auto* s) { s->given_centers = Matrix<double>::Zero(2, 4); },
       "centers have d = 2, points have d = 3"},
      {"NaN center",
       [](auto* s) {
         s->given_centers = Matrix<double>::Zero(3, 4);
         s->given_centers(0, 3) = NAN;
       },
       "center 3 has NaN in dimension 0"},
      {"layers", [](auto* s) { s->layers = -1; }, "iterations = -1, must not be negative"},
      {"beta NaN", [](auto* s) { s->parameters["beta"] = NAN; }, "beta = nan: not a number"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    BatchSpec<double> spec = Spec();
    c.change(&spec);
    const absl::StatusOr<Batch<double>> batch = Batch<double>::Validate(std::move(spec));
    ASSERT_FALSE(batch.ok());
    EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(batch.status().message(), c.message);
  }
}

}  // namespace
}  // namespace kmt
