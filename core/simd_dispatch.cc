// The kernels' names for the program: each calls the kernel of the level in
// use (simd_kernels.h). Compiled into kmt_core only where the kernels are
// compiled per level.
#include "core/simd_kernels.h"

namespace kmt {

template <typename Scalar>
double AssignNearest(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, Labels* labels,
                     NonDeduced<Vector<Scalar>>* sq_dist, ClusterSums* sums,
                     const NonDeduced<Vector<Scalar>>* weights, const PointLanes<Scalar>* lanes,
                     bool objective) {
  return ActiveKernelsOf<Scalar>().assignment.assign_nearest(points, centers, labels, sq_dist, sums,
                                                             weights, lanes, objective);
}

template <typename Scalar>
void PointLanes<Scalar>::Build(const Matrix<Scalar>& points, Eigen::Index k) {
  *this = ActiveKernelsOf<Scalar>().assignment.lanes(points, k);
}

template <typename Scalar>
void NearestCenterScan<Scalar>::Init() {
  (this->*ActiveKernelsOf<Scalar>().assignment.scan_init)();
}

template <typename Scalar>
void NearestCenterScan<Scalar>::Scan(const Eigen::Ref<const Matrix<Scalar>>& x, Scratch* scratch,
                                     int* labels, Scalar* sq, double* gap, const Scalar* lanes,
                                     const Scalar* norms) const {
  (this->*ActiveKernelsOf<Scalar>().assignment.scan)(x, scratch, labels, sq, gap, lanes, norms);
}

template <typename Scalar>
double BoundedAssignment<Scalar>::Assign(const Matrix<Scalar>& centers, Labels* labels,
                                         ClusterSums* sums, bool objective) {
  return (this->*ActiveKernelsOf<Scalar>().assignment.bounded_assign)(centers, labels, sums,
                                                                      objective);
}

template <typename Scalar>
absl::StatusOr<SeedAnswer<Scalar>> SeedingShard<Scalar>::Step(const SeedRequest<Scalar>& request) {
  return (this->*ActiveKernelsOf<Scalar>().assignment.shard_step)(request);
}

template <typename Scalar>
absl::StatusOr<double> SeedingShard<Scalar>::AddCenters(const Matrix<Scalar>& centers) {
  return (this->*ActiveKernelsOf<Scalar>().assignment.shard_add_centers)(centers);
}

template <typename Scalar>
std::vector<double> SeedingShard<Scalar>::TakenCenterWeights() const {
  return (this->*ActiveKernelsOf<Scalar>().assignment.shard_taken_weights)();
}

template <typename Scalar>
absl::StatusOr<std::vector<int64_t>> SeedingShard<Scalar>::Oversample(double oversampling,
                                                                      double potential,
                                                                      uint64_t seed, int64_t round,
                                                                      int64_t first_point) const {
  return (this->*ActiveKernelsOf<Scalar>().assignment.shard_oversample)(oversampling, potential,
                                                                        seed, round, first_point);
}

template <typename Scalar>
std::vector<double> NearestCandidateWeights(const Matrix<Scalar>& points,
                                            const Vector<Scalar>* weights,
                                            const Matrix<Scalar>& candidates) {
  return ActiveKernelsOf<Scalar>().assignment.nearest_candidate_weights(points, weights,
                                                                        candidates);
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> ShardedKMeansPlusPlus(const std::vector<int64_t>& shard_sizes, int d,
                                                     int k, uint64_t seed, int trials,
                                                     const SeedRound<Scalar>& round,
                                                     const StopCheck& check, bool weighted) {
  return ActiveKernelsOf<Scalar>().assignment.kmeans_plus_plus(shard_sizes, d, k, seed, trials,
                                                               round, check, weighted);
}

void ClusterSums::Add(const ClusterSums& other) {
  (this->*ActiveKernels().cluster_sums_add)(other);
}

template <typename Scalar>
void AccumulateClusterSums(const Matrix<Scalar>& points, const Labels& labels, ClusterSums* into,
                           const Vector<Scalar>* weights) {
  ActiveKernelsOf<Scalar>().sums.accumulate(points, labels, into, weights);
}

template <typename Scalar>
int ApplyMeans(const ClusterSums& sums, Matrix<Scalar>* centers) {
  return ActiveKernelsOf<Scalar>().sums.apply_means(sums, centers);
}

template <typename Scalar>
ScalarBits<Scalar> LargestMagnitudeBits(const Scalar* values, int64_t count) {
  return ActiveKernelsOf<Scalar>().sums.largest_magnitude_bits(values, count);
}

template <typename Scalar>
void CoordinateSums(const Scalar* values, int64_t count, int d, const double* center, double* out) {
  ActiveKernelsOf<Scalar>().sums.coordinate_sums(values, count, d, center, out);
}

template <typename Scalar>
Matrix<Scalar> AttentionWeights(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                                const Matrix<Scalar>& keys, Sampling sampling) {
  return ActiveKernelsOf<Scalar>().attention.weights(block, queries, keys, sampling);
}

template <typename Scalar>
Matrix<Scalar> Attend(const AttentionBlock<Scalar>& block, const Matrix<Scalar>& queries,
                      const Matrix<Scalar>& keys, std::vector<bool>* support, Sampling sampling) {
  return ActiveKernelsOf<Scalar>().attention.attend(block, queries, keys, support, sampling);
}

#define KMT_INSTANTIATE(S)                                                                         \
  template double AssignNearest<S>(const Matrix<S>&, const Matrix<S>&, Labels*, Vector<S>*,        \
                                   ClusterSums*, const Vector<S>*, const PointLanes<S>*, bool);    \
  template void PointLanes<S>::Build(const Matrix<S>&, Eigen::Index);                              \
  template void NearestCenterScan<S>::Init();                                                      \
  template void NearestCenterScan<S>::Scan(const Eigen::Ref<const Matrix<S>>&, Scratch*, int*, S*, \
                                           double*, const S*, const S*) const;                     \
  template double BoundedAssignment<S>::Assign(const Matrix<S>&, Labels*, ClusterSums*, bool);     \
  template absl::StatusOr<SeedAnswer<S>> SeedingShard<S>::Step(const SeedRequest<S>&);             \
  template absl::StatusOr<double> SeedingShard<S>::AddCenters(const Matrix<S>&);                   \
  template std::vector<double> SeedingShard<S>::TakenCenterWeights() const;                        \
  template absl::StatusOr<std::vector<int64_t>> SeedingShard<S>::Oversample(                       \
      double, double, uint64_t, int64_t, int64_t) const;                                           \
  template std::vector<double> NearestCandidateWeights<S>(const Matrix<S>&, const Vector<S>*,      \
                                                          const Matrix<S>&);                       \
  template absl::StatusOr<Matrix<S>> ShardedKMeansPlusPlus<S>(                                     \
      const std::vector<int64_t>&, int, int, uint64_t, int, const SeedRound<S>&, const StopCheck&, \
      bool);                                                                                       \
  template void AccumulateClusterSums<S>(const Matrix<S>&, const Labels&, ClusterSums*,            \
                                         const Vector<S>*);                                        \
  template ScalarBits<S> LargestMagnitudeBits<S>(const S*, int64_t);                               \
  template void CoordinateSums<S>(const S*, int64_t, int, const double*, double*);                 \
  template int ApplyMeans<S>(const ClusterSums&, Matrix<S>*);                                      \
  template Matrix<S> AttentionWeights<S>(const AttentionBlock<S>&, const Matrix<S>&,               \
                                         const Matrix<S>&, Sampling);                              \
  template Matrix<S> Attend<S>(const AttentionBlock<S>&, const Matrix<S>&, const Matrix<S>&,       \
                               std::vector<bool>*, Sampling);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
