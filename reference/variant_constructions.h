// Paper A's circuits of trimmed and robust k-means and of randomized
// k-medoids (docs/variants.md): transformer weights built on Lloyd's one-hot
// construction. The engine runs these variants on its fast path only; the
// tests run the circuits on the dense evaluator, which checks that the
// weights compute what the references and the fast path do.
#ifndef KMT_REFERENCE_VARIANT_CONSTRUCTIONS_H_
#define KMT_REFERENCE_VARIANT_CONSTRUCTIONS_H_

#include "absl/status/statusor.h"
#include "core/model.h"

namespace kmt {

// Paper A's circuit of a variant whose center update weighs each cluster's
// own points (docs/variants.md): Lloyd's construction with one-hot registers
// whose theta3 is `normalizer` (kSparsemax: robust k-means, scores
// -beta ||x - c||^2; kNormmax: trimmed k-means with tau, scores
// -||x - c||^2). theta3's queries and keys carry the register coordinates
// scaled by sqrt(register_penalty): a point of another cluster scores
// 2 register_penalty lower, so it gets no weight once that exceeds the
// spread of the cluster's own scores (plus 1 for sparsemax and tau for
// normmax). Centers no point carries the code of keep their tokens.
template <typename Scalar>
absl::StatusOr<Model<Scalar>> ClusterRestrictedConstruction(int d, int k, Normalizer normalizer,
                                                            double beta, double tau,
                                                            double register_penalty);

// Paper A's circuit of randomized k-medoids: Lloyd's one-hot construction
// (theta3 the cluster's mean) and one more center step whose centers ->
// points block is Gumbel attention over the cluster's points, scores
// -gamma ||x - mean||^2 with the registers scaled as above (gamma =
// infinity: hardmax, the point nearest the mean), values the points' data,
// and whose centers -> centers block removes the mean. The draws are keyed
// by the run's seed, the layer, the cluster and the point.
template <typename Scalar>
absl::StatusOr<Model<Scalar>> KMedoidsConstruction(int d, int k, double gamma,
                                                   double register_penalty);

}  // namespace kmt

#endif  // KMT_REFERENCE_VARIANT_CONSTRUCTIONS_H_
