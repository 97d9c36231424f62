#include "core/attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/distances.h"

namespace kmt {
namespace {

// Queries are processed in column blocks so that the score matrix stays
// within about 4M entries whatever the number of keys.
constexpr Eigen::Index kScoreBlockEntries = Eigen::Index{1} << 22;

template <typename Scalar>
Scalar DirectScore(ScoreKind kind, const Scalar* q, const Scalar* k, int dim) {
  if (kind == ScoreKind::kEuclidean) return -DirectSquaredDistance(q, k, dim);
  Scalar acc = 0;
  for (int l = 0; l < dim; ++l) acc += q[l] * k[l];
  return acc;
}

template <typename Scalar>
struct Projected {
  Matrix<Scalar> queries;   // Q z + b_Q, dim x queries
  Matrix<Scalar> keys;      // K z' + b_K, dim x keys
  Matrix<Scalar> values;    // V z' + b_V, dim x keys
  Vector<Scalar> query_sq;  // squared norms of the projected queries
  Vector<Scalar> key_sq;    // squared norms of the projected keys
  Scalar key_sq_max = 0;
};

template <typename Scalar>
Projected<Scalar> Project(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                          const Matrix<Scalar>& keys) {
  Projected<Scalar> p;
  p.queries = (block.Q * queries).colwise() + block.bQ;
  p.keys = (block.K * keys).colwise() + block.bK;
  p.values = (block.V * keys).colwise() + block.bV;
  p.query_sq = SquaredNorms<Scalar>(p.queries);
  p.key_sq = SquaredNorms<Scalar>(p.keys);
  p.key_sq_max = p.key_sq.size() > 0 ? p.key_sq.maxCoeff() : Scalar(0);
  return p;
}

// Hardmax of one query's column of scores, in place: 1 on the maximisers, 0
// elsewhere, their count in `divisor`. The matrix-product scores are within
// `margin` of the directly computed ones, so every key that could be a
// maximiser is scored again directly and the decision is made on those
// values. Returns whether the query has support.
template <typename Scalar>
bool HardmaxColumn(const AttentionBlock<Scalar>& block, const Projected<Scalar>& p,
                   Eigen::Index query, Eigen::Map<Vector<Scalar>> column, Scalar* divisor) {
  const int dim = static_cast<int>(p.queries.rows());
  const Scalar margin = SquaredDistanceRoundOff(dim, p.query_sq[query], p.key_sq_max);
  const Scalar threshold = column.maxCoeff() - 2 * margin;
  const Scalar* q = p.queries.col(query).data();
  const auto direct = [&](Eigen::Index key) {
    return DirectScore(block.score, q, p.keys.col(key).data(), dim);
  };
  Scalar best = -std::numeric_limits<Scalar>::infinity();
  Eigen::Index first = 0;
  for (Eigen::Index key = 0; key < column.size(); ++key) {
    if (column[key] >= threshold) {
      const Scalar s = direct(key);
      if (s > best) {
        best = s;
        first = key;
      }
    }
  }
  Eigen::Index count = 0;
  for (Eigen::Index key = 0; key < column.size(); ++key) {
    const bool maximiser = column[key] >= threshold && direct(key) == best;
    column[key] = maximiser ? Scalar(1) : Scalar(0);
    count += maximiser;
  }
  if (block.ties == Ties::kLowestIndex) {
    column.setZero();
    column[first] = 1;
    count = 1;
  }
  *divisor = static_cast<Scalar>(count);
  return block.score == ScoreKind::kDotProduct || best == 0;
}

// Turns the products keys^T queries of queries [first, first + cols) into
// unnormalized weights, in place, and per query the divisor that normalizes
// them and whether it has support. The output is divided after the weighted
// sum, so an average of equal values is that value to the last bit.
template <typename Scalar>
void NormalizeColumns(const AttentionBlock<Scalar>& block, const Projected<Scalar>& p,
                      Eigen::Index first, Matrix<Scalar>* weights, Scalar* divisor, char* support) {
  const bool hard = block.normalizer == Normalizer::kHardmax ||
                    (block.normalizer == Normalizer::kSoftmax && std::isinf(block.beta));
  const Eigen::Index cols = weights->cols();
#pragma omp parallel for schedule(static) if (weights->size() > 65536)
  for (Eigen::Index c = 0; c < cols; ++c) {
    Eigen::Map<Vector<Scalar>> column(weights->col(c).data(), weights->rows());
    const Eigen::Index query = first + c;
    if (block.score == ScoreKind::kEuclidean) {
      // Scores are minus the squared distances, formed here while the
      // column is in cache.
      CrossToSquaredDistances<Scalar>(column, p.key_sq, p.query_sq[query]);
      column = -column;
    }
    if (hard) {
      support[c] = HardmaxColumn(block, p, query, column, &divisor[c]);
    } else if (block.normalizer == Normalizer::kSoftmax) {
      column *= block.beta;
      column = (column.array() - column.maxCoeff()).exp().matrix();
      divisor[c] = column.sum();
      support[c] = 1;
    } else {
      const Scalar total = column.sum();
      support[c] = total > 0;
      divisor[c] = total > 0 ? total : Scalar(1);
      if (total <= 0) column.setZero();
    }
  }
}

// Calls fn(first, weights, divisors) for consecutive blocks of queries.
template <typename Scalar, typename Fn>
void ForEachQueryBlock(const AttentionBlock<Scalar>& block, const Projected<Scalar>& p,
                       std::vector<char>* support, Fn fn) {
  const Eigen::Index nq = p.queries.cols(), nk = p.keys.cols();
  const Eigen::Index step =
      std::max<Eigen::Index>(1, kScoreBlockEntries / std::max<Eigen::Index>(nk, 1));
  support->assign(nq, 0);
  Matrix<Scalar> weights;
  Vector<Scalar> divisors;
  for (Eigen::Index first = 0; first < nq; first += step) {
    const Eigen::Index cols = std::min(step, nq - first);
    weights.noalias() = p.keys.transpose() * p.queries.middleCols(first, cols);
    divisors.resize(cols);
    NormalizeColumns(block, p, first, &weights, divisors.data(), support->data() + first);
    fn(first, weights, divisors);
  }
}

}  // namespace

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
  for (Normalizer n : {Normalizer::kSoftmax, Normalizer::kHardmax, Normalizer::kLinear}) {
    if (name == NormalizerName(n)) return n;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown normalizer '", name, "', expected softmax, hardmax or linear"));
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
  if (std::isnan(block.beta) || block.beta < 0 ||
      (block.beta == 0 && block.normalizer == Normalizer::kHardmax)) {
    return absl::InvalidArgumentError(
        absl::StrCat("inverse temperature ", block.beta, " must be positive"));
  }
  return absl::OkStatus();
}

template <typename Scalar>
Matrix<Scalar> AttentionWeights(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                                const Matrix<Scalar>& keys) {
  const Projected<Scalar> p = Project(block, queries, keys);
  Matrix<Scalar> all(keys.cols(), queries.cols());
  std::vector<char> support;
  ForEachQueryBlock(
      block, p, &support,
      [&](Eigen::Index first, const Matrix<Scalar>& w, const Vector<Scalar>& divisors) {
        all.middleCols(first, w.cols()) = w.array().rowwise() / divisors.transpose().array();
      });
  return all;
}

template <typename Scalar>
Matrix<Scalar> Attend(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                      const Matrix<Scalar>& keys, std::vector<bool>* support) {
  const Projected<Scalar> p = Project(block, queries, keys);
  Matrix<Scalar> out(queries.rows(), queries.cols());
  std::vector<char> supported;
  ForEachQueryBlock(
      block, p, &supported,
      [&](Eigen::Index first, const Matrix<Scalar>& w, const Vector<Scalar>& divisors) {
        auto block_out = out.middleCols(first, w.cols());
        block_out.noalias() = p.values * w;
        block_out.array().rowwise() /= divisors.transpose().array();
      });
  if (support != nullptr) support->assign(supported.begin(), supported.end());
  return out;
}

#define KMT_INSTANTIATE(S)                                                                   \
  template struct AttentionBlock<S>;                                                         \
  template absl::Status ValidateBlock<S>(const AttentionBlock<S>&, int);                     \
  template Matrix<S> AttentionWeights<S>(const AttentionBlock<S>&, const Matrix<S>&,         \
                                         const Matrix<S>&);                                  \
  template Matrix<S> Attend<S>(const AttentionBlock<S>&, const Matrix<S>&, const Matrix<S>&, \
                               std::vector<bool>*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
