// The sparse assignment and sums: kernels, compiled per SIMD level
// (core/simd_kernels.h). CsrMatrix itself is in csr_matrix.cc.
#include "core/sparse.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "core/assign.h"
#include "core/distances.h"
#include "core/huge_pages.h"

namespace kmt {

namespace {

constexpr double kEpsDouble = std::numeric_limits<double>::epsilon();
// The bounds are computed in double, each in a few roundings of positive
// terms: this factor puts them above the values they bound.
constexpr double kBoundSafety = 1 + 1e-10;
// Coordinates per partial sum of a center's squared norm: its relative
// round-off is then (kNormBlock + d / kNormBlock) eps rather than d eps.
constexpr Eigen::Index kNormBlock = 256;

// The scores' SIMD packet at the level this file is compiled at (4 floats
// at x86-64 and v2, 8 at v3, 16 at v4), and the most packets of scores a
// row keeps in registers while it walks its nonzeros: half the vector
// registers (16 of AVX-512's 32, 8 of the 16 below it), the rest for the
// nonzero's value and the loaded columns.
template <typename Scalar>
using Packet = typename Eigen::internal::packet_traits<Scalar>::type;
template <typename Scalar>
constexpr int kPacketSize = Eigen::internal::unpacket_traits<Packet<Scalar>>::size;
#if defined(__AVX512F__)
constexpr int kScorePackets = 16;
#else
constexpr int kScorePackets = 8;
#endif

// How many nonzeros ahead the score loop asks for a column's cache lines,
// where a row's pass holds at least kPrefetchPackets packets: a nonzero's
// column is a random read from centers of d k values (134 MB at k = 256,
// d = 2^17), and with many packets a nonzero the processor's own look-ahead
// reaches too few nonzeros to keep enough of them in flight (measured:
// 10-25% less time at k = 256 on AVX-512, AVX2 and SSE; none to gain at
// 2 or 3 packets, k = 20 on AVX-512 and AVX2, where the prefetches only
// add instructions).
constexpr int64_t kPrefetchAhead = 8;
constexpr int kPrefetchPackets = 4;

// k rounded up to whole packets: the rows of the transposed centers and of
// the scores, so that every packet of a nonzero's column is a whole one.
template <typename Scalar>
Eigen::Index PaddedCenters(Eigen::Index k) {
  constexpr Eigen::Index size = kPacketSize<Scalar>;
  return (k + size - 1) / size * size;
}

// What the sparse scores need of the centers, once per assignment: the
// centers transposed (coordinate l of every center contiguous, column l of
// a k x d matrix, so that a nonzero x_l adds x_l times one column to the k
// scores; its rows and the offsets padded with zeros to whole packets), the
// scores' start -||c_j||^2 / 2, and per center the terms of the scores'
// round-off bound.
template <typename Scalar>
struct SparseCenters {
  explicit SparseCenters(const Matrix<Scalar>& centers)
      : storage(static_cast<size_t>(PaddedCenters<Scalar>(centers.cols()) * centers.rows())),
        transposed(storage.data(), PaddedCenters<Scalar>(centers.cols()), centers.rows()),
        offset(Vector<Scalar>::Zero(transposed.rows())),
        half_sq(centers.cols()),
        norm(centers.cols()),
        offset_error(centers.cols()) {
    const Eigen::Index d = centers.rows(), k = centers.cols();
    // The threads take columns of the transposed centers, then centers.
    const bool parallel = d * k > (Eigen::Index{1} << 16);
    constexpr Eigen::Index kColumns = 4096;
#pragma omp parallel for schedule(static) if (parallel)
    for (Eigen::Index l = 0; l < d; l += kColumns) {
      const Eigen::Index columns = std::min(kColumns, d - l);
      transposed.block(0, l, k, columns) = centers.middleRows(l, columns).transpose();
      transposed.block(k, l, transposed.rows() - k, columns).setZero();
    }
    const double blocks = static_cast<double>((d + kNormBlock - 1) / kNormBlock);
    // Each square (rounded for double centers, exact in double for float
    // ones) passes through at most kNormBlock + blocks additions.
    const double norm_error = (static_cast<double>(kNormBlock) + blocks + 1) * kEpsDouble;
#pragma omp parallel for schedule(static) if (parallel)
    for (Eigen::Index j = 0; j < k; ++j) {
      const Scalar* c = centers.col(j).data();
      double sq = 0;
      for (Eigen::Index start = 0; start < d; start += kNormBlock) {
        double block = 0;
        for (Eigen::Index l = start; l < std::min(d, start + kNormBlock); ++l) {
          block += static_cast<double>(c[l]) * static_cast<double>(c[l]);
        }
        sq += block;
      }
      offset[j] = static_cast<Scalar>(-0.5 * sq);
      const double sq_bound = sq * (1 + 2 * norm_error) * kBoundSafety;
      half_sq[j] = 0.5 * sq_bound;
      norm[j] = std::sqrt(sq_bound) * (1 + kEpsDouble);
      // The offset's distance from -||c_j||^2 / 2: the norm's round-off and
      // one rounding to Scalar.
      offset_error[j] =
          half_sq[j] * (std::numeric_limits<Scalar>::epsilon() + 2 * norm_error) * kBoundSafety;
    }
    half_sq_max = k > 0 ? *std::max_element(half_sq.begin(), half_sq.end()) : 0;
    norm_max = k > 0 ? *std::max_element(norm.begin(), norm.end()) : 0;
    offset_error_max = k > 0 ? *std::max_element(offset_error.begin(), offset_error.end()) : 0;
    nonnegative = k > 0 && centers.minCoeff() >= 0;
  }

