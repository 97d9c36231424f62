#include "core/bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/assign.h"
#include "core/distances.h"
#include "core/prefetch.h"

namespace kmt {
namespace {

// Directed rounding by hand: a positive double that came out of one rounded
// operation, moved so that it lies below (above) the operation's exact
// result. One rounding is off by at most eps / 2 of the result.
constexpr double kEps = std::numeric_limits<double>::epsilon();
double Below(double x) { return x * (1 - 2 * kEps); }
double Above(double x) { return x * (1 + 2 * kEps); }
// a + b (of any signs) moved above the exact sum.
double SumAbove(double a, double b) {
  const double sum = a + b;
  return sum + std::abs(sum) * 2 * kEps + std::numeric_limits<double>::denorm_min();
}

// The margin. A squared distance of d coordinates computed in Scalar (d
// differences, d squares, d - 1 additions of non-negative terms, in any
// order, fused or not) lies within gamma_{d+2} = (d + 2) u / (1 - (d + 2) u)
// of the exact value, u = eps / 2 the unit round-off, plus an absolute
// (d + 2) times the smallest normal number for results that underflow.
// kMargin takes rho = (d + 2) eps, twice that, and mu for the absolute part.
// It is meaningful while rho is small (the factors below assume rho <= 1e-3:
// d up to about 16,000 in float).
template <typename Scalar>
struct Margin {
  double rho, mu;
  explicit Margin(Eigen::Index d)
      : rho(static_cast<double>(d + 2) * std::numeric_limits<Scalar>::epsilon()),
        mu(static_cast<double>(d + 2) * std::numeric_limits<Scalar>::min()) {}
  bool usable() const { return rho <= 1e-3; }
  // Bounds on the exact squared distance from the computed one, sq.
  double UpperSq(double sq) const { return Above(Above(sq + mu) * (1 + 2 * rho)); }
  double LowerSq(double sq) const { return std::max(0.0, Below(Below(sq - mu) * (1 - 2 * rho))); }
  // A bound on the computed squared distance from an upper bound e on the
  // exact distance.
  double ComputedAbove(double e) const { return Above(Above(Above(e * e) * (1 + rho)) + mu); }
  // What every other center's exact squared distance must exceed for the
  // assignment to keep the label whose computed squared distance is sq.
  // The assignment keeps it if the direct distances order it first (on a
  // near tie it decides on them; otherwise its choice is the exact nearest
  // center): with D the direct, e the exact squared distances,
  // D_j >= e_j (1 - rho) - mu and D_a <= e_a (1 + rho) + mu, and
  // e_a <= (sq + mu) / (1 - rho), so e_j > sq (1 + rho) / (1 - rho)^2 +
  // 4 mu suffices, which sq (1 + 4 rho) + 4 mu exceeds for rho <= 1e-3; the
  // 5 leaves room for the double operations.
  double Threshold(double sq) const { return Above(Above(sq * (1 + 5 * rho)) + 5 * mu); }
};

// An upper bound on the exact distance between two columns (d values
// each) of double-converted Scalars, summed in double.
template <typename Scalar>
double DistanceAbove(const Scalar* a, const Scalar* b, Eigen::Index d) {
  double sum = 0;
  for (Eigen::Index l = 0; l < d; ++l) {
    const double diff = static_cast<double>(a[l]) - static_cast<double>(b[l]);
    sum += diff * diff;
  }
  const double rho = static_cast<double>(d + 2) * kEps;
  const double mu = static_cast<double>(d + 2) * std::numeric_limits<double>::min();
  return Above(std::sqrt(Above(Above(sum * (1 + rho)) + mu)));
}

// A Scalar at most x (x >= 0, or +inf), how a bound is stored: x moved
// down by twice the Scalar's round-off before the rounding to nearest, and
// a finite x to at most the largest finite Scalar. (Below the smallest
// normal Scalar the rounding can land above x by a subnormal step; no such
// bound passes a test, whose threshold exceeds 5 mu.)
template <typename Scalar>
Scalar StoreBelow(double x) {
  constexpr double kDown = 1 - 2 * static_cast<double>(std::numeric_limits<Scalar>::epsilon());
  if (x == std::numeric_limits<double>::infinity()) return std::numeric_limits<Scalar>::infinity();
  return static_cast<Scalar>(
      std::min(x * kDown, static_cast<double>(std::numeric_limits<Scalar>::max())));
}

// A stored bound, less the drift of its group since it was stored.
template <typename Scalar>
double Drifted(Scalar stored, double drift) {
  return std::max(0.0, Below(static_cast<double>(stored) - drift));
}
// A bound as stored: plus its group's drift now.
template <typename Scalar>
Scalar Stored(double lower, double drift) {
  return StoreBelow<Scalar>(Below(lower + drift));
}

// Centers a group holds, about (Yinyang's k / 10), and at most so many
// groups (or bytes of bounds): more groups keep more points settled while a
// few centers travel, and cost each point a bound to read.
constexpr int kGroupSize = 10;
constexpr int kMaxGroups = 32;
constexpr double kBoundBytes = 256.0 * 1024 * 1024;

// The group filter takes a point whose open groups hold at most this share
// of the centers: their direct distances cost more per center than the
// product's.
constexpr int kDirectShare = 4;

// The share of the points left to the scan by the last call below which the
// scanned points get a bound per group (see AssignBounded). Blobs at
// n = 10^6, d = 32, k = 64 hover at 15-16% open with one bound a point
// (calls 5 to 16) and drop to 1-4% with the groups; uniform points reach 20%
// only in their last 30 of 300 calls (docs/notes/2026-12-tight-switch.md).
constexpr double kTightOpenShare = 0.2;

// Per center, a lower bound on half its exact distance to the nearest other
// center (Hamerly's s; +inf for k = 1). In double through one product, the
// centers first moved to their mean so that the product's round-off (bounded
// by SquaredDistanceRoundOff) is small against their distances. The move
// rounds each coordinate by at most eps / 2 of it, which changes a distance
// by at most eps (|z_a| + |z_b|) <= 2 eps max |z|.
template <typename Scalar>
std::vector<double> HalfSeparations(const Matrix<Scalar>& centers) {
  const Eigen::Index d = centers.rows(), k = centers.cols();
  std::vector<double> half(k, std::numeric_limits<double>::infinity());
  if (k < 2) return half;
  Matrix<double> z = centers.template cast<double>();
  const Vector<double> mean = z.rowwise().mean();
  z.colwise() -= mean;
  const Vector<double> norms = SquaredNorms<double>(z);
  const double norm_max = norms.maxCoeff();
  const double moved = Above(2 * kEps * Above(std::sqrt(norm_max)));
  Matrix<double> cross(k, k);
  cross.noalias() = z.transpose() * z;
  for (Eigen::Index a = 0; a < k; ++a) {
    double nearest = std::numeric_limits<double>::infinity();
    for (Eigen::Index b = 0; b < k; ++b) {
      if (b == a) continue;
      nearest = std::min(nearest, norms[a] + norms[b] - 2 * cross(b, a));
    }
    const double round_off = Above(SquaredDistanceRoundOff<double>(d, norms[a], norm_max));
    const double sq = std::max(0.0, Below(nearest - round_off));
    half[a] = std::max(0.0, Below(0.5 * Below(Below(std::sqrt(sq)) - moved)));
  }
  return half;
}

// Hamerly's separation test: with u the distance to the label's center and
// s that center's half separation, every other center lies at least 2 s - u
// away, which settles the point when its square exceeds the threshold
// (Margin::Threshold), u taken above the computed squared distance sq.
template <typename Scalar>
bool SeparationSettles(const Margin<Scalar>& margin, Scalar sq, double half) {
  const double own = Above(std::sqrt(margin.UpperSq(sq)));
  const double lower = Below(2 * half - own);
  return lower > 0 && Below(lower * lower) > margin.Threshold(sq);
}

// Per center, the largest sq for which SeparationSettles holds (-1 where
// none does). Every operation of the test is monotone in sq (rounding to
// nearest keeps order), so it holds exactly for the sq up to this limit,
// which a bisection over the non-negative Scalars' bit patterns (ordered as
// their values) finds once a call: a point then compares its sq alone, with
// no square root.
template <typename Scalar>
std::vector<Scalar> SeparationLimits(const Margin<Scalar>& margin,
                                     const std::vector<double>& half) {
  using Bits = std::conditional_t<sizeof(Scalar) == sizeof(uint32_t), uint32_t, uint64_t>;
  static_assert(sizeof(Bits) == sizeof(Scalar));
  const auto value = [](Bits bits) {
    Scalar v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  const Scalar largest = std::numeric_limits<Scalar>::max();
  Bits top;
  std::memcpy(&top, &largest, sizeof top);
  std::vector<Scalar> limit(half.size(), -1);
  for (size_t a = 0; a < half.size(); ++a) {
    if (!SeparationSettles(margin, Scalar(0), half[a])) continue;
    if (SeparationSettles(margin, largest, half[a])) {
      limit[a] = largest;
      continue;
    }
    Bits pass = 0, fail = top;
    while (fail - pass > 1) {
      const Bits mid = pass + (fail - pass) / 2;
      (SeparationSettles(margin, value(mid), half[a]) ? pass : fail) = mid;
    }
    limit[a] = value(pass);
  }
  return limit;
}

// Whether a lower bound on the distance to some centers, other than the
// label's of computed squared distance sq, proves none of them is chosen:
// its square exceeds the threshold.
bool Excludes(double lower, double threshold) { return Below(lower * lower) > threshold; }

// The lower bound a scan leaves: every other center farther by `gap` in
// squared distance than the label's, of computed squared distance sq.
template <typename Scalar>
double LowerFromScan(const Margin<Scalar>& margin, Scalar sq, double gap) {
  return Below(std::sqrt(Below(margin.LowerSq(sq) + gap)));
}

// An upper bound on the distance to the label's center, of computed squared
// distance sq, as stored: less the center's summed moves so far (`moved`),
// which give it again at a later call.
template <typename Scalar>
double StoredUpper(const Margin<Scalar>& margin, Scalar sq, double moved) {
  return SumAbove(Above(std::sqrt(margin.UpperSq(sq))), -moved);
}

// The global filter on a chunk of points, each with its label, the least
// lower bound on its distances to the other centers (`lower`) and its
// computed squared distance `sq` (or, without it, an upper bound on it):
// Hamerly's separation (sq within its center's limit), else the bound. Into
// `settled`, one flag a point, or'ed with what is there. No branch a point,
// and every array restrict, so that the loop is vectorized.
template <typename Scalar, typename Sq>
void GlobalFilter(const Margin<Scalar>& margin, Eigen::Index rows, const int* __restrict label,
                  const Sq* __restrict sq, const Scalar* __restrict separation,
                  const double* __restrict lower, char* __restrict settled) {
  const Margin<Scalar> m = margin;
  for (Eigen::Index r = 0; r < rows; ++r) {
    const double s = static_cast<double>(sq[r]);
    settled[r] |= static_cast<char>((s <= static_cast<double>(separation[label[r]])) |
                                    Excludes(lower[r], m.Threshold(s)));
  }
}

// Per point of a chunk, an upper bound on its computed squared distance to
// its label's center, from its stored upper bound on the distance and the
// center's moves since (Margin::ComputedAbove).
template <typename Scalar>
void ComputedAboveOf(const Margin<Scalar>& margin, Eigen::Index rows, const int* __restrict label,
                     const double* __restrict upper, const double* __restrict moved,
                     double* __restrict above) {
  const Margin<Scalar> m = margin;
  for (Eigen::Index r = 0; r < rows; ++r) {
    above[r] = m.ComputedAbove(SumAbove(upper[r], moved[label[r]]));
  }
}

// The rows of a chunk whose flag (0 or 1) is 0, listed in order without a
// branch a row (whether a row is listed would be a guess per row for the
// branch predictor); returns how many. Eight set flags in a row are passed
// over in one test: late in a run nearly every point is settled.
Eigen::Index ListUnset(const char* __restrict flag, Eigen::Index rows, int* __restrict list) {
  constexpr uint64_t kAllSet = 0x0101010101010101;
  Eigen::Index count = 0, r = 0;
  for (; r + 8 <= rows; r += 8) {
    uint64_t word;
    std::memcpy(&word, flag + r, sizeof word);
    if (word == kAllSet) continue;
    for (Eigen::Index b = r; b < r + 8; ++b) {
      list[count] = static_cast<int>(b);
      count += !flag[b];
    }
  }
  for (; r < rows; ++r) {
    list[count] = static_cast<int>(r);
    count += !flag[r];
  }
  return count;
}

// How many rows of a chunk have their flag (0 or 1) set.
int64_t CountSet(const char* __restrict flag, Eigen::Index rows) {
  int64_t count = 0;
  for (Eigen::Index r = 0; r < rows; ++r) count += flag[r];
  return count;
}

// The share of the points the last call settled from which a call without
// the objective keeps the upper bounds: below it, the points it would spare
// reading are too few to pay for renewing the bounds of the others (on
// uniform data, where a call settles 60 to 85% of the points, keeping them
// cost more than it saved).
constexpr double kLazySettled = 0.9;

// Points whose coordinates take at most this many bytes are handled as one
// chunk: tested, the open ones scanned, then all added, while they are in
// the core's cache.
constexpr double kChunkBytes = 512.0 * 1024;

// The bounds are used when they settled at least this fraction of the points
// the last time (measured or, after a call through the products, estimated):
// a settled point saves its k distances, an open one costs a copy of its
// coordinates and a scan in a smaller product than the full one. Few
// centers make the products cheap, so they need more.
double MinSettled(Eigen::Index k) { return std::clamp(8.0 / static_cast<double>(k), 0.1, 0.5); }

// What each part of the points adds up, kept apart and merged in part
// order as AssignNearest merges its own.
struct PartTotals {
  std::vector<double> objective;
  std::vector<int64_t> settled, grouped, unread, changed;
  std::vector<ClusterSums> sums;  // empty when no sums are asked for

  PartTotals(Eigen::Index parts, Eigen::Index d, Eigen::Index k, bool with_sums)
      : objective(parts, 0),
        settled(parts, 0),
        grouped(parts, 0),
        unread(parts, 0),
        changed(parts, 0) {
    if (with_sums) sums.assign(parts, ClusterSums(static_cast<int>(d), static_cast<int>(k)));
  }
  ClusterSums* Sums(Eigen::Index p) { return sums.empty() ? nullptr : &sums[p]; }
  // Adds the parts' counts to stats and their sums to `into`; returns the
  // objective.
  double Merge(ClusterSums* into, AssignmentStats* stats) const {
    double total = 0;
    for (size_t p = 0; p < objective.size(); ++p) {
      total += objective[p];
      stats->settled += settled[p];
      stats->grouped += grouped[p];
      stats->unread += unread[p];
      stats->changed += changed[p];
      if (into != nullptr) into->Add(sums[p]);
    }
    return total;
  }
};

}  // namespace

template <typename Scalar>
bool BoundedAssignment<Scalar>::Usable() const {
  return Margin<Scalar>(points_.rows()).usable();
}

template <typename Scalar>
bool BoundedAssignment<Scalar>::UseBounds() const {
  if (!Usable() || path_ == AssignmentPath::kProducts || centers_.size() == 0) return false;
  // Right after the first call nothing is measured yet: the bounds are
  // tried, at the cost of a copy of the points they leave open.
  if (path_ == AssignmentPath::kBounds || stats_.size() == 1) return true;
  const double n = static_cast<double>(points_.cols());
  return static_cast<double>(stats_.back().settled) >= MinSettled(centers_.cols()) * n;
}

template <typename Scalar>
double BoundedAssignment<Scalar>::Assign(const Matrix<Scalar>& centers, Labels* labels,
                                         ClusterSums* sums, bool objective) {
  const Eigen::Index n = points_.cols();
  const int k = static_cast<int>(centers.cols());
  AssignmentStats stats;
  double total;
  // Other centers than the last call's start the bounds again.
  if (centers.rows() != centers_.rows() || centers.cols() != centers_.cols()) centers_.resize(0, 0);
  // The exact sums, made once for each k (null where the points do not fit).
  const bool exact = exact_wanted_ && sums != nullptr && n > 0 && k > 0;
  if (exact && exact_k_ != k) {
    exact_ = ExactClusterSums<Scalar>::Make(points_, weights_, k);
    exact_k_ = k;
    exact_current_ = false;
  }
  Moves moves;
  Moves* record = exact && exact_ != nullptr && exact_current_ ? &moves : nullptr;
  ClusterSums* added = exact && exact_ != nullptr ? nullptr : sums;
  // Without the objective, and where no double sums need every point, the
  // upper bounds may spare reading the points.
  const bool lazy =
      !objective && path_ != AssignmentPath::kProducts && Usable() && added == nullptr && n > 0 &&
      k > 0 && !stats_.empty() &&
      static_cast<double>(stats_.back().settled) >= kLazySettled * static_cast<double>(n);
  const bool first_call = static_cast<Eigen::Index>(labels_.size()) != n;
  if (n == 0 || centers.cols() == 0) {
    total = AssignNearest(points_, centers, &labels_, nullptr, sums, weights_);
    centers_.resize(0, 0);
  } else if (UseBounds()) {
    total = AssignBounded(centers, added, &stats, record, lazy);
  } else {
    total = AssignAll(centers, added, &stats, record, lazy);
  }
  if (first_call) stats.changed = n;
  // The upper bounds follow the labels only through calls that keep them.
  upper_current_ = lazy;
  if (exact && exact_ != nullptr) {
    UpdateExact(moves, record != nullptr, &stats);
    exact_->AddTo(sums);
  } else {
    exact_current_ = false;
  }
  stats_.push_back(stats);
  if (path_ != AssignmentPath::kProducts && n > 0 && centers.cols() > 0) centers_ = centers;
  if (labels != nullptr) *labels = labels_;
  return objective ? total : std::numeric_limits<double>::quiet_NaN();
}

template <typename Scalar>
void BoundedAssignment<Scalar>::UpdateExact(const Moves& moves, bool from_moves,
                                            AssignmentStats* stats) {
  std::vector<typename ExactClusterSums<Scalar>::Move> all;
  bool listed = from_moves;
  stats->moved = 0;
  for (size_t p = 0; p < moves.parts.size(); ++p) {
    all.insert(all.end(), moves.parts[p].begin(), moves.parts[p].end());
    stats->moved += moves.counts[p];
    listed &= moves.counts[p] == static_cast<int64_t>(moves.parts[p].size());
  }
  stats->sums_from_moves = listed;
  if (stats->sums_from_moves) {
    exact_->Apply(all);
  } else {
    exact_->Recompute(labels_);
  }
  exact_current_ = true;
}

// Yinyang's grouping: a few Lloyd's iterations on the centers themselves,
// from evenly spaced ones, in double; groups left empty are dropped. The
// groups stay for the run: any split keeps the bounds exact, a good one
// keeps more of them tight.
template <typename Scalar>
void BoundedAssignment<Scalar>::Group(const Matrix<Scalar>& centers) {
  const Eigen::Index d = centers.rows(), k = centers.cols(), n = points_.cols();
  const double by_memory = kBoundBytes / (static_cast<double>(sizeof(Scalar)) *
                                          static_cast<double>(std::max<Eigen::Index>(n, 1)));
  const int wanted = static_cast<int>(
      std::clamp<double>(std::min(static_cast<double>(k / kGroupSize), by_memory), 1, kMaxGroups));
  const Matrix<double> c = centers.template cast<double>();
  Matrix<double> seeds(d, wanted);
  for (int g = 0; g < wanted; ++g) seeds.col(g) = c.col(g * k / wanted);
  std::vector<int> of(k, 0);
  for (int iteration = 0; iteration < 5; ++iteration) {
    for (Eigen::Index j = 0; j < k; ++j) {
      (seeds.colwise() - c.col(j)).colwise().squaredNorm().minCoeff(&of[j]);
    }
    Matrix<double> sum = Matrix<double>::Zero(d, wanted);
    std::vector<int> count(wanted, 0);
    for (Eigen::Index j = 0; j < k; ++j) {
      sum.col(of[j]) += c.col(j);
      ++count[of[j]];
    }
    for (int g = 0; g < wanted; ++g) {
      if (count[g] > 0) seeds.col(g) = sum.col(g) / count[g];
    }
  }
  std::vector<int> renumber(wanted, -1);
  groups_ = 0;
  for (Eigen::Index j = 0; j < k; ++j) {
    if (renumber[of[j]] < 0) renumber[of[j]] = groups_++;
  }
  group_of_.resize(k);
  group_start_.assign(groups_ + 1, 0);
  for (Eigen::Index j = 0; j < k; ++j) {
    group_of_[j] = renumber[of[j]];
    ++group_start_[group_of_[j] + 1];
  }
  for (int g = 0; g < groups_; ++g) group_start_[g + 1] += group_start_[g];
  members_.resize(k);
  std::vector<int> next(group_start_.begin(), group_start_.end() - 1);
  for (Eigen::Index j = 0; j < k; ++j) members_[next[group_of_[j]]++] = static_cast<int>(j);
  drift_.assign(groups_, 0);
  drift_all_ = 0;
  moved_.assign(k, 0);
  upper_current_ = false;
  tight_ = false;
  single_.resize(n);
}

template <typename Scalar>
void BoundedAssignment<Scalar>::Drift(const Matrix<Scalar>& centers) {
  std::vector<double> largest(groups_, 0);
  for (Eigen::Index j = 0; j < centers.cols(); ++j) {
    const double move =
        DistanceAbove(centers_.col(j).data(), centers.col(j).data(), centers.rows());
    largest[group_of_[j]] = std::max(largest[group_of_[j]], move);
    moved_[j] = SumAbove(moved_[j], move);
  }
  for (int g = 0; g < groups_; ++g) drift_[g] = Above(drift_[g] + largest[g]);
  drift_all_ = Above(drift_all_ + *std::max_element(largest.begin(), largest.end()));
}

template <typename Scalar>
void BoundedAssignment<Scalar>::SetTight(bool tight) {
  if (tight == tight_) return;
  const Eigen::Index n = points_.cols();
  const int groups = groups_;
  if (tight) bound_.resize(static_cast<size_t>(n) * groups);
#pragma omp parallel for schedule(static) if (n * groups > (1 << 16))
  for (Eigen::Index i = 0; i < n; ++i) {
    Scalar* bound = &bound_[static_cast<size_t>(i) * groups];
    if (tight) {
      const double lower = Drifted(single_[i], drift_all_);
      for (int g = 0; g < groups; ++g) bound[g] = Stored<Scalar>(lower, drift_[g]);
    } else {
      double lower = std::numeric_limits<double>::infinity();
      for (int g = 0; g < groups; ++g) lower = std::min(lower, Drifted(bound[g], drift_[g]));
      single_[i] = Stored<Scalar>(lower, drift_all_);
    }
  }
  tight_ = tight;
}

// Every point through the scan, in AssignNearest's blocks; the bounds it
// leaves replace the old ones, which first say how many points they would
// have settled.
template <typename Scalar>
double BoundedAssignment<Scalar>::AssignAll(const Matrix<Scalar>& centers, ClusterSums* sums,
                                            AssignmentStats* stats, Moves* moves, bool lazy) {
  const Eigen::Index d = points_.rows(), n = points_.cols(), k = centers.cols();
  const Margin<Scalar> margin(d);
  const bool keep = path_ != AssignmentPath::kProducts;
  const bool again = centers_.size() > 0;
  const bool estimate = again && path_ == AssignmentPath::kAuto && margin.usable();
  if (keep && !again) Group(centers);
  if (keep && again) Drift(centers);
  std::vector<Scalar> separation;
  if (estimate) separation = SeparationLimits(margin, HalfSeparations(centers));
  labels_.resize(n);
  if (lazy) upper_.resize(n);
  const NearestCenterScan<Scalar> scan(centers);
  const Eigen::Index block = scan.block();
  const Eigen::Index part_size = AssignmentPartSize<Scalar>(n, d, k);
  const Eigen::Index parts = (n + part_size - 1) / part_size;
  const int groups = groups_;
  const bool tight = tight_;
  PartTotals totals(parts, d, k, sums != nullptr);
  if (moves != nullptr) moves->Reset(parts, part_size);

#pragma omp parallel if (n * k * d > (1 << 18))
  {
    typename NearestCenterScan<Scalar>::Scratch scratch;
    Vector<Scalar> sq(block);
    std::vector<int> label(block);
    std::vector<double> gap(block);
#pragma omp for schedule(dynamic)
    for (Eigen::Index p = 0; p < parts; ++p) {
      double objective = 0;
      int64_t settled = 0, changed = 0;
      ClusterSums* part = totals.Sums(p);
      for (Eigen::Index first = p * part_size; first < std::min(n, (p + 1) * part_size);
           first += block) {
        const Eigen::Index rows = std::min(block, n - first);
        scan.Scan(points_.middleCols(first, rows), &scratch, label.data(), sq.data(),
                  keep ? gap.data() : nullptr);
        for (Eigen::Index r = 0; r < rows; ++r) {
          const Eigen::Index i = first + r;
          Scalar* bound = keep && tight ? &bound_[static_cast<size_t>(i) * groups] : nullptr;
          if (estimate && label[r] == labels_[i]) {
            double lower = std::numeric_limits<double>::infinity();
            if (tight) {
              for (int g = 0; g < groups; ++g) {
                lower = std::min(lower, Drifted(bound[g], drift_[g]));
              }
            } else {
              lower = Drifted(single_[i], drift_all_);
            }
            if (sq[r] <= separation[label[r]] || Excludes(lower, margin.Threshold(sq[r]))) {
              ++settled;
            }
          }
          changed += label[r] != labels_[i];
          if (moves != nullptr && label[r] != labels_[i]) moves->Add(p, i, labels_[i], label[r]);
          labels_[i] = label[r];
          if (lazy) upper_[i] = StoredUpper(margin, sq[r], moved_[label[r]]);
          if (keep) {
            const double lower = LowerFromScan(margin, sq[r], gap[r]);
            if (tight) {
              for (int g = 0; g < groups; ++g) bound[g] = Stored<Scalar>(lower, drift_[g]);
            } else {
              single_[i] = Stored<Scalar>(lower, drift_all_);
            }
          }
          const Scalar* w = weights_ != nullptr ? &(*weights_)[i] : nullptr;
          AddAssigned(points_.col(i), label[r], sq[r], w, &objective, part);
        }
      }
      totals.objective[p] = objective;
      totals.settled[p] = settled;
      totals.changed[p] = changed;
    }
  }
  return totals.Merge(sums, stats);
}

// What AssignBounded's passes over a chunk share: the call's centers, its
// margin and separations, the scan, and its choices.
template <typename Scalar>
struct BoundedAssignment<Scalar>::Call {
  const Matrix<Scalar>& centers;
  const Margin<Scalar>& margin;
  const std::vector<Scalar>& separation;  // per center: Hamerly's test
  const NearestCenterScan<Scalar>& scan;
  bool unread_ok;  // a point the last calls' upper bound settles is not read
  Moves* moves;
};

// A thread's memory for the chunks it takes, and the counts of the part it
// is in.
template <typename Scalar>
struct BoundedAssignment<Scalar>::ChunkState {
  ChunkState(Eigen::Index d, Eigen::Index k, Eigen::Index chunk, Eigen::Index block, int groups)
      : sq(chunk),
        open_sq(block),
        lower(chunk),
        above(chunk),
        skip(chunk),
        settle(chunk),
        listed(chunk),
        open_listed(chunk),
        gathered(d, block),
        open_label(block),
        open_gap(block),
        drifted(groups),
        open_group(groups),
        distance(k),
        group_best(groups, block) {
    open.reserve(chunk);
  }

