// The assignment step: each point's nearest center and the k-means objective.
// Distances come from ||x||^2 + ||c||^2 - 2<x, c> through one matrix product
// per block of points (as FAISS does), in parallel over parts of the points;
// a point whose best two candidates lie within the product's round-off bound
// is decided again on directly computed distances, so the labels equal a
// plain argmin with ties to the lowest index. The same pass can add the
// points' counts and sums under their labels (Lloyd's update), while each
// block is still in cache.
#ifndef KMT_CORE_ASSIGN_H_
#define KMT_CORE_ASSIGN_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cluster_sums.h"
#include "core/simd.h"
#include "core/types.h"

namespace kmt {

template <typename Scalar>
struct SimdKernels;

// The points of a run that assigns them again and again to k moving
// centers, transposed once into the register kernel's lanes (packets of
// points, coordinate-major) so that each assignment need not transpose them
// again. Empty, and then ignored, where the kernel does not take d and k or
// the copy would exceed kMaxBytes. The layout is the SIMD level's
// (core/simd.h) in use when they are made: an assignment at another level
// does without them.
template <typename Scalar>
class PointLanes {
 public:
  static constexpr double kMaxBytes = 64.0 * 1024 * 1024;

  PointLanes(const Matrix<Scalar>& points, Eigen::Index k) : d_(points.rows()), n_(points.cols()) {
    Build(points, k);
  }

  bool empty() const { return lanes_.size() == 0; }
  // Whether these are the lanes of points of this shape.
  bool fits(const Matrix<Scalar>& points) const {
    return !empty() && points.rows() == d_ && points.cols() == n_;
  }
  // The points a packet holds: the lanes' layout.
  int packet() const { return packet_; }
  // The lanes of the packet that starts at point `first` (a whole number
  // of packets from the first point).
  const Scalar* from(Eigen::Index first) const { return lanes_.data() + first * d_; }
  // Upper bounds on the exact squared norms of the points from `first` on,
  // one a point (0 past the last): the near-tie test of an assignment that
  // does not ask for the squared distances is taken from them
  // (NearestCenterScan::Scan).
  const Scalar* norms_from(Eigen::Index first) const { return norms_.data() + first; }

 private:
  friend struct SimdKernels<Scalar>;
  // The constructor's work, at the level in use.
  void Build(const Matrix<Scalar>& points, Eigen::Index k);

  Eigen::Index d_, n_;
  int packet_ = 0;
  Vector<Scalar> lanes_, norms_;
};

// points: d x n, centers: d x k. Fills labels (n), if given the squared
// distance of each point to its center (n), and if given adds the counts,
// weights and weighted coordinate sums of the points under their labels to
// `sums`. `weights` (n, or null for 1 each) weigh the points. Returns the
// objective sum_i w_i min_j ||x_i - c_j||^2, accumulated in double, or
// NaN without `objective` (and then sq_dist must be null): with lanes, the
// squared distances to the centers are then not computed at all.
// Objective and sums are added in fixed parts of the points merged in order,
// so they do not depend on the thread count. `lanes`, if given, are these
// points' (for these k); the results are the same, to the bit.
template <typename Scalar>
double AssignNearest(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, Labels* labels,
                     NonDeduced<Vector<Scalar>>* sq_dist = nullptr, ClusterSums* sums = nullptr,
                     const NonDeduced<Vector<Scalar>>* weights = nullptr,
                     const PointLanes<Scalar>* lanes = nullptr, bool objective = true);

// The most bytes of rows AssignRows gathers at a time: a span of the
// batch that stays in the caches from its scan to its sums.
inline constexpr int64_t kAssignRowsBytes = int64_t{8} << 20;

// AssignNearest of points' columns `rows` (m of them, in order, repeats
// allowed: a mini-batch drawn from a shard): fills labels (m) and, into
// `sums` if given, adds the rows' counts, weights and (weighted) sums, each
// center's in the rows' order (so AccumulateClusterSums's bits on the
// gathered rows, up to its chunk of kClusterSumsChunk); `weights` (n, or
// null for 1 each) are the points'. Returns the objective, added in the
// rows' order. The batch is taken a span at a time (whole blocks, at most
// kAssignRowsBytes): the threads gather its rows a block at a time into
// one buffer and scan them there; then each thread adds the buffer's rows
// of its own share of the centers. So the rows are read from `points`
// once, no thread holds every center's sums to merge, and the results do
// not depend on the thread count.
template <typename Scalar>
double AssignRows(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, const int64_t* rows,
                  Eigen::Index m, Labels* labels, ClusterSums* sums = nullptr,
                  const NonDeduced<Vector<Scalar>>* weights = nullptr);

// sum_i min_j ||x_i - c_j||^2, accumulated in double.
template <typename Scalar>
double Objective(const Matrix<Scalar>& points, const Matrix<Scalar>& centers) {
  Labels labels;
  return AssignNearest(points, centers, &labels);
}

// AssignNearest's decision for one block of points at a time, for callers
// that assign some of the points only (the bound-based assignment,
// bounds.h). It holds what depends on the centers alone, computed once.
template <typename Scalar>
class NearestCenterScan {
 public:
  // `centers` (d x k) must outlive the scan.
  explicit NearestCenterScan(const Matrix<Scalar>& centers) : centers_(centers) { Init(); }

