#include "core/bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/assign.h"
#include "core/distances.h"

namespace kmt {
namespace {

// Directed rounding by hand: a positive double that came out of one rounded
// operation, moved so that it lies below (above) the operation's exact
// result. One rounding is off by at most eps / 2 of the result.
constexpr double kEps = std::numeric_limits<double>::epsilon();
double Below(double x) { return x * (1 - 2 * kEps); }
double Above(double x) { return x * (1 + 2 * kEps); }

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

// How far the centers moved: per center an upper bound on its move, and the
// largest and second largest of them, so that each point subtracts the
// largest move among the centers that are not its own.
struct Moves {
  double first = 0, second = 0;  // largest, second largest
  Eigen::Index first_index = -1;
  double Other(int label) const { return label == first_index ? second : first; }
};

template <typename Scalar>
Moves CenterMoves(const Matrix<Scalar>& before, const Matrix<Scalar>& after) {
  Moves moves;
  for (Eigen::Index j = 0; j < after.cols(); ++j) {
    const double move = DistanceAbove(before.col(j).data(), after.col(j).data(), after.rows());
    if (move > moves.first) {
      moves.second = moves.first;
      moves.first = move;
      moves.first_index = j;
    } else if (move > moves.second) {
      moves.second = move;
    }
  }
  return moves;
}

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

// The bound test of one point whose computed squared distance to its label's
// center is sq: `lower` comes in as its drifted lower bound and leaves as
// the best one known (Hamerly's s test gives 2 s - u, u the distance to the
// own center); returns whether the label is proved.
template <typename Scalar>
bool Settles(const Margin<Scalar>& margin, Scalar sq, double half, double* lower) {
  const double threshold = margin.Threshold(sq);
  if (Below(*lower * *lower) > threshold) return true;
  const double own = Above(std::sqrt(margin.UpperSq(sq)));
  const double by_separation = Below(2 * half - own);
  if (by_separation > *lower) *lower = by_separation;
  return Below(*lower * *lower) > threshold;
}

// The lower bound a scan leaves: every other center farther by `gap` in
// squared distance than the label's, of computed squared distance sq.
template <typename Scalar>
double LowerFromScan(const Margin<Scalar>& margin, Scalar sq, double gap) {
  return Below(std::sqrt(Below(margin.LowerSq(sq) + gap)));
}

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
  std::vector<int64_t> settled;
  std::vector<ClusterSums> sums;  // empty when no sums are asked for

  PartTotals(Eigen::Index parts, Eigen::Index d, Eigen::Index k, bool with_sums)
      : objective(parts, 0), settled(parts, 0) {
    if (with_sums) sums.assign(parts, ClusterSums(static_cast<int>(d), static_cast<int>(k)));
  }
  ClusterSums* Sums(Eigen::Index p) { return sums.empty() ? nullptr : &sums[p]; }
  // Adds the parts' settled points to stats and their sums to `into`;
  // returns the objective.
  double Merge(ClusterSums* into, AssignmentStats* stats) const {
    double total = 0;
    for (size_t p = 0; p < objective.size(); ++p) {
      total += objective[p];
      stats->settled += settled[p];
      if (into != nullptr) into->Add(sums[p]);
    }
    return total;
  }
};

}  // namespace

bool BoundsMayPay(int64_t n, int k) { return k >= 32 && n >= 16384; }

template <typename Scalar>
BoundedAssignment<Scalar>::BoundedAssignment(const Matrix<Scalar>& points,
                                             const Vector<Scalar>* weights, AssignmentPath path)
    : points_(points),
      weights_(weights),
      path_(path),
      usable_(Margin<Scalar>(points.rows()).usable()) {}

template <typename Scalar>
bool BoundedAssignment<Scalar>::UseBounds() const {
  if (!usable_ || path_ == AssignmentPath::kProducts || centers_.size() == 0) return false;
  // Right after the first call nothing is measured yet: the bounds are
  // tried, at the cost of a copy of the points they leave open.
  if (path_ == AssignmentPath::kBounds || stats_.size() == 1) return true;
  const double n = static_cast<double>(points_.cols());
  return static_cast<double>(stats_.back().settled) >= MinSettled(centers_.cols()) * n;
}

template <typename Scalar>
double BoundedAssignment<Scalar>::Assign(const Matrix<Scalar>& centers, Labels* labels,
                                         ClusterSums* sums) {
  const Eigen::Index n = points_.cols();
  AssignmentStats stats;
  double objective;
  if (n == 0 || centers.cols() == 0) {
    objective = AssignNearest(points_, centers, &labels_, nullptr, sums, weights_);
  } else if (UseBounds()) {
    objective = AssignBounded(centers, sums, &stats);
  } else {
    objective = AssignAll(centers, sums, &stats);
  }
  stats_.push_back(stats);
  if (path_ != AssignmentPath::kProducts) centers_ = centers;
  *labels = labels_;
  return objective;
}

