// One level's table of kernels (simd_kernels.h): compiled at each level,
// with KMT_SIMD_ENTRY naming its entry and KMT_SIMD_LEVEL its level, beside
// the kernel sources compiled at the same level (once, at kBuild, in a build
// without dispatch). Every name below is bound
// to that level's own definition when the level's object is made.
#include "core/simd_kernels.h"

namespace kmt {

template <typename Scalar>
SimdKernels<Scalar> SimdKernels<Scalar>::Level() {
  return {
      .assignment = {.assign_nearest = &AssignNearest<Scalar>,
                     .lanes = [](const Matrix<Scalar>& points,
                                 Eigen::Index k) { return PointLanes<Scalar>(points, k); },
                     .scan_init = &NearestCenterScan<Scalar>::Init,
                     .scan = &NearestCenterScan<Scalar>::Scan,
                     .bounded_assign = &BoundedAssignment<Scalar>::Assign,
                     .shard_step = &SeedingShard<Scalar>::Step,
                     .shard_add_centers = &SeedingShard<Scalar>::AddCenters,
                     .shard_taken_weights = &SeedingShard<Scalar>::TakenCenterWeights,
                     .shard_oversample = &SeedingShard<Scalar>::Oversample,
                     .nearest_candidate_weights = &NearestCandidateWeights<Scalar>,
                     .kmeans_plus_plus = &ShardedKMeansPlusPlus<Scalar>},
      .sums = {.accumulate = &AccumulateClusterSums<Scalar>,
               .apply_means = &ApplyMeans<Scalar>,
               .largest_magnitude_bits = &LargestMagnitudeBits<Scalar>,
               .coordinate_sums = &CoordinateSums<Scalar>},
      .attention = {.weights = &AttentionWeights<Scalar>, .attend = &Attend<Scalar>},
  };
}

}  // namespace kmt

extern "C" const kmt::LevelKernels* KMT_SIMD_ENTRY() {
  static const kmt::LevelKernels kernels{
      .level = kmt::SimdLevel::KMT_SIMD_LEVEL,
      .f = kmt::SimdKernels<float>::Level(),
      .d = kmt::SimdKernels<double>::Level(),
      .cluster_sums_add = &kmt::ClusterSums::Add,
  };
  return &kernels;
}
