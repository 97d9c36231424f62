#include "core/attention.h"

#include <algorithm>
#include <cmath>

#include "core/distances.h"
#include "core/normalizers.h"
#include "core/random.h"

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
bool HardmaxColumn(const AttentionBlock<Scalar>& block, Ties ties, const Projected<Scalar>& p,
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
  if (ties == Ties::kLowestIndex) {
    column.setZero();
    column[first] = 1;
    count = 1;
  }
  *divisor = static_cast<Scalar>(count);
  return block.score == ScoreKind::kDotProduct || best == 0;
}

// Gumbel-max of one query's column of scores at finite beta, in place: 1 on
// argmax_l (beta s_l + g_l), g_l = CounterGumbel(seed, layer, query, l), 0
// elsewhere. As for hardmax, the keys whose perturbed product score is within
// round-off of the best are scored again directly and the draw is made on
// those values, so it does not depend on how the product was blocked.
template <typename Scalar>
void GumbelColumn(const AttentionBlock<Scalar>& block, const Projected<Scalar>& p,
                  Sampling sampling, Eigen::Index query, Eigen::Map<Vector<Scalar>> column) {
  const int dim = static_cast<int>(p.queries.rows());
  Vector<Scalar> noise(column.size());
  for (Eigen::Index key = 0; key < column.size(); ++key) {
    noise[key] = static_cast<Scalar>(
        CounterGumbel(sampling.seed, static_cast<uint64_t>(sampling.layer),
                      static_cast<uint64_t>(query), static_cast<uint64_t>(key)));
  }
  column *= block.beta;
  const Scalar best = (column + noise).maxCoeff();
  // The product's round-off scaled by beta, and the rounding of the scaling
  // and of the addition of the noise.
  const Scalar slack =
      block.beta * SquaredDistanceRoundOff(dim, p.query_sq[query], p.key_sq_max) +
      4 * std::numeric_limits<Scalar>::epsilon() * (std::abs(best) + noise.cwiseAbs().maxCoeff());
  const Scalar* q = p.queries.col(query).data();
  for (Eigen::Index key = 0; key < column.size(); ++key) {
    if (column[key] + noise[key] >= best - 2 * slack) {
      column[key] = block.beta * DirectScore(block.score, q, p.keys.col(key).data(), dim);
    }
  }
  column = GumbelMax<Scalar>(column, noise);
}

// Every key's score for one query computed directly, not in product form.
// Sparsemax and normmax weigh keys by their scores' values, not only their
// order, and the product form's round-off grows with the tokens' norms: a
// block that penalizes other clusters' keys through large register
// coordinates would lose its members' scores in it.
template <typename Scalar>
void ScoreDirectly(const AttentionBlock<Scalar>& block, const Projected<Scalar>& p,
                   Eigen::Index query, Eigen::Map<Vector<Scalar>> column) {
  const int dim = static_cast<int>(p.queries.rows());
  const Scalar* q = p.queries.col(query).data();
  for (Eigen::Index key = 0; key < column.size(); ++key) {
    column[key] = DirectScore(block.score, q, p.keys.col(key).data(), dim);
  }
}