// Every point through the scan, in AssignNearest's blocks; the bounds it
// leaves replace the old ones, which first say how many points they would
// have settled.
template <typename Scalar>
double BoundedAssignment<Scalar>::AssignAll(const Matrix<Scalar>& centers, ClusterSums* sums,
                                            AssignmentStats* stats) {
  const Eigen::Index d = points_.rows(), n = points_.cols(), k = centers.cols();
  const Margin<Scalar> margin(d);
  const bool estimate = centers_.size() > 0 && path_ == AssignmentPath::kAuto && usable_;
  const bool keep = path_ != AssignmentPath::kProducts;
  Moves moves;
  std::vector<double> half;
  if (estimate) {
    moves = CenterMoves(centers_, centers);
    half = HalfSeparations(centers);
  }
  labels_.resize(n);
  if (keep) lower_.resize(n);
  const NearestCenterScan<Scalar> scan(centers);
  const Eigen::Index block = scan.block();
  const Eigen::Index part_size = AssignmentPartSize<Scalar>(n, d, k);
  const Eigen::Index parts = (n + part_size - 1) / part_size;
  PartTotals totals(parts, d, k, sums != nullptr);

#pragma omp parallel if (n * k * d > (1 << 18))
  {
    typename NearestCenterScan<Scalar>::Scratch scratch;
    Vector<Scalar> sq(block);
    std::vector<int> label(block);
    std::vector<double> gap(block);
#pragma omp for schedule(dynamic)
    for (Eigen::Index p = 0; p < parts; ++p) {
      double objective = 0;
      int64_t settled = 0;
      ClusterSums* part = totals.Sums(p);
      for (Eigen::Index first = p * part_size; first < std::min(n, (p + 1) * part_size);
           first += block) {
        const Eigen::Index rows = std::min(block, n - first);
        scan.Scan(points_.middleCols(first, rows), &scratch, label.data(), sq.data(),
                  keep ? gap.data() : nullptr);
        for (Eigen::Index r = 0; r < rows; ++r) {
          const Eigen::Index i = first + r;
          if (estimate && label[r] == labels_[i]) {
            double lower = std::max(0.0, Below(lower_[i] - moves.Other(label[r])));
            if (Settles(margin, sq[r], half[label[r]], &lower)) ++settled;
          }
          labels_[i] = label[r];
          if (keep) lower_[i] = LowerFromScan(margin, sq[r], gap[r]);
          const Scalar* w = weights_ != nullptr ? &(*weights_)[i] : nullptr;
          AddAssigned(points_.col(i), label[r], sq[r], w, &objective, part);
        }
      }
      totals.objective[p] = objective;
      totals.settled[p] = settled;
    }
  }
  return totals.Merge(sums, stats);
}

// The bounds first, then the scan for the points they leave open, gathered
// into blocks; the objective and sums in AssignNearest's parts and order.
template <typename Scalar>
double BoundedAssignment<Scalar>::AssignBounded(const Matrix<Scalar>& centers, ClusterSums* sums,
                                                AssignmentStats* stats) {
  const Eigen::Index d = points_.rows(), n = points_.cols(), k = centers.cols();
  const Margin<Scalar> margin(d);
  const Moves moves = CenterMoves(centers_, centers);
  const std::vector<double> half = HalfSeparations(centers);
  const NearestCenterScan<Scalar> scan(centers);
  const Eigen::Index block = scan.block();
  const Eigen::Index part_size = AssignmentPartSize<Scalar>(n, d, k);
  const Eigen::Index parts = (n + part_size - 1) / part_size;
  const Eigen::Index chunk = std::clamp<Eigen::Index>(
      static_cast<Eigen::Index>(kChunkBytes / static_cast<double>(d * sizeof(Scalar))), block,
      part_size);
  PartTotals totals(parts, d, k, sums != nullptr);

#pragma omp parallel if (n * d > (1 << 16))
  {
    typename NearestCenterScan<Scalar>::Scratch scratch;
    Vector<Scalar> sq(chunk), open_sq(block);
    std::vector<Eigen::Index> open;
    open.reserve(chunk);
    Matrix<Scalar> gathered(d, block);
    std::vector<int> open_label(block);
    std::vector<double> open_gap(block);
#pragma omp for schedule(dynamic)
    for (Eigen::Index p = 0; p < parts; ++p) {
      double objective = 0;
      int64_t settled = 0;
      ClusterSums* part = totals.Sums(p);
      const Eigen::Index end = std::min(n, (p + 1) * part_size);
      for (Eigen::Index first = p * part_size; first < end; first += chunk) {
        const Eigen::Index rows = std::min(chunk, end - first);
        open.clear();
        for (Eigen::Index r = 0; r < rows; ++r) {
          const Eigen::Index i = first + r;
          const int label = labels_[i];
          sq[r] = AssignedSquaredDistance(points_.col(i).data(), centers.col(label).data(), d);
          double lower = std::max(0.0, Below(lower_[i] - moves.Other(label)));
          if (Settles(margin, sq[r], half[label], &lower)) {
            ++settled;
          } else {
            open.push_back(i);
          }
          lower_[i] = lower;
        }
        for (size_t o = 0; o < open.size(); o += block) {
          const Eigen::Index m = std::min<Eigen::Index>(block, open.size() - o);
          for (Eigen::Index r = 0; r < m; ++r) gathered.col(r) = points_.col(open[o + r]);
          scan.Scan(gathered.leftCols(m), &scratch, open_label.data(), open_sq.data(),
                    open_gap.data());
          for (Eigen::Index r = 0; r < m; ++r) {
            const Eigen::Index i = open[o + r];
            labels_[i] = open_label[r];
            // On the point's own memory, as the products path computes it.
            sq[i - first] = AssignedSquaredDistance(points_.col(i).data(),
                                                    centers.col(open_label[r]).data(), d);
            lower_[i] = LowerFromScan(margin, open_sq[r], open_gap[r]);
          }
        }
        for (Eigen::Index r = 0; r < rows; ++r) {
          const Eigen::Index i = first + r;
          const Scalar* w = weights_ != nullptr ? &(*weights_)[i] : nullptr;
          AddAssigned(points_.col(i), labels_[i], sq[r], w, &objective, part);
        }
      }
      totals.objective[p] = objective;
      totals.settled[p] = settled;
    }
  }
  stats->bounded = true;
  return totals.Merge(sums, stats);
}

template class BoundedAssignment<float>;
template class BoundedAssignment<double>;

}  // namespace kmt
