// Attention over token columns: for each query column q of Z the output is
// sum_l w_l (V z'_l + b_V), where w = normalizer(scores of q against the keys
// z'_l of Z'). Scores are Euclidean, -beta ||(Qq + b_Q) - (Kz' + b_K)||^2, or
// dot-product, beta <Qq + b_Q, Kz' + b_K>.
//
// Hardmax is decided on exactly computed scores: every score is first formed
// through one matrix product, and the keys within round-off of the best are
// scored again directly, so a token always finds itself at distance zero and
// ties are real ties.
#ifndef KMT_CORE_ATTENTION_H_
#define KMT_CORE_ATTENTION_H_

#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

enum class ScoreKind { kEuclidean, kDotProduct };

enum class Normalizer {
  kSoftmax,  ///< exp(beta s) / sum; beta = infinity is hardmax
  kHardmax,  ///< the beta -> infinity limit: weight on the maximisers only
  kLinear,   ///< s / sum s for non-negative scores; all weights 0 when sum is 0
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

  // A block with all weights zero: it adds nothing to the residual stream.
  static AttentionBlock Zero(int dim);
  int dim() const { return static_cast<int>(Q.rows()); }
};

// Shape and parameter check of a block for tokens of size dim.
template <typename Scalar>
absl::Status ValidateBlock(const AttentionBlock<Scalar>& block, int dim);

// Weights of every key (rows) for every query (columns): keys x queries.
template <typename Scalar>
Matrix<Scalar> AttentionWeights(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                                const Matrix<Scalar>& keys);

// The attention output, dim x queries. If `support` is given it receives, per
// query, whether its weights rest on keys that match it: a positive total
// score (linear), a key at distance exactly zero after projection (Euclidean
// hardmax); softmax and dot-product hardmax always have support.
template <typename Scalar>
Matrix<Scalar> Attend(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                      const Matrix<Scalar>& keys, std::vector<bool>* support = nullptr);

}  // namespace kmt

#endif  // KMT_CORE_ATTENTION_H_