  // The block of AssignNearest's products (AssignmentBlockSize): the parts
  // its sums are added in are whole numbers of them.
  Eigen::Index block() const { return block_; }
  // The most points one Scan takes: a whole number of blocks, more than one
  // where many centers make the blocks small.
  Eigen::Index span() const { return span_; }

  // Whether the scores come from the register kernel (few centers) rather
  // than the blocked matrix product; both give the same labels.
  bool register_kernel() const { return transposed_.size() > 0; }

  // One thread's working space.
  struct Scratch {
    Matrix<Scalar> score;
    Vector<Scalar> best, second, arg;
    Vector<Scalar> lanes;  // the register kernel's points, coordinate-major
    Vector<Scalar> sq;     // the squared distances a caller does not ask for
    // Through tiles, a block's points near a tie (near_row, their scanned
    // labels and their scores' floors for a candidate), and a batch of them
    // (near_points) with their scores of every center.
    std::vector<Eigen::Index> near_row;
    std::vector<int> near_label;
    std::vector<Scalar> near_floor;
    Matrix<Scalar> near_points, near_scores;
    // A block's near ties, decided together (DecideTies): the points
    // (tie_point) and their scanned labels (tie_label), their candidates
    // (tie_center, from tie_first[t] to tie_first[t + 1]) and the
    // candidates' direct distances (tie_distance).
    std::vector<Eigen::Index> tie_point;
    std::vector<int> tie_label;
    std::vector<Eigen::Index> tie_first;
    std::vector<int> tie_center;
    std::vector<Scalar> tie_distance;
    // The low-precision filter's (FilterBlock): the block's points in
    // bfloat16, a group's scores and each point's running best, second best
    // and label, bounds and candidates; the points it leaves to the float32
    // products, gathered, and their answers.
    std::vector<uint16_t> narrow;
    std::vector<float> narrow_score, narrow_best, narrow_second;
    std::vector<int> narrow_arg, kept_index, kept_count;
    std::vector<float> kept_score;
    std::vector<double> narrow_bound;
    std::vector<Scalar> candidate_score;
    std::vector<Eigen::Index> open;
    Matrix<Scalar> open_x;
    std::vector<int> open_labels;
    Vector<Scalar> open_sq;
    std::vector<double> open_gap;
    // Points the filter took; of those, the ones its scores left in doubt
    // (decided again in float32, among their candidates), and of these the
    // ones with too many candidates (the float32 products over every
    // center).
    int64_t filtered = 0, reopened = 0, full = 0;
  };

  // For the columns of x (d x rows, rows <= span()): labels[i], sq[i] the
  // squared distance to that center (AssignedSquaredDistance on x), and,
  // if `gap` is given, gap[i] a lower bound on
  // min_{j != label} ||x_i - c_j||^2 - ||x_i - c_label||^2 in exact
  // arithmetic (0 where a near tie was decided on direct distances).
  // `lanes`, if not null, are x's in the register kernel's layout
  // (PointLanes::from), used where the kernel computes the scores. `sq` may
  // be null where `gap` is: with `norms` (PointLanes::norms_from) and the
  // centers in lanes, the near-tie test then takes its bound on each
  // point's norm from them, and only near ties compute a distance.
  void Scan(const Eigen::Ref<const Matrix<Scalar>>& x, Scratch* scratch, int* labels, Scalar* sq,
            double* gap = nullptr, const Scalar* lanes = nullptr,
            const Scalar* norms = nullptr) const;