  // A bound on |computed - exact| of center j's score for a row of m
  // nonzeros and norm at most x_norm. The score is the offset plus m
  // products added one by one: with eps = 2u, (m + 1) eps bounds the
  // relative round-off of such a sum of m + 1 terms against the sum of
  // their magnitudes, |offset| + sum_l |x_l| |c_jl| <= ||c_j||^2 / 2 +
  // ||x|| ||c_j|| (Cauchy-Schwarz over the row's nonzeros, which spares a
  // second pass of m k products), with room for the second-order terms.
  //
  // Where the row's values and every center coordinate are at least 0
  // (TF-IDF and counts, and their means), the products' magnitudes add up to
  // the product itself, P_j = sum_l x_l c_jl, which the computed score
  // bounds: s_j >= O_j + P_j - gamma (|O_j| + P_j) for the offset O_j, so
  // P_j <= (s_j + A_j (1 + gamma)) / (1 - gamma) with A_j >= |O_j|. That
  // bound is ||x|| ||c_j|| times the row's cosine to c_j, several times
  // tighter for the centers a document is far from, and the one taken when
  // smaller. `score` is s_j, `nonnegative` whether the row and the centers
  // are.
  double Error(Eigen::Index j, double per_term, double x_norm, double score,
               bool nonnegative) const {
    return Bounded(per_term, half_sq[j], x_norm * norm[j], offset_error[j], score, nonnegative);
  }
  // Error's largest value over the centers, for a row whose best score is
  // `best`.
  double MaxError(double per_term, double x_norm, double best, bool nonnegative) const {
    return Bounded(per_term, half_sq_max, x_norm * norm_max, offset_error_max, best, nonnegative);
  }

  // The transposed centers' values, on huge pages from a few MiB on: the
  // scores read them at random columns, each a TLB miss on small pages.
  std::vector<Scalar, HugePageAllocator<Scalar>> storage;
  Eigen::Map<Matrix<Scalar>> transposed;
  Vector<Scalar> offset;
  std::vector<double> half_sq, norm, offset_error;
  double half_sq_max = 0, norm_max = 0, offset_error_max = 0;
  bool nonnegative = false;  // every coordinate of every center >= 0

