// The per-dimension mean and centered sum of squares of points taken in
// parts, for scikit-learn's tolerance: tol times the mean over dimensions of
// the points' population variance (unweighted, even for weighted points).
// One batch is one part; a resident job's coordinator merges its shards'
// parts in a fixed order, so the same points give the same bits.
#ifndef KMT_CORE_POINT_MOMENTS_H_
#define KMT_CORE_POINT_MOMENTS_H_

#include <cstdint>
#include <vector>

namespace kmt {

class PointMoments {
 public:
  // Takes `count` more points of d values each, point after point (a d x n
  // column-major matrix's data, or n x d row-major).
  template <typename Scalar>
  void Add(const Scalar* values, int64_t count, int d);
  // The same for `count` points as compressed sparse rows (indptr from 0,
  // columns in [0, d)): the moments of the rows made dense, their zeros
  // counted without being read.
  template <typename Scalar>
  void AddSparse(const int64_t* indptr, const int32_t* indices, const Scalar* values, int64_t count,
                 int d);
  // Merges another part (Chan, Golub and LeVeque's pairwise update).
  void Add(const PointMoments& other);
  // The mean over dimensions of the variance; 0 before any point.
  double MeanVariance() const;
  int64_t count() const { return n_; }

 private:
  int64_t n_ = 0;
  std::vector<double> mean_, m2_;
};

}  // namespace kmt

#endif  // KMT_CORE_POINT_MOMENTS_H_