  // Whether Scan takes its scores from the low-precision filter
  // (core/simd.h) first.
  bool filtered() const { return !narrow_centers_.empty(); }

  // Twice the bound on the round-off of every score Scan computes for a
  // point at squared distance sq from center `label`: its near-tie test.
  Scalar Slack(int label, Scalar sq) const { return slack_per_sq_ * sq + slack_of_[label]; }

 private:
  friend struct SimdKernels<Scalar>;
  // The constructor's work, at the level in use.
  void Init();
  // Init's making of the low-precision filter's centers.
  void InitNarrow();
  // The scores of every center by the blocked matrix product, their scan
  // and Finish: Scan's float32 path for the points the register kernel
  // does not take.
  void ScanProducts(const Eigen::Ref<const Matrix<Scalar>>& x, Scratch* scratch, int* labels,
                    Scalar* sq, double* gap) const;
  // The low-precision filter's pass over a block (filtered()): the points
  // whose bfloat16 scores put their best center ahead of every other by
  // more than the scores' error bound get their label, squared distance and
  // gap; the others are decided among the centers those scores leave in
  // doubt (FinishCandidates), or, with too many of them, listed in
  // scratch->open for ScanProducts.
  void FilterBlock(const Eigen::Ref<const Matrix<Scalar>>& x, Scratch* scratch, int* labels,
                   Scalar* sq, double* gap) const;
  // FilterBlock's first pass: each point less the shift in bfloat16
  // (scratch->narrow, a row of narrow_d_ values each), and per point the
  // bound E on its narrow scores' error, the spread that decides it, and
  // how far below its best a candidate may lie (scratch->narrow_bound: E,
  // margin and reach, `rows` of each).
  void NarrowPoints(const Eigen::Ref<const Matrix<Scalar>>& x, Scratch* scratch) const;
  // Finish for point xi from float32 scores of its candidates alone (in
  // increasing order, every center the float32 scan could take or weigh in
  // a near tie among them): the same rule, the same label and distance;
  // the gap among the candidates alone.
  // A near tie is listed for DecideTies (column i of the block) instead,
  // and the call returns true.
  bool FinishCandidates(const Scalar* xi, Eigen::Index i, const int* candidates, Eigen::Index count,
                        Scratch* scratch, int* label_out, Scalar* sq_out, double* gap) const;
  // Lists column r of the block, scanned label `label`, as a near tie with
  // its candidates: center_of(t) for each t < count whose score_of(t) is
  // not below `floor` (the best score less the slack), in increasing t.
  template <typename CenterOf, typename ScoreOf>
  static void ListTie(Eigen::Index r, int label, Eigen::Index count, CenterOf center_of,
                      ScoreOf score_of, Scalar floor, Scratch* scratch);
  // FinishAmong's rule for every listed near tie of the block x: the label
  // the first least of its candidates' direct distances, computed
  // kDirectChains at a time (their chains overlap: one point in seven is
  // near a tie at d = 1,536, k = 100, and decided one by one they took a
  // seventh of an assignment), its squared distance, its gap 0. Empties the
  // list.
  void DecideTies(const Eigen::Ref<const Matrix<Scalar>>& x, Scratch* scratch, int* labels,
                  Scalar* sq_out, double* gap) const;
  // Scan's last step, from the scores and their best, second best and
  // label per point: the labels, squared distances and gaps. Kept out of
  // Scan's body, where it would share the kernel's registers and spill them
  // (about 5% of an assignment of 4,096 x 32 with k = 16). Where `score`
  // holds the last tile of centers alone, a point near a tie is scored
  // again against every center, in scratch->row. The near ties are decided
  // after the other points, together (DecideTies).
  __attribute__((noinline)) void Finish(const Eigen::Ref<const Matrix<Scalar>>& x,
                                        const Matrix<Scalar>& score, const Scalar* best,
                                        const Scalar* second, const Scalar* arg, int* labels,
                                        Scalar* sq_out, double* gap, Scratch* scratch) const;
  // Finish's work for the `count` points of one packet from row `first`,
  // their coordinates in the kernel's lanes: the squared distances to their
  // centers and the near-tie test computed across the packet
  // (center_lanes_), near ties then decided one by one (FinishPoint).
  // With `norms` (and neither sq_out nor gap), the labels alone: the
  // near-tie test bounds each point's norm by its norms entry instead.
  __attribute__((noinline)) void FinishLanes(const Eigen::Ref<const Matrix<Scalar>>& x,
                                             Eigen::Index first, Eigen::Index count,
                                             const Scalar* lanes, const Matrix<Scalar>& score,
                                             const Scalar* best, const Scalar* second,
                                             const Scalar* arg, int* labels, Scalar* sq_out,
                                             double* gap, const Scalar* norms) const;
  // Finish for point i of the block (column xi): a near tie decided again
  // on direct distances, the label, squared distance and gap written.
  // Inlined into Finish's loop over the points (a call per point cost 8%
  // of an assignment at k = 64).
  __attribute__((always_inline)) inline void FinishPoint(const Scalar* xi,
                                                         const Matrix<Scalar>& score,
                                                         Eigen::Index i, Scalar best, Scalar second,
                                                         int label, Scalar sq, int* label_out,
                                                         Scalar* sq_out, double* gap) const;
  // FinishPoint's rule among `count` centers, the t-th center_of(t) with
  // score score_of(t) (FinishPoint: every center; FinishCandidates: the
  // candidates).
  // The gap FinishAmong reports for a point that is not near a tie.
  static double GapOf(Scalar best, Scalar second, Scalar slack);
  template <typename CenterOf, typename ScoreOf>
  __attribute__((always_inline)) inline void FinishAmong(const Scalar* xi, Eigen::Index count,
                                                         CenterOf center_of, ScoreOf score_of,
                                                         Scalar best, Scalar second, int label,
                                                         Scalar sq, int* label_out, Scalar* sq_out,
                                                         double* gap) const;