// Turns the products keys^T queries of queries [first, first + cols) into
// unnormalized weights, in place, and per query the divisor that normalizes
// them and whether it has support. The output is divided after the weighted
// sum, so an average of equal values is that value to the last bit.
template <typename Scalar>
void NormalizeColumns(const AttentionBlock<Scalar>& block, const Projected<Scalar>& p,
                      Sampling sampling, Eigen::Index first, Matrix<Scalar>* weights,
                      Scalar* divisor, char* support) {
  const bool gumbel = block.normalizer == Normalizer::kGumbel;
  const bool hard =
      block.normalizer == Normalizer::kHardmax ||
      ((block.normalizer == Normalizer::kSoftmax || gumbel) && std::isinf(block.beta));
  // Gumbel at beta = infinity has no noise left: a plain argmax.
  const Ties ties = gumbel ? Ties::kLowestIndex : block.ties;
  const Eigen::Index cols = weights->cols();
#pragma omp parallel for schedule(static) if (weights->size() > 65536)
  for (Eigen::Index c = 0; c < cols; ++c) {
    Eigen::Map<Vector<Scalar>> column(weights->col(c).data(), weights->rows());
    const Eigen::Index query = first + c;
    if (block.score == ScoreKind::kEuclidean) {
      // Scores are minus the squared distances, formed here while the
      // column is in cache.
      CrossToNegativeSquaredDistances<Scalar>(column, p.key_sq, p.query_sq[query]);
    }
    if (hard) {
      support[c] = HardmaxColumn(block, ties, p, query, column, &divisor[c]) || gumbel;
      continue;
    }
    support[c] = 1;
    switch (block.normalizer) {
      case Normalizer::kSoftmax:
        column *= block.beta;
        column = (column.array() - column.maxCoeff()).exp().matrix();
        divisor[c] = column.sum();
        break;
      case Normalizer::kLinear: {
        const Scalar total = column.sum();
        support[c] = total > 0;
        divisor[c] = total > 0 ? total : Scalar(1);
        if (total <= 0) column.setZero();
        break;
      }
      case Normalizer::kSparsemax:
        ScoreDirectly(block, p, query, column);
        column = Sparsemax<Scalar>(block.beta * column);
        divisor[c] = column.sum();
        break;
      case Normalizer::kNormmax:
        // 1 on the r keys kept and r as the divisor: an exact average.
        ScoreDirectly(block, p, query, column);
        column = (Normmax<Scalar>(block.beta * column, block.tau).array() > 0)
                     .template cast<Scalar>()
                     .matrix();
        divisor[c] = column.sum();
        break;
      case Normalizer::kGumbel:
        GumbelColumn(block, p, sampling, query, column);
        divisor[c] = 1;
        break;
      case Normalizer::kHardmax:
        break;  // decided above
    }
  }
}

// Calls fn(first, weights, divisors) for consecutive blocks of queries.
template <typename Scalar, typename Fn>
void ForEachQueryBlock(const AttentionBlock<Scalar>& block, const Projected<Scalar>& p,
                       Sampling sampling, std::vector<char>* support, Fn fn) {
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
    NormalizeColumns(block, p, sampling, first, &weights, divisors.data(), support->data() + first);
    fn(first, weights, divisors);
  }
}

}  // namespace

template <typename Scalar>
Matrix<Scalar> AttentionWeights(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                                const Matrix<Scalar>& keys, Sampling sampling) {
  const Projected<Scalar> p = Project(block, queries, keys);
  Matrix<Scalar> all(keys.cols(), queries.cols());
  std::vector<char> support;
  ForEachQueryBlock(
      block, p, sampling, &support,
      [&](Eigen::Index first, const Matrix<Scalar>& w, const Vector<Scalar>& divisors) {
        all.middleCols(first, w.cols()) = w.array().rowwise() / divisors.transpose().array();
      });
  return all;
}

template <typename Scalar>
Matrix<Scalar> Attend(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                      const Matrix<Scalar>& keys, std::vector<bool>* support, Sampling sampling) {
  const Projected<Scalar> p = Project(block, queries, keys);
  Matrix<Scalar> out(queries.rows(), queries.cols());
  std::vector<char> supported;
  ForEachQueryBlock(
      block, p, sampling, &supported,
      [&](Eigen::Index first, const Matrix<Scalar>& w, const Vector<Scalar>& divisors) {
        auto block_out = out.middleCols(first, w.cols());
        block_out.noalias() = p.values * w;
        block_out.array().rowwise() /= divisors.transpose().array();
      });
  if (support != nullptr) support->assign(supported.begin(), supported.end());
  return out;
}

#define KMT_INSTANTIATE(S)                                                                   \
  template Matrix<S> AttentionWeights<S>(const AttentionBlock<S>&, const Matrix<S>&,         \
                                         const Matrix<S>&, Sampling);                        \
  template Matrix<S> Attend<S>(const AttentionBlock<S>&, const Matrix<S>&, const Matrix<S>&, \
                               std::vector<bool>*, Sampling);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
