// Trimmed k-means: each center the mean of the r points of its cluster
// nearest it, r chosen per cluster by normmax with regularization tau. The
// far points of a cluster do not move its center.
#include <limits>

#include "core/algorithms/cluster_members.h"
#include "core/algorithms/homes.h"
#include "core/normalizers.h"

namespace kmt {
namespace {

class TrimmedKMeans final : public UpdateByTemplate<TrimmedKMeans> {
 public:
  TrimmedKMeans()
      : UpdateByTemplate({
            .name = "trimmed-kmeans",
            .description =
                "trimmed k-means: each center the mean of the r points of its cluster nearest it, "
                "r chosen by normmax (the r maximising the mean of -||x_i - c_j||^2 over them "
                "minus tau / r); far points of a cluster do not move its center",
            .parameters = {{.name = "tau",
                            .description = "normmax's regularization, in squared units of the "
                                           "data: 0 keeps the nearest point only, larger keeps "
                                           "more (Lloyd's as tau grows)",
                            .default_value = 1,
                            .min = 0,
                            .max = std::numeric_limits<double>::infinity(),
                            .max_exclusive = true}},
            .served = {{.options = {.embedding = Embedding::kOneHot}, .name = "trimmed-kmeans"}},
            .reference = "ReferenceTrimmedKMeans (reference/variant_reference.h); circuit "
                         "ClusterRestrictedConstruction (reference/variant_constructions.h)",
            .translation_invariant = true,
        }) {}

  template <typename Scalar>
  static int Update(const UpdateContext& context, const Matrix<Scalar>& points,
                    const Vector<Scalar>*, const Labels& labels, Matrix<Scalar>* centers) {
    const double tau = context.parameters.at("tau");
    return PerClusterWeightedMeans(
        1.0, /*uniform=*/true, points, labels, centers,
        [tau](const Vector<double>& scores) { return Normmax<double>(scores, tau); });
  }
};

}  // namespace

const Algorithm& TrimmedKMeansAlgorithm() {
  static const TrimmedKMeans algorithm;
  return algorithm;
}

}  // namespace kmt
