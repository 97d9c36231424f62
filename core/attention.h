// Attention over token columns: for each query column q of Z the output is
// sum_l w_l (V z'_l + b_V), where w = normalizer(scores of q against the keys
// z'_l of Z'). Scores are Euclidean, -beta ||(Qq + b_Q) - (Kz' + b_K)||^2, or
// dot-product, beta <Qq + b_Q, Kz' + b_K>.
//
// Hardmax and Gumbel-max are decided on exactly computed scores: every score
// is first formed through one matrix product, and the keys within round-off
// of the best are scored again directly, so a token always finds itself at
// distance zero, ties are real ties, and a draw does not depend on how the
// product was blocked.
#ifndef KMT_CORE_ATTENTION_H_
#define KMT_CORE_ATTENTION_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

enum class ScoreKind { kEuclidean, kDotProduct };

// s is the score; the sparse and sampled maps are in core/normalizers.h.
enum class Normalizer {
  kSoftmax,    ///< exp(beta s) / sum; beta = infinity is hardmax
  kHardmax,    ///< the beta -> infinity limit: weight on the maximisers only
  kLinear,     ///< s / sum s for non-negative scores; all weights 0 when sum is 0
  kSparsemax,  ///< Euclidean projection of beta s onto the simplex; finite beta
  kNormmax,    ///< uniform on the r highest of beta s, r set by tau; finite beta
  kGumbel,     ///< one-hot on argmax (beta s + Gumbel noise), a draw from softmax;
               ///< beta = infinity is hardmax with lowest-index ties
};

// How hardmax splits weight between maximisers that tie.
enum class Ties {
  kAverage,      ///< uniform over all maximisers (the limit of softmax)
  kLowestIndex,  ///< all weight on the lowest-index maximiser (Lloyd's argmin)
};

absl::string_view ScoreKindName(ScoreKind kind);
absl::string_view NormalizerName(Normalizer normalizer);
absl::StatusOr<ScoreKind> ParseScoreKind(absl::string_view name);
absl::StatusOr<Normalizer> ParseNormalizer(absl::string_view name);

template <typename Scalar>
struct AttentionBlock {
  Matrix<Scalar> Q;                                       ///< query projection, dim x dim
  Matrix<Scalar> K;                                       ///< key projection, dim x dim
  Matrix<Scalar> V;                                       ///< value projection, dim x dim
  Vector<Scalar> bQ;                                      ///< query bias, dim
  Vector<Scalar> bK;                                      ///< key bias, dim
  Vector<Scalar> bV;                                      ///< value bias, dim
  ScoreKind score = ScoreKind::kEuclidean;                ///< how queries meet keys
  Normalizer normalizer = Normalizer::kHardmax;           ///< scores -> weights
  Scalar beta = std::numeric_limits<Scalar>::infinity();  ///< inverse temperature
  Ties ties = Ties::kAverage;                             ///< hardmax tie rule
  Scalar tau = 0;                                         ///< normmax's regularisation

  // A block with all weights zero: it adds nothing to the residual stream.
  static AttentionBlock Zero(int dim);
  int dim() const { return static_cast<int>(Q.rows()); }
};

// Where Gumbel attention draws its noise: the noise of query column q and key
// column l is CounterGumbel(seed, layer, q, l) (core/random.h), so a draw is
// named by these counters whatever the thread count or query blocking.
struct Sampling {
  uint64_t seed = 0;  ///< the run's seed
  int layer = 0;      ///< the layer being evaluated
};

// Shape and parameter check of a block for tokens of size dim.
template <typename Scalar>
absl::Status ValidateBlock(const AttentionBlock<Scalar>& block, int dim);

// Weights of every key (rows) for every query (columns): keys x queries.
template <typename Scalar>
Matrix<Scalar> AttentionWeights(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                                const Matrix<Scalar>& keys, Sampling sampling = {});

// The attention output, dim x queries. If `support` is given it receives, per
// query, whether its weights rest on keys that match it: a positive total
// score (linear), a key at distance exactly zero after projection (Euclidean
// hardmax); softmax, sparsemax, normmax, Gumbel (any beta) and dot-product
// hardmax always have support, their weights summing to 1.
template <typename Scalar>
Matrix<Scalar> Attend(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                      const Matrix<Scalar>& keys, std::vector<bool>* support = nullptr,
                      Sampling sampling = {});

}  // namespace kmt

#endif  // KMT_CORE_ATTENTION_H_
