// Soft k-means: responsibilities r_ij = softmax_j(-beta ||x_i - c_j||^2),
// each center the r-weighted mean of all points. Paper A's circuit is
// Lloyd's one-hot construction with theta1 a softmax and theta3 linear
// attention; the fast path computes the same update in O(n k d).
#include <algorithm>
#include <limits>

#include "core/algorithms/homes.h"
#include "core/distances.h"

namespace kmt {
namespace {

// Points per chunk: responsibilities of a chunk (points x k) stay small, and
// chunks are merged in order, so the result does not depend on the thread
// count.
constexpr Eigen::Index kSoftChunk = 2048;

class SoftKMeans final : public UpdateByTemplate<SoftKMeans> {
 public:
  SoftKMeans()
      : UpdateByTemplate({
            .name = "soft-kmeans",
            .description =
                "soft k-means: responsibilities softmax_j(-beta ||x_i - c_j||^2), centers their "
                "weighted means (theta1 softmax, theta3 linear attention); any d and k",
            .parameters = {{.name = "beta",
                            .description = "inverse temperature of the responsibilities, in 1 / "
                                           "squared units of the data; Lloyd's as beta grows",
                            .default_value = 100,
                            .min = 0,
                            .max = std::numeric_limits<double>::infinity(),
                            .min_exclusive = true}},
            .served = {{.options = {.embedding = Embedding::kOneHot, .theta3 = Theta3Form::kLinear},
                        .name = "soft-kmeans"}},
            .reference = "ReferenceSoftKMeans (reference/variant_reference.h)",
            .weighted = true,
            .translation_invariant = true,
        }) {}

  template <typename Scalar>
  static int Update(const UpdateContext& context, const Matrix<Scalar>& points,
                    const Vector<Scalar>* weights, const Labels&, Matrix<Scalar>* centers) {
    const double beta = context.parameters.at("beta");
    const Eigen::Index d = points.rows(), n = points.cols(), k = centers->cols();
    const Vector<Scalar> center_sq = SquaredNorms<Scalar>(*centers);
    const Eigen::Index chunks = (n + kSoftChunk - 1) / kSoftChunk;
    std::vector<Matrix<double>> sums(chunks);
    std::vector<Vector<double>> masses(chunks);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (Eigen::Index c = 0; c < chunks; ++c) {
      const Eigen::Index first = c * kSoftChunk, rows = std::min(kSoftChunk, n - first);
      const auto x = points.middleCols(first, rows);
      Matrix<Scalar> dist;
      SquaredDistances<Scalar>(x, SquaredNorms<Scalar>(x), *centers, center_sq, &dist);
      // r_ij in double, whatever the points' type: a far center's
      // responsibilities are tiny, and in float they would underflow to 0
      // and freeze it where double moves it.
      Matrix<double> r = (-beta) * dist.template cast<double>();
      for (Eigen::Index i = 0; i < rows; ++i) {
        auto row = r.row(i);
        row = (row.array() - row.maxCoeff()).exp().matrix();
        row /= row.sum();
        // A weighted point counts w times: its responsibilities scale by w.
        if (weights != nullptr) row *= static_cast<double>((*weights)[first + i]);
      }
      sums[c].noalias() = x.template cast<double>() * r;
      masses[c] = r.colwise().sum().transpose();
    }
    Matrix<double> sum = Matrix<double>::Zero(d, k);
    Vector<double> mass = Vector<double>::Zero(k);
    for (Eigen::Index c = 0; c < chunks; ++c) {
      sum += sums[c];
      mass += masses[c];
    }
    // A center with no responsibility at all keeps its value.
    int empty = 0;
    for (Eigen::Index j = 0; j < k; ++j) {
      if (mass[j] > 0) {
        centers->col(j) = (sum.col(j) / mass[j]).template cast<Scalar>();
      } else {
        ++empty;
      }
    }
    return empty;
  }
};

}  // namespace

const Algorithm& SoftKMeansAlgorithm() {
  static const SoftKMeans algorithm;
  return algorithm;
}

}  // namespace kmt