 private:
  // The bound for a center of half squared norm (bounded by) half, ||x||
  // ||c|| at most `cauchy`, offset error `offset_err` and score `score`.
  static double Bounded(double per_term, double half, double cauchy, double offset_err,
                        double score, bool nonnegative) {
    double magnitude = cauchy;
    if (nonnegative) {
      // A >= |O_j|: the offset is -||c_j||^2 / 2 rounded once to Scalar.
      const double a = half * (1 + std::numeric_limits<Scalar>::epsilon());
      const double product =
          std::max(0.0, (score + a * (1 + per_term)) / (1 - per_term)) * (1 + 4 * kEpsDouble);
      magnitude = std::min(magnitude, product);
    }
    return (per_term * (half + magnitude) + offset_err) * kBoundSafety;
  }
};

// The most rows a thread makes dense at once: their near ties' distances
// are chains of d dependent additions each (DirectSquaredDistance's
// order), latency-bound one at a time, so the chains of several rows run
// interleaved (kDirectChains at a time). Held to kDenseBytes of dense rows
// a thread, whatever d.
constexpr int kDenseRows = 8;
constexpr int64_t kDenseBytes = int64_t{8} << 20;

// One thread's working space: the scores of a row (k padded to whole
// packets), the rows waiting to be made dense (each dense row zero between
// uses) and their near ties' candidates.
template <typename Scalar>
struct SparseScratch {
  // A row that needs its dense form: a near tie (its candidates
  // candidates[first, first + count), in increasing index) or, for kDense
  // distances, its distance. `label` is its scores' choice.
  struct Pending {
    int64_t row;
    int label;
    size_t first, count;
    double x_sq;   // the row's squared norm
    Scalar score;  // the label's score
  };