  typename NearestCenterScan<Scalar>::Scratch scratch;
  Vector<Scalar> sq;                 // per point of the chunk: to its center
  Vector<Scalar> open_sq;            // per scanned point of a block
  std::vector<double> lower, above;  // per point: the least lower bound, the upper
  // Per point of the chunk: settled without being read, settled.
  std::vector<char> skip, settle;
  // The chunk's points to read (the first n_read), and those the global
  // filter left open.
  std::vector<int> listed, open_listed;
  Eigen::Index n_read = 0;
  std::vector<Eigen::Index> open;  // the points for the scan
  Matrix<Scalar> gathered;         // d x block: a block of them
  std::vector<int> open_label;
  std::vector<double> open_gap;
  std::vector<double> drifted;   // per group, of one point
  std::vector<char> open_group;  // per group, of one point
  std::vector<Scalar> distance;  // per member, in members_' order
  // Per group and scanned point, the group's best score (row-major: a
  // group's row along the points).
  Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> group_best;

  // The part's.
  Eigen::Index part = 0;
  ClusterSums* sums = nullptr;
  double objective = 0;
  int64_t settled = 0, grouped = 0, unread = 0, changed = 0;
};

// Shape: rows points from `first` -> lower[r], each point's least lower
// bound on its distances to the centers but its own (its groups' bounds, or
// its one, less their drifts).
template <typename Scalar>
void BoundedAssignment<Scalar>::LowerBounds(Eigen::Index first, Eigen::Index rows,
                                            ChunkState* c) const {
  const double inf = std::numeric_limits<double>::infinity();
  const double drift_all = drift_all_;
  for (Eigen::Index r = 0; r < rows; ++r) {
    c->lower[r] = tight_ ? inf : Drifted(single_[first + r], drift_all);
  }
  if (!tight_) return;
  for (int g = 0; g < groups_; ++g) {
    const Scalar* stored = &bound_[static_cast<size_t>(first) * groups_ + g];
    const double drift = drift_[g];
    for (Eigen::Index r = 0; r < rows; ++r) {
      c->lower[r] = std::min(c->lower[r], Drifted(stored[r * groups_], drift));
    }
  }
}

// Shape: lower[r] -> skip[r] (settled by the upper bound alone, not read),
// listed (the others, n_read of them), sq[r] (their distance to their
// center, 0 for the unread), settle[r] (settled by Hamerly's separation or
// the bounds), open_listed (the rest); returns how many those are.
template <typename Scalar>
Eigen::Index BoundedAssignment<Scalar>::GlobalFilterPass(const Call& call, Eigen::Index first,
                                                         Eigen::Index rows, ChunkState* c) const {
  const Eigen::Index d = points_.rows();
  const int* label_of = &labels_[first];
  // Without the objective, the tests on the upper bound first: the computed
  // squared distance is at most `above`, and the tests are monotone in it,
  // so they pass on `above` only where they pass on the distance itself.
  std::fill(c->skip.begin(), c->skip.begin() + rows, 0);
  if (call.unread_ok) {
    ComputedAboveOf(call.margin, rows, label_of, &upper_[first], moved_.data(), c->above.data());
    GlobalFilter(call.margin, rows, label_of, c->above.data(), call.separation.data(),
                 c->lower.data(), c->skip.data());
  }
  c->n_read = ListUnset(c->skip.data(), rows, c->listed.data());
  c->sq.head(rows).setZero();
  EachAssignedSquaredDistance<Scalar>(
      c->n_read, d,
      [&](Eigen::Index m) {
        if (m + kReadAhead < c->n_read) {
          PrefetchValues(points_.col(first + c->listed[m + kReadAhead]).data(), points_.rows());
        }
        return points_.col(first + c->listed[m]).data();
      },
      [&](Eigen::Index m) { return call.centers.col(label_of[c->listed[m]]).data(); },
      [&](Eigen::Index m, Scalar sq) { c->sq[c->listed[m]] = sq; });
  // Hamerly's separation, then the bounds. Past the separation, a bound
  // excludes its centers exactly when its square exceeds the threshold.
  std::copy(c->skip.begin(), c->skip.begin() + rows, c->settle.begin());
  GlobalFilter(call.margin, rows, label_of, c->sq.data(), call.separation.data(), c->lower.data(),
               c->settle.data());
  c->settled += CountSet(c->settle.data(), rows);
  c->unread += CountSet(c->skip.data(), rows);
  return ListUnset(c->settle.data(), rows, c->open_listed.data());
}

// Shape: one open point i (row r of its chunk), its groups' bounds -> true
// with its label, distance (sq[r]) and bounds renewed where the direct
// distances to the centers of the groups its bounds leave open prove its
// nearest, as the bounds do; false (nothing changed) where they are too
// many or prove nothing: the scan decides it.
template <typename Scalar>
bool BoundedAssignment<Scalar>::GroupFilter(const Call& call, Eigen::Index i, Eigen::Index r,
                                            ChunkState* c) {
  const Eigen::Index d = points_.rows(), k = call.centers.cols();
  const int groups = groups_;
  const Margin<Scalar>& margin = call.margin;
  const int label = labels_[i];
  const Scalar* x = points_.col(i).data();
  const Scalar own_sq = c->sq[r];
  const double threshold = margin.Threshold(own_sq);
  Scalar* bound = &bound_[static_cast<size_t>(i) * groups];
  for (int g = 0; g < groups; ++g) c->drifted[g] = Drifted(bound[g], drift_[g]);
  int open_members = 0;
  for (int g = 0; g < groups; ++g) {
    c->open_group[g] = !Excludes(c->drifted[g], threshold);
    if (c->open_group[g]) open_members += group_start_[g + 1] - group_start_[g];
  }
  if (open_members * kDirectShare > k) return false;
  int best = label;
  Scalar best_sq = own_sq;
  for (int g = 0; g < groups; ++g) {
    if (!c->open_group[g]) continue;
    for (int m = group_start_[g]; m < group_start_[g + 1]; ++m) {
      const int j = members_[m];
      c->distance[m] =
          j == label ? own_sq : AssignedSquaredDistance(x, call.centers.col(j).data(), d);
      if (c->distance[m] < best_sq) {
        best = j;
        best_sq = c->distance[m];
      }
    }
  }
  const double best_threshold = margin.Threshold(best_sq);
  bool proved = best == label || margin.LowerSq(own_sq) > best_threshold;
  for (int g = 0; g < groups && proved; ++g) {
    if (!c->open_group[g]) continue;
    for (int m = group_start_[g]; m < group_start_[g + 1]; ++m) {
      if (members_[m] != best && !(margin.LowerSq(c->distance[m]) > best_threshold)) {
        proved = false;
        break;
      }
    }
  }
  if (!proved) return false;
  ++c->grouped;
  // The old label joins its group's others.
  const int old_group = group_of_[label];
  if (best != label && !c->open_group[old_group]) {
    const double old = Below(std::sqrt(margin.LowerSq(own_sq)));
    bound[old_group] = Stored<Scalar>(std::min(c->drifted[old_group], old), drift_[old_group]);
  }
  c->changed += best != label;
  if (call.moves != nullptr && best != label) call.moves->Add(c->part, i, label, best);
  labels_[i] = best;
  c->sq[r] = best_sq;
  for (int g = 0; g < groups; ++g) {
    if (!c->open_group[g]) continue;
    Scalar nearest = std::numeric_limits<Scalar>::infinity();
    for (int m = group_start_[g]; m < group_start_[g + 1]; ++m) {
      if (members_[m] != best) nearest = std::min(nearest, c->distance[m]);
    }
    bound[g] = Stored<Scalar>(Below(std::sqrt(margin.LowerSq(nearest))), drift_[g]);
  }
  return true;
}

// Shape: the open points (c->open, of the chunk from `first`), gathered a
// block at a time -> each one's label and distance (sq) from the scan, and
// its bounds: one from the scan's gap, or with the group filter one per
// group (GroupBoundsFromScores).
template <typename Scalar>
void BoundedAssignment<Scalar>::ScanOpen(const Call& call, Eigen::Index first, ChunkState* c) {
  const Eigen::Index d = points_.rows(), k = call.centers.cols(), block = call.scan.block();
  const std::vector<Eigen::Index>& open = c->open;
  for (size_t o = 0; o < open.size(); o += block) {
    const Eigen::Index m = std::min<Eigen::Index>(block, open.size() - o);
    for (Eigen::Index r = 0; r < m; ++r) c->gathered.col(r) = points_.col(open[o + r]);
    call.scan.Scan(c->gathered.leftCols(m), &c->scratch, c->open_label.data(), c->open_sq.data(),
                   c->open_gap.data());
    // Each group's best score, the label's included (a pass along the
    // centers' columns of scores), where the scan computed them all: the
    // low-precision filter's (core/simd.h) gives each point one bound for
    // every group instead, from its gap.
    if (tight_ && !call.scan.filtered()) {
      c->group_best.leftCols(m).setConstant(-std::numeric_limits<Scalar>::infinity());
      for (int j = 0; j < k; ++j) {
        const Scalar* score = c->scratch.score.col(j).data();
        Scalar* best = c->group_best.row(group_of_[j]).data();
        for (Eigen::Index r = 0; r < m; ++r) best[r] = std::max(best[r], score[r]);
      }
    }
    // Each one's distance to its center, on its gathered copy (the same
    // values, so the bits the products path gives on the point's own).
    EachAssignedSquaredDistance<Scalar>(
        m, d, [&](Eigen::Index r) { return c->gathered.col(r).data(); },
        [&](Eigen::Index r) { return call.centers.col(c->open_label[r]).data(); },
        [&](Eigen::Index r, Scalar sq) { c->sq[open[o + r] - first] = sq; });
    for (Eigen::Index r = 0; r < m; ++r) {
      const Eigen::Index i = open[o + r];
      const int label = c->open_label[r];
      c->changed += label != labels_[i];
      if (call.moves != nullptr && label != labels_[i]) {
        call.moves->Add(c->part, i, labels_[i], label);
      }
      labels_[i] = label;
      const double lower = LowerFromScan(call.margin, c->open_sq[r], c->open_gap[r]);
      if (!tight_) {
        single_[i] = Stored<Scalar>(lower, drift_all_);
      } else if (call.scan.filtered()) {
        Scalar* bound = &bound_[static_cast<size_t>(i) * groups_];
        for (int g = 0; g < groups_; ++g) bound[g] = Stored<Scalar>(lower, drift_[g]);
      } else {
        GroupBoundsFromScores(call, i, r, c);
      }
    }
  }
}

// Shape: scanned point i (row r of the scan's block), its scores of every
// center and its groups' best -> one bound per group. Every score lies
// within half the slack of its exact value, and scores are half the squared
// distances with their sign turned, so center j is farther than the label
// by at least 2 (S_label - S_j - slack). A group whose best score but the
// label's lies within twice the slack of the label's (a near-tie rival,
// which a bound from the products cannot exclude) takes the direct
// distances of such centers instead, whose round-off is relative to the
// distance, not to the points' norms.
template <typename Scalar>
void BoundedAssignment<Scalar>::GroupBoundsFromScores(const Call& call, Eigen::Index i,
                                                      Eigen::Index r, ChunkState* c) {
  const Eigen::Index d = points_.rows();
  const Margin<Scalar>& margin = call.margin;
  const auto& score = c->scratch.score;
  const int label = c->open_label[r];
  const Scalar* x = points_.col(i).data();
  Scalar* bound = &bound_[static_cast<size_t>(i) * groups_];
  const double slack = Above(static_cast<double>(call.scan.Slack(label, c->open_sq[r])));
  const double own_score = score(r, label);
  const double own_lower = margin.LowerSq(c->open_sq[r]);
  const int own_group = group_of_[label];
  for (int g = 0; g < groups_; ++g) {
    double best = c->group_best(g, r);
    if (g == own_group) {
      // The label's own score is not the group's other best.
      best = -std::numeric_limits<double>::infinity();
      for (int mm = group_start_[g]; mm < group_start_[g + 1]; ++mm) {
        if (members_[mm] != label)
          best = std::max(best, static_cast<double>(score(r, members_[mm])));
      }
    }
    const double spread = Below(own_score - best);
    double nearest;
    if (spread > 2 * slack) {
      nearest = Below(own_lower + 2 * Below(spread - slack));
    } else {
      nearest = std::numeric_limits<double>::infinity();
      for (int mm = group_start_[g]; mm < group_start_[g + 1]; ++mm) {
        const int j = members_[mm];
        if (j == label) continue;
        const double gap = Below(own_score - static_cast<double>(score(r, j)));
        nearest = std::min(nearest, gap > 2 * slack ? Below(own_lower + 2 * Below(gap - slack))
                                                    : margin.LowerSq(AssignedSquaredDistance(
                                                          x, call.centers.col(j).data(), d)));
      }
    }
    bound[g] = Stored<Scalar>(Below(std::sqrt(nearest)), drift_[g]);
  }
}

// The filters first, then the scan for the points they leave open, gathered
// into blocks; the objective and sums in AssignNearest's parts and order.
// Each chunk of a part goes through the passes above in turn.
template <typename Scalar>
double BoundedAssignment<Scalar>::AssignBounded(const Matrix<Scalar>& centers, ClusterSums* sums,
                                                AssignmentStats* stats, Moves* moves, bool lazy) {
  const Eigen::Index d = points_.rows(), n = points_.cols(), k = centers.cols();
  const Margin<Scalar> margin(d);
  Drift(centers);
  const std::vector<Scalar> separation = SeparationLimits(margin, HalfSeparations(centers));
  const NearestCenterScan<Scalar> scan(centers);
  const Eigen::Index block = scan.block();
  const Eigen::Index part_size = AssignmentPartSize<Scalar>(n, d, k);
  const Eigen::Index parts = (n + part_size - 1) / part_size;
  const Eigen::Index chunk = std::clamp<Eigen::Index>(
      static_cast<Eigen::Index>(kChunkBytes / static_cast<double>(d * sizeof(Scalar))), block,
      part_size);
  const int groups = groups_;
  // The group filter, and each group's own bound for the scanned points,
  // run while the last call scanned few points: they cost a pass over the
  // scanned points' scores and a bound per group, which pays where it keeps
  // those points settled later (separated clusters), not where many points
  // are scanned at every call anyway (uniform data). There every scanned
  // point takes the scan's one bound for all groups, and a point the global
  // filter leaves open goes to the scan. Forced bounds (kBounds) run both
  // always.
  const AssignmentStats& last = stats_.back();
  SetTight(groups > 1 && (path_ == AssignmentPath::kBounds ||
                          static_cast<double>(n - last.settled - last.grouped) <=
                              kTightOpenShare * static_cast<double>(n)));
  if (lazy) upper_.resize(n);
  const Call call{.centers = centers,
                  .margin = margin,
                  .separation = separation,
                  .scan = scan,
                  .unread_ok = lazy && upper_current_,
                  .moves = moves};
  PartTotals totals(parts, d, k, sums != nullptr);
  if (moves != nullptr) moves->Reset(parts, part_size);

#pragma omp parallel if (n * d > (1 << 16))
  {
    ChunkState c(d, k, chunk, block, groups);
#pragma omp for schedule(dynamic)
    for (Eigen::Index p = 0; p < parts; ++p) {
      c.part = p;
      c.sums = totals.Sums(p);
      c.objective = 0;
      c.settled = c.grouped = c.unread = c.changed = 0;
      const Eigen::Index end = std::min(n, (p + 1) * part_size);
      for (Eigen::Index first = p * part_size; first < end; first += chunk) {
        const Eigen::Index rows = std::min(chunk, end - first);
        LowerBounds(first, rows, &c);
        const Eigen::Index n_open = GlobalFilterPass(call, first, rows, &c);
        c.open.clear();
        for (Eigen::Index o = 0; o < n_open; ++o) {
          const int r = c.open_listed[o];
          if (!tight_ || !GroupFilter(call, first + r, r, &c)) c.open.push_back(first + r);
        }
        ScanOpen(call, first, &c);
        if (lazy) {
          // No objective: the points read renew their upper bound.
          for (Eigen::Index m = 0; m < c.n_read; ++m) {
            const Eigen::Index i = first + c.listed[m];
            upper_[i] = StoredUpper(margin, c.sq[c.listed[m]], moved_[labels_[i]]);
          }
        } else {
          for (Eigen::Index r = 0; r < rows; ++r) {
            const Eigen::Index i = first + r;
            const Scalar* w = weights_ != nullptr ? &(*weights_)[i] : nullptr;
            AddAssigned(points_.col(i), labels_[i], c.sq[r], w, &c.objective, c.sums);
          }
        }
      }
      totals.objective[p] = c.objective;
      totals.settled[p] = c.settled;
      totals.grouped[p] = c.grouped;
      totals.unread[p] = c.unread;
      totals.changed[p] = c.changed;
    }
  }
  stats->bounded = true;
  return totals.Merge(sums, stats);
}

template class BoundedAssignment<float>;
template class BoundedAssignment<double>;

}  // namespace kmt
