// The center updates of paper A's variants of Lloyd's algorithm, as the fast
// path runs them: O(n k d) per layer (plus a per-cluster sort for trimming),
// never an n x n matrix. docs/variants.md defines each one; the assignment
// (nearest center, ties to the lowest index) is Lloyd's for all of them.
#ifndef KMT_CORE_VARIANTS_H_
#define KMT_CORE_VARIANTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

enum class Algorithm {
  kLloyd,            ///< mean of each cluster
  kSoftKMeans,       ///< responsibilities softmax_j(-beta d_ij), weighted means
  kTrimmedKMeans,    ///< normmax_tau over each cluster: mean of its r nearest points
  kRobustKMeans,     ///< sparsemax(-beta d) over each cluster: a sparse weighted mean
  kKMedoids,         ///< the mean, then a cluster point drawn by Gumbel-max (gamma)
  kSphericalKMeans,  ///< unit points and centers; normalized mean
};

absl::string_view AlgorithmName(Algorithm algorithm);

// The parameters a request gives a variant; each means something for the
// variants that read it only (docs/variants.md).
struct VariantParameters {
  double beta = 0;    ///< soft and robust: inverse temperature, > 0
  double tau = 0;     ///< trimmed: normmax's regularization, >= 0
  double gamma = 0;   ///< k-medoids: inverse temperature of the draw; infinity: the nearest point
  uint64_t seed = 0;  ///< k-medoids: key of the draws
};

// Replaces `centers` (d x k) by the variant's update from the points (d x n)
// and their labels (the nearest current center of each). `layer` keys the
// draws of k-medoids. Returns the number of centers kept because their
// cluster was empty (soft k-means: no responsibility at all).
template <typename Scalar>
int UpdateCenters(Algorithm algorithm, const VariantParameters& parameters,
                  const Matrix<Scalar>& points, const Labels& labels, int layer,
                  Matrix<Scalar>* centers);

// Spherical k-means' norm layer: every column of nonzero norm scaled to unit
// norm, a column of norm 0 left as it is. Returns the index of the first
// such column, or -1. Takes data rows of tokens as well as whole matrices.
template <typename Scalar>
Eigen::Index ScaleToUnitNorm(Eigen::Ref<Matrix<Scalar>, 0, Eigen::OuterStride<>> columns);

// The norm layer on points (or centers) that must all have a direction: a
// column of norm 0 is an error naming it (`what` i).
template <typename Scalar>
absl::Status NormalizeColumns(Matrix<Scalar>* points, const char* what);

}  // namespace kmt

#endif  // KMT_CORE_VARIANTS_H_
