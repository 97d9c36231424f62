// Lloyd's assignment with Hamerly's bounds ("Making k-means even faster",
// SDM 2010), for runs that assign the same points to moving centers again and
// again. Each point keeps a lower bound on its distance to every center but
// its own; when the centers move, the bound drops by the most any other
// center moved, and a point whose distance to its own center (computed every
// time: the objective needs it) is below that bound, or below half the
// distance from its center to the nearest other one, keeps its label without
// its other distances. The rest are assigned by AssignNearest's own scan.
//
// The labels, objective and cluster sums are those AssignNearest gives, to
// the last bit: a bound keeps a label only where it proves that the
// assignment would choose it, with a margin for the round-off of every
// distance involved (see Margin in bounds.cc), and objective and sums are
// added in AssignNearest's parts and order, recomputed at every call (an
// update by the points that moved would round differently).
#ifndef KMT_CORE_BOUNDS_H_
#define KMT_CORE_BOUNDS_H_

#include <cstdint>
#include <vector>

#include "core/cluster_sums.h"
#include "core/types.h"

namespace kmt {

// How an assignment after the first finds the nearest centers.
enum class AssignmentPath {
  /// the bounds on the second call, then when they settled enough points
  /// the call before, else the products (the fast path: for k >= 32 and n >= 16,384 only,
  /// BoundsMayPay)
  kAuto,
  kProducts,  ///< every distance through the matrix product (AssignNearest)
  kBounds,    ///< the bounds at every call after the first
};

// What one call did.
struct AssignmentStats {
  bool bounded = false;  ///< it used the bounds
  /// Points whose bounds kept their label; in a pass through the products,
  /// those the old bounds would have kept (0 on the first call).
  int64_t settled = 0;
};

// Whether the automatic choice considers the bounds for a run of n points
// and k centers at all. With fewer than 32 centers the products cost about
// what a pass testing the bounds costs (the bounds did not pay at k = 8 even
// where they settled 95% of the points, and at k = 16 lost on touching
// clusters); with fewer than 16,384 points the points stay in the cache and
// the products run so fast that the bounds lost at k = 16 to 64 even where
// they settled 80% (docs/core.md, "Which path").
bool BoundsMayPay(int64_t n, int k);

template <typename Scalar>
class BoundedAssignment {
 public:
  // points: d x n, weights: n or null (1 each); both must outlive this.
  // kProducts makes every call the first one.
  BoundedAssignment(const Matrix<Scalar>& points, const Vector<Scalar>* weights,
                    AssignmentPath path);

  // As AssignNearest(points, centers, labels, nullptr, sums, weights).
  double Assign(const Matrix<Scalar>& centers, Labels* labels, ClusterSums* sums);

  // The calls so far, in order.
  const std::vector<AssignmentStats>& stats() const { return stats_; }

 private:
  // Whether the next call uses the bounds.
  bool UseBounds() const;
  double AssignAll(const Matrix<Scalar>& centers, ClusterSums* sums, AssignmentStats* stats);
  double AssignBounded(const Matrix<Scalar>& centers, ClusterSums* sums, AssignmentStats* stats);

  const Matrix<Scalar>& points_;
  const Vector<Scalar>* weights_;
  AssignmentPath path_;
  bool usable_;                // the margin is meaningful at this d
  Matrix<Scalar> centers_;     // the centers of the last call (empty before the first)
  Labels labels_;              // the last call's labels
  std::vector<double> lower_;  // per point, a lower bound on its distance to the others
  std::vector<AssignmentStats> stats_;
};

}  // namespace kmt

#endif  // KMT_CORE_BOUNDS_H_