  const Matrix<Scalar>& centers_;
  Eigen::Index block_ = 0, span_ = 0;
  Eigen::Matrix<Scalar, 1, Eigen::Dynamic> offset_;  // -||c_j||^2 / 2
  // For few centers, the register kernel's copy of them: coordinate l of
  // center j at transposed_(j, l), the centers padded to whole groups with
  // zero coordinates and an offset of -infinity (padded_offset_). Empty
  // where the blocked matrix product computes the scores.
  Matrix<Scalar> transposed_;
  Vector<Scalar> padded_offset_;
  // Where k fits one or two packets (lane_tables_) and the level permutes
  // a packet's lanes: the centers coordinate-major, coordinate l of center j
  // at center_lanes_[l * lane_tables_ * packet + j], and slack_of_ padded to
  // lane_tables_ packets; empty otherwise (FinishLanes is then not used).
  Vector<Scalar> center_lanes_, slack_lanes_;
  int lane_tables_ = 0;
  Scalar slack_per_sq_;
  Vector<Scalar> slack_of_;
  // The near-tie test from a bound b on the point's squared norm:
  // slack_per_norm_ * b + slack_base_ (whatever the label).
  Scalar slack_per_norm_, slack_base_;
  // The low-precision filter's centers, where it is used (FilterBlock):
  // less narrow_shift_ (the centers' mean: scores shifted by one value per
  // point keep their order and gaps, and centered values round to bfloat16
  // with errors relative to their smaller norms), in bfloat16, in groups of
  // 32 centers by 32 coordinates (both padded with zeros), each group's
  // coordinates in pairs as the tiles take them; empty where Scan does not
  // filter. narrow_offset_ holds their offsets, padded with -infinity; the
  // norms bound, over the centers, the shifted centers' norms |c'|, the
  // norms of their bfloat16 forms |c~| and of their rounding errors
  // |c' - c~|; narrow_shift_norm_ is the shift's norm and narrow_slack_of_
  // the most of slack_of_.
  std::vector<uint16_t> narrow_centers_;
  LowPrecisionFilter narrow_filter_ = LowPrecisionFilter::kNone;  // its products' kind
  std::vector<float> narrow_offset_, narrow_shift_;
  Eigen::Index narrow_k_ = 0, narrow_d_ = 0;
  double narrow_center_norm_ = 0, narrow_rounded_norm_ = 0, narrow_residual_norm_ = 0,
         narrow_shift_norm_ = 0, narrow_slack_of_ = 0;
};

// Points per matrix-product block (Scan's most), a multiple of
// kAssignmentBlockMultiple (64: four AVX-512 packets of floats): the block's
// products (points x k) stay within about 256 KiB so they are scanned while
// still in the core's cache. The blocks, and so the parts the sums are added
// in, are the same at every SIMD level.
inline constexpr Eigen::Index kAssignmentBlockMultiple = 64;
template <typename Scalar>
Eigen::Index AssignmentBlockSize(Eigen::Index k) {
  const Eigen::Index budget = (256 * 1024) / static_cast<Eigen::Index>(sizeof(Scalar));
  return std::clamp<Eigen::Index>(budget / std::max<Eigen::Index>(k, 1), 64, 4096) &
         ~(kAssignmentBlockMultiple - 1);
}

// The parts AssignNearest adds its objective and sums in: part p holds the
// points [p * size, (p + 1) * size), a whole number of Scan blocks. There
// are at most 64 parts, fewer where their cluster sums would take more than
// 64 MiB; each is run by one thread with its own objective and sums, merged
// in part order. The split depends only on n, d and k, so neither does the
// thread count.
template <typename Scalar>
Eigen::Index AssignmentPartSize(Eigen::Index n, Eigen::Index d, Eigen::Index k) {
  constexpr Eigen::Index kMaxParts = 64;
  constexpr double kPartSumsBytes = 64.0 * 1024 * 1024;
  const Eigen::Index block = AssignmentBlockSize<Scalar>(k);
  const Eigen::Index blocks = std::max<Eigen::Index>((n + block - 1) / block, 1);
  const double by_memory = kPartSumsBytes / (sizeof(double) * static_cast<double>(d * k));
  const Eigen::Index parts = std::clamp<Eigen::Index>(
      std::min<Eigen::Index>(blocks, static_cast<Eigen::Index>(std::min(by_memory, 1e9))), 1,
      kMaxParts);
  return (blocks + parts - 1) / parts * block;
}

// The squared distance of a point to a center (d coordinates each) as every
// assignment reports it: one function on the columns' own memory, so that
// whichever pass computes it gets the same bits. Its order of additions is
// fixed, eight running sums (coordinate l in sum l mod 8) added pairwise at
// the end, which every SIMD level vectorizes as it is (no contraction into
// fused multiply-adds: -ffp-contract=off), so the distances and the
// objective are the same at every level too. (NearestCenterScan's
// FinishLanes makes the same operations in the same order across a packet
// of points, lane by lane.) On AVX-512 the eight sums are one vector
// written as such: GCC 12 vectorizes the plain loop there with permutes
// and scalar additions, 6x slower at d = 2^17 (a sparse point's kDense
// distance); below it the plain loop is the faster.
template <typename Scalar>
Scalar AssignedSquaredDistance(const Scalar* x, const Scalar* c, Eigen::Index d) {
  constexpr int kSums = 8;
  Scalar sum[kSums] = {};
  Eigen::Index l = 0;
#if defined(__AVX512F__)
  typedef Scalar Sums __attribute__((vector_size(kSums * sizeof(Scalar))));
  Sums sums = {};
  for (; l + kSums <= d; l += kSums) {
    Sums a, b;
    std::memcpy(&a, x + l, sizeof a);
    std::memcpy(&b, c + l, sizeof b);
    const Sums diff = a - b;
    sums += diff * diff;
  }
  std::memcpy(sum, &sums, sizeof sum);
#else
  for (; l + kSums <= d; l += kSums) {
    for (int j = 0; j < kSums; ++j) {
      const Scalar diff = x[l + j] - c[l + j];
      sum[j] += diff * diff;
    }
  }
#endif
  for (int j = 0; l < d; ++l, ++j) {
    const Scalar diff = x[l] - c[l];
    sum[j] += diff * diff;
  }
  return ((sum[0] + sum[4]) + (sum[2] + sum[6])) + ((sum[1] + sum[5]) + (sum[3] + sum[7]));
}

// AssignedSquaredDistance of up to four pairs at once, x[p] to c[p] for p <
// count: each pair's operations and order are AssignedSquaredDistance's,
// so are its bits (its eight running sums are the lanes of one vector), and
// the pairs' additions, each pair's a chain of dependent ones, overlap.
template <typename Scalar>
void AssignedSquaredDistances(const Scalar* const* x, const Scalar* const* c, int count,
                              Eigen::Index d, Scalar* out) {
  constexpr int kSums = 8, kPairs = 4;
  typedef Scalar Sums __attribute__((vector_size(kSums * sizeof(Scalar))));
  const Scalar* xs[kPairs];
  const Scalar* cs[kPairs];
  for (int p = 0; p < kPairs; ++p) {
    xs[p] = x[p < count ? p : 0];  // a missing pair repeats the first
    cs[p] = c[p < count ? p : 0];
  }
  Sums sum[kPairs] = {};
  Eigen::Index l = 0;
  for (; l + kSums <= d; l += kSums) {
    for (int p = 0; p < kPairs; ++p) {
      Sums a, b;
      std::memcpy(&a, xs[p] + l, sizeof a);
      std::memcpy(&b, cs[p] + l, sizeof b);
      const Sums diff = a - b;
      sum[p] += diff * diff;
    }
  }
  for (int j = 0; l < d; ++l, ++j) {
    for (int p = 0; p < kPairs; ++p) {
      const Scalar diff = xs[p][l] - cs[p][l];
      sum[p][j] += diff * diff;
    }
  }
  for (int p = 0; p < count; ++p) {
    const Sums& s = sum[p];
    out[p] = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
  }
}

// AssignedSquaredDistance of `count` pairs, the point x(p) to the center
// c(p) for p < count, four at a time (AssignedSquaredDistances: the same
// bits as one at a time, the pairs' chains of additions overlapping);
// take(p, sq) receives each.
template <typename Scalar, typename X, typename C, typename Take>
void EachAssignedSquaredDistance(Eigen::Index count, Eigen::Index d, X x, C c, Take take) {
  constexpr int kPairs = 4;
  for (Eigen::Index first = 0; first < count; first += kPairs) {
    const int pairs = static_cast<int>(std::min<Eigen::Index>(kPairs, count - first));
    const Scalar* xs[kPairs];
    const Scalar* cs[kPairs];
    Scalar sq[kPairs];
    for (int p = 0; p < pairs; ++p) {
      xs[p] = x(first + p);
      cs[p] = c(first + p);
    }
    AssignedSquaredDistances(xs, cs, pairs, d, sq);
    for (int p = 0; p < pairs; ++p) take(first + p, sq[p]);
  }
}

// Adds point x, of weight w (null: 1), to the sums of its center `label`
// in a part: AddAssigned's second half, out of line so that the objective's
// addition inlines into the assignments' loops.
template <typename Scalar, typename Column>
__attribute__((noinline)) void AddToSums(const Column& x, int label, const Scalar* w,
                                         ClusterSums* part) {
  if (w == nullptr) {
    part->sums.col(label) += x.template cast<double>();
    ++part->counts[label];
    part->weights[label] += 1;
  } else {
    const double weight = *w;
    part->sums.col(label) += weight * x.template cast<double>();
    ++part->counts[label];
    part->weights[label] += weight;
  }
}

// The objective with a point of squared distance sq and weight w (null: 1)
// added: AddAssigned's first half.
template <typename Scalar>
inline double WithObjective(double objective, Scalar sq, const Scalar* w) {
  return w == nullptr ? objective + sq : objective + static_cast<double>(*w) * sq;
}

// Adds point x, of squared distance sq to its center `label` and weight w
// (null: 1), to a part's objective and, if given, sums: the additions every
// assignment makes alike to the last bit (AssignNearest makes them a block
// at a time, WithObjective's and, for a cluster at a time, AddToSums's in
// the same order per cluster).
template <typename Scalar, typename Column>
inline void AddAssigned(const Column& x, int label, Scalar sq, const Scalar* w, double* objective,
                        ClusterSums* part) {
  *objective = WithObjective(*objective, sq, w);
  if (part != nullptr) AddToSums(x, label, w, part);
}

}  // namespace kmt

#endif  // KMT_CORE_ASSIGN_H_
