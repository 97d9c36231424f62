// Randomized k-medoids: each center the mean of its cluster, then a point of
// the cluster drawn with probability proportional to exp(-gamma ||x_i -
// mean||^2) by Gumbel-max, keyed by the request's seed, the layer, the
// cluster and the point. Centers are always data points.
#include <cmath>
#include <limits>

#include "core/algorithms/cluster_members.h"
#include "core/algorithms/homes.h"
#include "core/random.h"

namespace kmt {
namespace {

class KMedoids final : public UpdateByTemplate<KMedoids> {
 public:
  KMedoids()
      : UpdateByTemplate({
            .name = "kmedoids",
            .description =
                "randomized k-medoids: each center the mean of its cluster, then a point of the "
                "cluster drawn with probability proportional to exp(-gamma ||x_i - mean||^2) "
                "(Gumbel-max, keyed by seed, layer and cluster); centers are always data points",
            .parameters = {{.name = "gamma",
                            .description = "inverse temperature of the draw, in 1 / squared units "
                                           "of the data; 0 draws uniformly, infinity (the "
                                           "default) takes the point nearest the mean",
                            .default_value = std::numeric_limits<double>::infinity(),
                            .min = 0,
                            .max = std::numeric_limits<double>::infinity()}},
            .served = {{.options = {.embedding = Embedding::kOneHot}, .name = "kmedoids"}},
            .reference = "ReferenceKMedoids (reference/variant_reference.h); circuit "
                         "KMedoidsConstruction (reference/variant_constructions.h)",
            .translation_invariant = true,
        }) {}

  template <typename Scalar>
  static int Update(const UpdateContext& context, const Matrix<Scalar>& points,
                    const Vector<Scalar>*, const Labels& labels, Matrix<Scalar>* centers) {
    const double gamma = context.parameters.at("gamma");
    const Eigen::Index d = points.rows(), k = centers->cols();
    ClusterSums sums(static_cast<int>(d), static_cast<int>(k));
    AccumulateClusterSums(points, labels, &sums);
    const Members members(labels, k);
    const bool nearest = std::isinf(gamma);
    int empty = 0;
    for (Eigen::Index j = 0; j < k; ++j) empty += sums.counts[j] == 0;
#pragma omp parallel for schedule(dynamic) if (points.cols() > 65536)
    for (Eigen::Index j = 0; j < k; ++j) {
      if (members.size(j) == 0) continue;
      // The draw is among the cluster's points, scored against their mean
      // in double, so that float and double batches draw the same points.
      const Vector<double> mean = sums.sums.col(j) / static_cast<double>(sums.counts[j]);
      double best = -std::numeric_limits<double>::infinity();
      Eigen::Index chosen = members.begin(j)[0];
      for (Eigen::Index t = 0; t < members.size(j); ++t) {
        const Eigen::Index i = members.begin(j)[t];
        const double dist = (points.col(i).template cast<double>() - mean).squaredNorm();
        const double score =
            nearest
                ? -dist
                : -gamma * dist + CounterGumbel(context.seed, static_cast<uint64_t>(context.layer),
                                                static_cast<uint64_t>(j), static_cast<uint64_t>(i));
        if (score > best) {
          best = score;
          chosen = i;
        }
      }
      centers->col(j) = points.col(chosen);
    }
    return empty;
  }
};

}  // namespace

const Algorithm& KMedoidsAlgorithm() {
  static const KMedoids algorithm;
  return algorithm;
}

}  // namespace kmt
