// The attention block's names, parsing and checks: what model files,
// requests and training read and write. The computation is attention.cc,
// one of the kernels compiled per SIMD level (core/simd_kernels.h).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/attention.h"

namespace kmt {

absl::string_view ScoreKindName(ScoreKind kind) {
  return kind == ScoreKind::kEuclidean ? "euclidean" : "dot";
}

absl::string_view NormalizerName(Normalizer normalizer) {
  switch (normalizer) {
    case Normalizer::kSoftmax:
      return "softmax";
    case Normalizer::kHardmax:
      return "hardmax";
    case Normalizer::kLinear:
      return "linear";
    case Normalizer::kSparsemax:
      return "sparsemax";
    case Normalizer::kNormmax:
      return "normmax";
    case Normalizer::kGumbel:
      return "gumbel";
  }
  return "unknown";
}

absl::StatusOr<ScoreKind> ParseScoreKind(absl::string_view name) {
  for (ScoreKind s : {ScoreKind::kEuclidean, ScoreKind::kDotProduct}) {
    if (name == ScoreKindName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown score kind '", name, "', expected euclidean or dot"));
}

absl::StatusOr<Normalizer> ParseNormalizer(absl::string_view name) {
  for (Normalizer n : {Normalizer::kSoftmax, Normalizer::kHardmax, Normalizer::kLinear,
                       Normalizer::kSparsemax, Normalizer::kNormmax, Normalizer::kGumbel}) {
    if (name == NormalizerName(n)) return n;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown normalizer '", name,
                   "', expected softmax, hardmax, linear, sparsemax, normmax or gumbel"));
}

template <typename Scalar>
AttentionBlock<Scalar> AttentionBlock<Scalar>::Zero(int dim) {
  AttentionBlock b;
  b.Q = b.K = b.V = Matrix<Scalar>::Zero(dim, dim);
  b.bQ = b.bK = b.bV = Vector<Scalar>::Zero(dim);
  return b;
}

template <typename Scalar>
absl::Status ValidateBlock(const AttentionBlock<Scalar>& block, int dim) {
  const auto square = [dim](const Matrix<Scalar>& m) { return m.rows() == dim && m.cols() == dim; };
  if (!square(block.Q) || !square(block.K) || !square(block.V)) {
    return absl::InvalidArgumentError(
        absl::StrCat("projections are ", block.Q.rows(), "x", block.Q.cols(), ", ", block.K.rows(),
                     "x", block.K.cols(), ", ", block.V.rows(), "x", block.V.cols(),
                     "; tokens have ", dim, " dimensions"));
  }
  if (block.bQ.size() != dim || block.bK.size() != dim || block.bV.size() != dim) {
    return absl::InvalidArgumentError(absl::StrCat("biases have ", block.bQ.size(), ", ",
                                                   block.bK.size(), ", ", block.bV.size(),
                                                   " entries; tokens have ", dim, " dimensions"));
  }
  if (!block.Q.allFinite() || !block.K.allFinite() || !block.V.allFinite() ||
      !block.bQ.allFinite() || !block.bK.allFinite() || !block.bV.allFinite()) {
    return absl::InvalidArgumentError("weights contain NaN or Inf");
  }
  const Normalizer n = block.normalizer;
  const bool sparse = n == Normalizer::kSparsemax || n == Normalizer::kNormmax;
  if (std::isnan(block.beta) || block.beta < 0 ||
      (block.beta == 0 && (n == Normalizer::kHardmax || n == Normalizer::kGumbel || sparse))) {
    return absl::InvalidArgumentError(
        absl::StrCat("inverse temperature ", block.beta, " must be positive"));
  }
  if (sparse && std::isinf(block.beta)) {
    return absl::InvalidArgumentError(
        absl::StrCat(NormalizerName(n), " needs a finite inverse temperature, not ", block.beta));
  }
  if (!std::isfinite(block.tau) || block.tau < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("normmax regularisation tau = ", block.tau, " must be finite and >= 0"));
  }
  return absl::OkStatus();
}

#define KMT_INSTANTIATE(S)           \
  template struct AttentionBlock<S>; \
  template absl::Status ValidateBlock<S>(const AttentionBlock<S>&, int);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
