// Lloyd's assignment with grouped lower bounds, for runs that assign the
// same points to moving centers again and again: Yinyang k-means' (Ding et
// al., "Yinyang K-Means: A Drop-In Replacement of the Classic K-Means with
// Consistent Speedup", ICML 2015) with Hamerly's separation test ("Making
// k-means even faster", SDM 2010). The centers are split once into groups
// of about ten nearby centers; each point keeps, per group, a lower bound
// on its distance to the group's centers other than its own, which drops by
// the most any center of the group moved. The distance to the own center is
// computed every time the objective is asked for; a call that does not ask
// keeps Hamerly's upper bound on it instead (grown by the center's moves)
// and does not read a point whose upper bound the tests below pass. A
// point below every group's
// bound, or below half the distance from its center to the nearest other
// one, keeps its label without other distances (the global filter); one
// below most groups' bounds gets its direct distances to the centers of the
// other groups alone (the group filter); the rest, and every point those
// distances do not decide beyond round-off, are assigned by AssignNearest's
// own scan, whose scores then give every group's bound. Where the groups do
// not pay (many points scanned at every call: uniform data) the bounds turn
// into one a point and the filters into Hamerly's.
//
// The labels and objective are those AssignNearest gives, to the last bit:
// a bound keeps a label only where it proves that the assignment would
// choose it, with a margin for the round-off of every distance involved
// (see Margin in bounds.cc), and the objective is added in AssignNearest's
// parts and order. The cluster sums are either AssignNearest's too, added
// again at every call, or (exact sums) held exactly (ExactClusterSums) and
// updated by the points that changed cluster alone, which gives the same
// bits as summing them all again.
#ifndef KMT_CORE_BOUNDS_H_
#define KMT_CORE_BOUNDS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/cluster_sums.h"
#include "core/exact_sums.h"
#include "core/huge_pages.h"
#include "core/types.h"

namespace kmt {

// How an assignment after the first finds the nearest centers.
enum class AssignmentPath {
  /// the bounds on the second call, then when they settled enough points
  /// the call before, else the products (the fast path: for k >= 32 and n >= 16,384 only,
  /// BoundsMayPay)
  kAuto,
  kProducts,  ///< every distance through the matrix product (AssignNearest)
  kBounds,    ///< the bounds at every call after the first, every filter always
};

// How the fast path keeps the cluster sums of Lloyd's update. The two give
// sums that differ in the last bits (the exact sums rounded once against
// double additions in a fixed order); each is the same whichever
// AssignmentPath runs.
enum class SumsPath {
  /// exact where the bounds may pay (BoundsMayPay), which is where the
  /// points that move are few against the points: double elsewhere
  kAuto,
  kDouble,  ///< AssignNearest's double sums, added again at every layer
  kExact,   ///< exact sums updated by the points that moved (ExactClusterSums)
};

// What one call did.
struct AssignmentStats {
  bool bounded = false;  ///< it used the bounds
  /// Points whose bounds kept their label without another distance (the
  /// global filter); in a pass through the products, those the old bounds
  /// would have kept (0 on the first call).
  int64_t settled = 0;
  /// Points decided by their distances to the centers of the groups their
  /// bounds left open alone (the group filter).
  int64_t grouped = 0;
  /// Of the settled points, those the upper bound settled without reading
  /// them (calls without the objective).
  int64_t unread = 0;
  /// Points whose label differs from the call before's (the first call:
  /// every point).
  int64_t changed = 0;
  /// With exact sums, after the first call: the points whose label changed,
  /// and whether the sums were updated by them alone (else, when more than
  /// an eighth of a part's points moved, summed again).
  int64_t moved = 0;
  bool sums_from_moves = false;
};

// Whether the centers' separations, which every call of the bounds
// computes (k^2 d products, in double), cost at most about a tenth of the
// products they may spare (2 n k d, in float32 or narrower): with 32 points a
// center or more. At n = 20,000, d = 384 and k = 4,096 a resident shard
// spent most of its step on them.
inline bool SeparationsMayPay(int64_t n, int k) { return n >= 32 * static_cast<int64_t>(k); }

// Whether the automatic choice considers the bounds for a run of n points
// and k centers at all. With fewer than 32 centers the products cost about
// what a pass testing the bounds costs (the bounds did not pay at k = 8 even
// where they settled 95% of the points, and at k = 16 lost on touching
// clusters); with fewer than 16,384 points the points stay in the cache and
// the products run so fast that the bounds lost at k = 16 to 64 even where
// they settled 80% (docs/core.md, "Which path"); and never without
// SeparationsMayPay.
inline bool BoundsMayPay(int64_t n, int k) {
  return k >= 32 && n >= 16384 && SeparationsMayPay(n, k);
}

template <typename Scalar>
class BoundedAssignment {
 public:
  // points: d x n, weights: n or null (1 each); both must outlive this.
  // kProducts makes every call the first one as far as the bounds go.
  // exact_sums: the sums each call adds are the exact sums rounded to
  // double (ExactClusterSums), kept between calls and updated by the points
  // that moved; where the points' terms do not fit the fixed point, and
  // without it, AssignNearest's double sums.
  BoundedAssignment(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                    AssignmentPath path, bool exact_sums = false)
      : points_(points), weights_(weights), path_(path), exact_wanted_(exact_sums) {}

