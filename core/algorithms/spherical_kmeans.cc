// Spherical k-means: points and centers of unit norm (a norm layer),
// assignment by largest cosine (the nearest unit center), each center its
// cluster's normalized sum. As FAISS's spherical option, it is Lloyd's loop
// with one preparation (points to unit norm) and one step after the sums
// (the normalization).
#include "absl/strings/str_cat.h"
#include "core/algorithms/homes.h"
#include "core/unit_norm.h"

namespace kmt {
namespace {

template <typename Scalar>
absl::Status ToUnitNorm(Matrix<Scalar>* columns, const char* what) {
  if (const Eigen::Index zero = ScaleToUnitNorm<Scalar>(*columns); zero >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", zero, " has norm 0: spherical k-means needs a direction"));
  }
  return absl::OkStatus();
}

// A cluster with no points, or whose points sum to 0, keeps its center.
template <typename Scalar>
int NormalizedSums(const ClusterSums& sums, Matrix<Scalar>* centers) {
  int kept = 0;
  for (Eigen::Index j = 0; j < centers->cols(); ++j) {
    const double norm = sums.sums.col(j).norm();
    if (!(sums.weights[j] > 0) || !(norm > 0)) {
      ++kept;
      continue;
    }
    centers->col(j) = (sums.sums.col(j) / norm).template cast<Scalar>();
  }
  return kept;
}

class SphericalKMeans final : public Algorithm {
 public:
  SphericalKMeans()
      : Algorithm({
            .name = "spherical-kmeans",
            .description = "spherical k-means: points and centers of unit norm (a norm layer), "
                           "assignment by largest cosine, centers the normalized means; a point "
                           "of norm 0 is an error",
            .served = {{.options = {.embedding = Embedding::kOneHot}, .name = "spherical-kmeans"}},
            .reference = "ReferenceSphericalKMeans (reference/variant_reference.h); circuit "
                         "LloydConstruction with Model::unit_norm",
            .weighted = true,
            .unit_norm = true,
        }) {}

  bool Prepares() const override { return true; }
  absl::Status Prepare(Matrix<float>* columns, const char* what) const override {
    return ToUnitNorm(columns, what);
  }
  absl::Status Prepare(Matrix<double>* columns, const char* what) const override {
    return ToUnitNorm(columns, what);
  }
  bool UpdatesFromSums() const override { return true; }
  int CentersFromSums(const ClusterSums& sums, Matrix<float>* centers) const override {
    return NormalizedSums(sums, centers);
  }
  int CentersFromSums(const ClusterSums& sums, Matrix<double>* centers) const override {
    return NormalizedSums(sums, centers);
  }
};

}  // namespace

const Algorithm& SphericalKMeansAlgorithm() {
  static const SphericalKMeans algorithm;
  return algorithm;
}

}  // namespace kmt
