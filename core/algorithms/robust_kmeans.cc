// Robust k-means: each center the sparsemax(-beta ||x_i - c_j||^2)-weighted
// mean of its own cluster's points; far points get weight exactly 0.
#include <limits>

#include "core/algorithms/cluster_members.h"
#include "core/algorithms/homes.h"
#include "core/normalizers.h"

namespace kmt {
namespace {

class RobustKMeans final : public UpdateByTemplate<RobustKMeans> {
 public:
  RobustKMeans()
      : UpdateByTemplate({
            .name = "robust-kmeans",
            .description = "robust k-means: each center the sparsemax(-beta ||x_i - c_j||^2)-"
                           "weighted mean of its cluster's points; far points get weight exactly 0",
            .parameters = {{.name = "beta",
                            .description = "inverse temperature of the sparsemax, in 1 / squared "
                                           "units of the data: small is the cluster's mean, large "
                                           "its nearest point",
                            .default_value = 1,
                            .min = 0,
                            .max = std::numeric_limits<double>::infinity(),
                            .min_exclusive = true}},
            .served = {{.options = {.embedding = Embedding::kOneHot}, .name = "robust-kmeans"}},
            .reference = "ReferenceRobustKMeans (reference/variant_reference.h); circuit "
                         "ClusterRestrictedConstruction (reference/variant_constructions.h)",
            .translation_invariant = true,
        }) {}

  template <typename Scalar>
  static int Update(const UpdateContext& context, const Matrix<Scalar>& points,
                    const Vector<Scalar>*, const Labels& labels, Matrix<Scalar>* centers) {
    return PerClusterWeightedMeans(context.parameters.at("beta"), /*uniform=*/false, points, labels,
                                   centers,
                                   [](const Vector<double>& z) { return Sparsemax<double>(z); });
  }
};

}  // namespace

const Algorithm& RobustKMeansAlgorithm() {
  static const RobustKMeans algorithm;
  return algorithm;
}

}  // namespace kmt