  // As AssignNearest(points, centers, labels, nullptr, sums, weights), the
  // sums exact if asked for. Without `objective` it returns NaN, and the
  // points the upper bounds settle are not read (where the sums are exact
  // or not asked for). `labels` may be null: labels() holds them.
  double Assign(const Matrix<Scalar>& centers, Labels* labels, ClusterSums* sums,
                bool objective = true);

  // The last call's labels.
  const Labels& labels() const { return labels_; }

  // Whether the sums are the exact ones (asked for, and the points fit).
  bool exact_sums() const { return exact_ != nullptr; }

  // The calls so far, in order.
  const std::vector<AssignmentStats>& stats() const { return stats_; }

 private:
  // Whether the margin is meaningful at the points' d.
  bool Usable() const;
  // Whether the next call uses the bounds.
  bool UseBounds() const;
  // The points whose label a call changes, part by part. A part lists at
  // most an eighth of its points and only counts the others: past that the
  // sums are taken again from scratch (two additions a moved point against
  // one a point, and the list's memory stays at 2 bytes a point).
  struct Moves {
    std::vector<std::vector<typename ExactClusterSums<Scalar>::Move>> parts;
    std::vector<int64_t> counts;  // per part, listed or not
    size_t cap = 0;
    void Reset(Eigen::Index n_parts, Eigen::Index part_size) {
      parts.assign(n_parts, {});
      counts.assign(n_parts, 0);
      cap = static_cast<size_t>(part_size / 8);
    }
    void Add(Eigen::Index part, Eigen::Index point, int from, int to) {
      ++counts[part];
      if (parts[part].size() < cap) parts[part].push_back({point, from, to});
    }
  };
  // With `moves`, each point whose label changes is added to its part's
  // list (and the sums are not added). `lazy`: no objective, and the upper
  // bounds kept.
  double AssignAll(const Matrix<Scalar>& centers, ClusterSums* sums, AssignmentStats* stats,
                   Moves* moves, bool lazy);
  double AssignBounded(const Matrix<Scalar>& centers, ClusterSums* sums, AssignmentStats* stats,
                       Moves* moves, bool lazy);
  // AssignBounded's passes over a chunk of points (bounds.cc gives each
  // one's shape), on what the call's passes share and a thread's memory.
  struct Call;
  struct ChunkState;
  void LowerBounds(Eigen::Index first, Eigen::Index rows, ChunkState* c) const;
  Eigen::Index GlobalFilterPass(const Call& call, Eigen::Index first, Eigen::Index rows,
                                ChunkState* c) const;
  bool GroupFilter(const Call& call, Eigen::Index i, Eigen::Index r, ChunkState* c);
  void ScanOpen(const Call& call, Eigen::Index first, ChunkState* c);
  void GroupBoundsFromScores(const Call& call, Eigen::Index i, Eigen::Index r, ChunkState* c);
  // The exact sums of the labels now, from the moves where every one was
  // listed, else from scratch.
  void UpdateExact(const Moves& moves, bool from_moves, AssignmentStats* stats);

  // Splits the centers of the first call into groups.
  void Group(const Matrix<Scalar>& centers);
  // Adds the centers' moves since the last call to each group's drift.
  void Drift(const Matrix<Scalar>& centers);
  // Turns the bounds into the form of the group filter (per group) or back
  // (one a point).
  void SetTight(bool tight);

  const Matrix<Scalar>& points_;
  const Vector<Scalar>* weights_;
  AssignmentPath path_;
  Matrix<Scalar> centers_;  // the centers of the last call (empty before the first)
  Labels labels_;           // the last call's labels
  int groups_ = 0;
  std::vector<int> group_of_;     // per center
  std::vector<int> members_;      // the centers, group by group
  std::vector<int> group_start_;  // group g's centers: members_[group_start_[g], [g + 1])
  // Per group, an upper bound on the sum of its largest move at each call.
  std::vector<double> drift_;
  // Per point and group (groups_ a point), its lower bound on the distance
  // to the group's centers but its own plus the group's drift when it was
  // stored, rounded down: the bound now is that less the drift now.
  HugePageVector<Scalar> bound_;
  // The bounds in one form at a time: per group (tight, the group filter's)
  // or one a point (single_, with drift_all_ the sum of the largest move of
  // any center at each call), which costs less where the groups do not pay.
  bool tight_ = false;
  HugePageVector<Scalar> single_;
  double drift_all_ = 0;
  // Per center, an upper bound on the sum of its moves at each call; per
  // point, an upper bound on the distance to its label's center less that
  // center's sum when it was stored (current: kept by the last call).
  std::vector<double> moved_;
  HugePageVector<double> upper_;
  bool upper_current_ = false;
  std::vector<AssignmentStats> stats_;
  // The exact sums, for exact_k_ centers; current: they are labels_'s.
  bool exact_wanted_;
  int exact_k_ = -1;
  std::unique_ptr<ExactClusterSums<Scalar>> exact_;
  bool exact_current_ = false;
};

}  // namespace kmt

#endif  // KMT_CORE_BOUNDS_H_