  SparseScratch(Eigen::Index d, Eigen::Index k)
      : score(PaddedCenters<Scalar>(k)),
        dense(static_cast<size_t>(std::clamp<int64_t>(
                  kDenseBytes / std::max<int64_t>(1, d * static_cast<int64_t>(sizeof(Scalar))), 1,
                  kDenseRows)),
              Vector<Scalar>::Zero(d)) {}
  Vector<Scalar> score;
  std::vector<Vector<Scalar>> dense;
  std::vector<int> candidates;
  std::vector<Scalar> candidate_scores;  // each candidate's score
  std::vector<Pending> pending;
};

// kPackets packets of a row's scores (from `offset`, into `score`) over its
// m nonzeros (index, value), `columns` the transposed centers (leading
// dimension ld) from the packets' first center. The packets stay in
// registers across the row: each nonzero loads its column's packets once.
// Every lane adds the products one by one in the nonzeros' order, a
// product rounded and then added (no fused multiply-add: -ffp-contract=off
// and separate operations), as the scalar loop would: the scores' bits are
// the same at every SIMD level, and the packet width only groups them.
template <int kPackets, typename Scalar>
void ScorePackets(const int32_t* index, const Scalar* value, int64_t m, const Scalar* columns,
                  Eigen::Index ld, const Scalar* offset, Scalar* score) {
  namespace simd = Eigen::internal;
  using P = Packet<Scalar>;
  constexpr int kSize = kPacketSize<Scalar>;
  constexpr size_t kBytes = kPackets * kSize * sizeof(Scalar);
  P acc[kPackets];
  for (int v = 0; v < kPackets; ++v) acc[v] = simd::ploadu<P>(offset + v * kSize);
  const auto add = [&](int64_t p) {
    const Scalar* column = columns + static_cast<Eigen::Index>(index[p]) * ld;
    const P x = simd::pset1<P>(value[p]);
    for (int v = 0; v < kPackets; ++v) {
      acc[v] = simd::padd(acc[v], simd::pmul(x, simd::ploadu<P>(column + v * kSize)));
    }
  };
  int64_t p = 0;
  if constexpr (kPackets >= kPrefetchPackets) {
    for (; p + kPrefetchAhead < m; ++p) {
      // The cache lines of the packets kPrefetchAhead nonzeros on.
      const uintptr_t first = reinterpret_cast<uintptr_t>(
          columns + static_cast<Eigen::Index>(index[p + kPrefetchAhead]) * ld);
      for (uintptr_t line = first & ~uintptr_t{63}; line < first + kBytes; line += 64) {
        __builtin_prefetch(reinterpret_cast<const void*>(line));
      }
      add(p);
    }
  }
  for (; p < m; ++p) add(p);
  for (int v = 0; v < kPackets; ++v) simd::pstoreu(score + v * kSize, acc[v]);
}

// ScorePackets for `packets` packets, 1 to kScorePackets.
template <typename Scalar, int... kCounts>
void ScorePacketsOf(int packets, const int32_t* index, const Scalar* value, int64_t m,
                    const Scalar* columns, Eigen::Index ld, const Scalar* offset, Scalar* score,
                    std::integer_sequence<int, kCounts...>) {
  using Kernel = void (*)(const int32_t*, const Scalar*, int64_t, const Scalar*, Eigen::Index,
                          const Scalar*, Scalar*);
  static constexpr Kernel kKernels[] = {&ScorePackets<kCounts + 1, Scalar>...};
  kKernels[packets - 1](index, value, m, columns, ld, offset, score);
}

// Row i's scores <x, c_j> - ||c_j||^2 / 2 from its nonzeros, into `score`
// (k padded to whole packets, the padding's scores 0), kScorePackets
// packets of centers at a time; returns its squared norm (in double), and
// whether its values are all at least 0 in `nonnegative`.
template <typename Scalar>
double ScoreRow(const CsrMatrix<Scalar>& points, int64_t i, const SparseCenters<Scalar>& sc,
                Vector<Scalar>* score, bool* nonnegative) {
  const int64_t begin = points.indptr()[i], end = points.indptr()[i + 1];
  const int32_t* index = points.indices().data() + begin;
  const Scalar* value = points.values().data() + begin;
  const int64_t m = end - begin;
  const Eigen::Index ld = sc.transposed.rows();
  const int packets = static_cast<int>(ld / kPacketSize<Scalar>);
  for (int first = 0; first < packets; first += kScorePackets) {
    const Eigen::Index lane = static_cast<Eigen::Index>(first) * kPacketSize<Scalar>;
    ScorePacketsOf<Scalar>(std::min(kScorePackets, packets - first), index, value, m,
                           sc.transposed.data() + lane, ld, sc.offset.data() + lane,
                           score->data() + lane, std::make_integer_sequence<int, kScorePackets>());
  }
  double x_sq = 0;
  bool nonnegative_row = true;
  for (int64_t p = 0; p < m; ++p) {
    x_sq += static_cast<double>(value[p]) * static_cast<double>(value[p]);
    nonnegative_row &= value[p] >= 0;
  }
  *nonnegative = nonnegative_row;
  return x_sq;
}

// kProduct's squared distance of a row of squared norm x_sq to the center
// of score `score`: ||x||^2 - 2 (<x, c> - ||c||^2 / 2), clamped at 0.
template <typename Scalar>
Scalar ProductDistance(double x_sq, Scalar score) {
  return std::max(Scalar(0), static_cast<Scalar>(x_sq) - 2 * score);
}

// Row i's label and squared distance (by `distances`) from its scores;
// where they need the row made dense (a near tie, or kDense distances),
// the row is left in scratch->pending for FinishDense instead.
template <typename Scalar>
void AssignRow(const CsrMatrix<Scalar>& points, int64_t i, const SparseCenters<Scalar>& sc,
               Eigen::Index k, SparseDistances distances, SparseScratch<Scalar>* scratch,
               int* label_out, Scalar* sq_out) {
  Vector<Scalar>& score = scratch->score;
  // 1. The scores from the nonzeros.
  bool nonnegative_row = true;
  const double x_sq = ScoreRow(points, i, sc, &score, &nonnegative_row);
  const bool nonnegative = nonnegative_row && sc.nonnegative;
  // 2. The best, the lowest index among equal scores.
  Scalar best = score[0];
  int label = 0;
  for (Eigen::Index j = 1; j < k; ++j) {
    if (score[j] > best) {
      best = score[j];
      label = static_cast<int>(j);
    }
  }
  // 3. The near-tie test: center j may be nearer than the label in exact
  // arithmetic when its score lies within both scores' round-off bounds of
  // the best. The differences are taken in double (exact for float scores;
  // one rounding, within the bounds' safety factor, for double ones).
  const int64_t m = points.indptr()[i + 1] - points.indptr()[i];
  const double per_term = static_cast<double>(m + 1) * std::numeric_limits<Scalar>::epsilon();
  const double x_norm =
      std::sqrt(x_sq * (1 + 2 * static_cast<double>(m + 1) * kEpsDouble)) * (1 + kEpsDouble);
  const double label_error = sc.Error(label, per_term, x_norm, best, nonnegative);
  const double reach = label_error + sc.MaxError(per_term, x_norm, best, nonnegative);
  std::vector<int>& candidates = scratch->candidates;
  const size_t first = candidates.size();
  for (Eigen::Index j = 0; j < k; ++j) {
    const double below = static_cast<double>(best) - static_cast<double>(score[j]);
    if (j == label || (below <= reach && below <= label_error + sc.Error(j, per_term, x_norm,
                                                                         score[j], nonnegative))) {
      candidates.push_back(static_cast<int>(j));
      scratch->candidate_scores.push_back(score[j]);
    }
  }
  const size_t count = candidates.size() - first;
  *label_out = label;
  if (count > 1 || distances == SparseDistances::kDense) {
    scratch->pending.push_back({i, label, first, count, x_sq, best});
  } else {
    candidates.resize(first);
    scratch->candidate_scores.resize(first);
    *sq_out = ProductDistance(x_sq, best);
  }
}

// The pending rows' labels and squared distances, each row written into a
// dense vector of d zeros at its nonzeros (and zeroed again after). A near
// tie is decided as the dense path decides it (FinishAmong): its
// candidates in increasing order compared on DirectSquaredDistance to the
// dense row, the first least winning; every pending row's chains (one per
// candidate) run kDirectChains at a time, each with DirectSquaredDistance's
// additions in its order, so its bits. The distance is then, by
// `distances`, AssignedSquaredDistance of the dense row to its center or
// the product form from the center's score.
template <typename Scalar>
void FinishDense(const CsrMatrix<Scalar>& points, const Matrix<Scalar>& centers,
                 SparseDistances distances, SparseScratch<Scalar>* scratch, int* labels,
                 Scalar* sq) {
  const Eigen::Index d = centers.rows();
  const int32_t* index = points.indices().data();
  const Scalar* value = points.values().data();
  const std::vector<int>& candidates = scratch->candidates;
  std::vector<typename SparseScratch<Scalar>::Pending>& pending = scratch->pending;
  for (size_t r = 0; r < pending.size(); ++r) {
    Scalar* dense = scratch->dense[r].data();
    for (int64_t p = points.indptr()[pending[r].row]; p < points.indptr()[pending[r].row + 1];
         ++p) {
      dense[index[p]] = value[p];
    }
  }
  // Every near tie's (row, candidate) pairs, in order, kDirectChains at a
  // time.
  const Scalar* rows[kDirectChains];
  const Scalar* columns[kDirectChains];
  Scalar distance[kDirectChains];
  std::pair<size_t, size_t> owner[kDirectChains];  // (pending row, candidate)
  Scalar exact[kDenseRows];
  std::fill(exact, exact + kDenseRows, std::numeric_limits<Scalar>::infinity());
  int chains = 0;
  const auto run = [&] {
    DirectSquaredDistancePairs(rows, columns, chains, d, distance);
    for (int t = 0; t < chains; ++t) {
      const auto [r, c] = owner[t];
      if (distance[t] < exact[r]) {
        exact[r] = distance[t];
        pending[r].label = candidates[c];
        pending[r].score = scratch->candidate_scores[c];
      }
    }
    chains = 0;
  };
  for (size_t r = 0; r < pending.size(); ++r) {
    if (pending[r].count < 2) continue;
    for (size_t c = pending[r].first; c < pending[r].first + pending[r].count; ++c) {
      rows[chains] = scratch->dense[r].data();
      columns[chains] = centers.col(candidates[c]).data();
      owner[chains] = {r, c};
      if (++chains == kDirectChains) run();
    }
  }
  if (chains > 0) run();
  for (size_t r = 0; r < pending.size(); ++r) {
    const int64_t i = pending[r].row;
    Scalar* dense = scratch->dense[r].data();
    labels[i] = pending[r].label;
    sq[i] = distances == SparseDistances::kDense
                ? AssignedSquaredDistance(dense, centers.col(pending[r].label).data(), d)
                : ProductDistance(pending[r].x_sq, pending[r].score);
    for (int64_t p = points.indptr()[i]; p < points.indptr()[i + 1]; ++p) dense[index[p]] = 0;
  }
  pending.clear();
  scratch->candidates.clear();
  scratch->candidate_scores.clear();
}

// How many nonzeros ahead AddRow asks for a sum's cache line: the sums
// are a random write into the cluster's d doubles (1 MiB at d = 2^17).
constexpr int64_t kSumsAhead = 16;

// Adds row i (weight w, or null for 1) to the sums `sum` (d values) and the
// weight and count of its cluster, with AddToSums's additions, its zeros
// left out.
template <typename Scalar>
void AddRow(const CsrMatrix<Scalar>& points, int64_t i, const Scalar* w, double* sum,
            double* weight, int64_t* count) {
  const int32_t* index = points.indices().data();
  const Scalar* value = points.values().data();
  const int64_t begin = points.indptr()[i], end = points.indptr()[i + 1];
  const auto add = [&](auto term) {
    int64_t p = begin;
    for (; p + kSumsAhead < end; ++p) {
      __builtin_prefetch(sum + index[p + kSumsAhead], 1, 3);
      sum[index[p]] += term(value[p]);
    }
    for (; p < end; ++p) sum[index[p]] += term(value[p]);
  };
  if (w == nullptr) {
    add([](Scalar v) { return static_cast<double>(v); });
    *weight += 1;
  } else {
    const double weight_i = *w;
    add([weight_i](Scalar v) { return weight_i * static_cast<double>(v); });
    *weight += weight_i;
  }
  ++*count;
}

// Whether d sums and a weight are all +0, the bits of a fresh ClusterSums.
bool PositiveZero(const double* sum, Eigen::Index d, double weight) {
  uint64_t bits;
  std::memcpy(&bits, &weight, sizeof bits);
  for (Eigen::Index l = 0; l < d; ++l) {
    uint64_t v;
    std::memcpy(&v, sum + l, sizeof v);
    bits |= v;
  }
  return bits == 0;
}

// Adds the rows' counts, weights and sums under their labels to `into` as
// the dense path adds them: in consecutive parts of part_size rows, each
// part's from zero in row order, the parts' added to `into` in order. Each
// thread takes the clusters it owns (label mod the thread count) through
// every part: a cluster's part is summed in its column of a d x k buffer,
// zeroed for it, and then added to the cluster's sums, or, in the first
// part of a cluster whose sums and weight are +0, into them directly (+0 + s
// is s, and a part's sums never become -0). A cluster's additions are the
// serial loop's, whichever thread makes them, and no thread waits for
// another.
template <typename Scalar>
void AddSumsInParts(const CsrMatrix<Scalar>& points, const Labels& labels,
                    const Vector<Scalar>* weights, Eigen::Index part_size, ClusterSums* into) {
  const int64_t n = points.rows();
  const Eigen::Index d = into->sums.rows(), k = into->sums.cols();
  if (n == 0) return;
  const bool parallel = points.nnz() > (1 << 16);
  // Which clusters take their first part straight into their sums.
  std::vector<char> direct(static_cast<size_t>(k));
#pragma omp parallel for schedule(static) if (parallel)
  for (Eigen::Index j = 0; j < k; ++j) {
    direct[j] = PositiveZero(into->sums.col(j).data(), d, into->weights[j]);
  }
  // A cluster's part in the buffer: its sums (unwritten until its owner
  // zeroes the column for a part), weight and count.
  const bool buffered_any =
      n > part_size || std::find(direct.begin(), direct.end(), 0) != direct.end();
  Matrix<double> buffer(buffered_any ? d : 0, buffered_any ? k : 0);
  std::vector<double> part_weight(static_cast<size_t>(k));
  std::vector<int64_t> part_count(static_cast<size_t>(k));
#pragma omp parallel if (parallel)
  {
    const int threads = omp_get_num_threads(), me = omp_get_thread_num();
    for (int64_t start = 0; start < n; start += part_size) {
      const int64_t end = std::min<int64_t>(n, start + part_size);
      const bool first = start == 0;
      const auto buffered = [&](Eigen::Index j) { return !(first && direct[j]); };
      for (Eigen::Index j = me; j < k; j += threads) {
        if (!buffered(j)) continue;
        buffer.col(j).setZero();
        part_weight[j] = 0;
        part_count[j] = 0;
      }
      for (int64_t i = start; i < end; ++i) {
        const int j = labels[i];
        if (j % threads != me) continue;
        const Scalar* w = weights != nullptr ? weights->data() + i : nullptr;
        if (buffered(j)) {
          AddRow(points, i, w, buffer.col(j).data(), &part_weight[j], &part_count[j]);
        } else {
          AddRow(points, i, w, into->sums.col(j).data(), &into->weights[j], &into->counts[j]);
        }
      }
      for (Eigen::Index j = me; j < k; j += threads) {
        if (!buffered(j)) continue;
        into->sums.col(j) += buffer.col(j);
        into->weights[j] += part_weight[j];
        into->counts[j] += part_count[j];
      }
    }
  }
}

// The rows in consecutive parts of part_size, each part's objective (if sq
// is given) and sums (if `into` is) added from zero in row order, then the
// parts' added in order: AssignNearest's and AccumulateClusterSums's
// additions.
template <typename Scalar>
double AddInParts(const CsrMatrix<Scalar>& points, const Labels& labels, const Scalar* sq,
                  const Vector<Scalar>* weights, Eigen::Index part_size, ClusterSums* into) {
  const int64_t n = points.rows();
  double total = 0;
  if (sq != nullptr) {
    for (int64_t start = 0; start < n; start += part_size) {
      double part_total = 0;
      for (int64_t i = start; i < std::min<int64_t>(n, start + part_size); ++i) {
        part_total =
            WithObjective(part_total, sq[i], weights != nullptr ? weights->data() + i : nullptr);
      }
      total += part_total;
    }
  }
  if (into != nullptr) AddSumsInParts(points, labels, weights, part_size, into);
  return total;
}

}  // namespace

template <typename Scalar>
double AssignNearestSparse(const CsrMatrix<Scalar>& points, const Matrix<Scalar>& centers,
                           Labels* labels, NonDeduced<Vector<Scalar>>* sq_dist, ClusterSums* sums,
                           const NonDeduced<Vector<Scalar>>* weights, SparseDistances distances) {
  const Eigen::Index n = points.rows(), d = points.cols(), k = centers.cols();
  if (sq_dist != nullptr) sq_dist->resize(n);
  if (n == 0 || k == 0) {
    labels->assign(n, 0);
    return 0;
  }
  labels->resize(n);
  const SparseCenters<Scalar> sc(centers);
  Vector<Scalar> own_sq;
  Vector<Scalar>* sq = sq_dist;
  if (sq == nullptr) {
    own_sq.resize(n);
    sq = &own_sq;
  }
#pragma omp parallel if (points.nnz() * k > (1 << 18))
  {
    SparseScratch<Scalar> scratch(d, k);
#pragma omp for schedule(dynamic, 256) nowait
    for (Eigen::Index i = 0; i < n; ++i) {
      AssignRow(points, i, sc, k, distances, &scratch, labels->data() + i, sq->data() + i);
      if (scratch.pending.size() == scratch.dense.size()) {
        FinishDense(points, centers, distances, &scratch, labels->data(), sq->data());
      }
    }
    FinishDense(points, centers, distances, &scratch, labels->data(), sq->data());
  }
  return AddInParts(points, *labels, sq->data(), weights, AssignmentPartSize<Scalar>(n, d, k),
                    sums);
}

template <typename Scalar>
Matrix<Scalar> SparseSquaredDistances(const CsrMatrix<Scalar>& points,
                                      const Matrix<Scalar>& centers) {
  const Eigen::Index n = points.rows(), k = centers.cols();
  Matrix<Scalar> out(k, n);
  if (n == 0 || k == 0) return out;
  const SparseCenters<Scalar> sc(centers);
#pragma omp parallel if (points.nnz() * k > (1 << 18))
  {
    Vector<Scalar> score(sc.transposed.rows());
#pragma omp for schedule(dynamic, 256)
    for (Eigen::Index i = 0; i < n; ++i) {
      bool nonnegative = true;
      const double x_sq = ScoreRow(points, i, sc, &score, &nonnegative);
      for (Eigen::Index j = 0; j < k; ++j) out(j, i) = ProductDistance(x_sq, score[j]);
    }
  }
  return out;
}

template <typename Scalar>
void AccumulateSparseClusterSums(const CsrMatrix<Scalar>& points, const Labels& labels,
                                 ClusterSums* into, const NonDeduced<Vector<Scalar>>* weights) {
  AddInParts<Scalar>(points, labels, nullptr, weights, kClusterSumsChunk, into);
}

#define KMT_INSTANTIATE(S)                                                                       \
  template double AssignNearestSparse<S>(const CsrMatrix<S>&, const Matrix<S>&, Labels*,         \
                                         Vector<S>*, ClusterSums*, const Vector<S>*,             \
                                         SparseDistances);                                       \
  template Matrix<S> SparseSquaredDistances<S>(const CsrMatrix<S>&, const Matrix<S>&);           \
  template void AccumulateSparseClusterSums<S>(const CsrMatrix<S>&, const Labels&, ClusterSums*, \
                                               const Vector<S>*);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
