// How the kernels are compiled per SIMD level (core/simd.h) and called.
//
// The kernel sources (assign.cc, bounds.cc, cluster_sums.cc, point_passes.cc,
// seeding.cc, attention.cc) are compiled once per level, with that level's
// -march, each level with simd_kernels.cc into one relocatable object whose
// only global symbol is its entry, kmt_simd_kernels_<level>
// (core/CMakeLists.txt): every other symbol it defines, the kernels' own
// and the Eigen and standard library code inlined or instantiated at that
// level, is local to it, so no level's code can stand in for another's at
// link time. The entry returns
// a table of the level's kernels, by the same names the headers declare.
// A hot caller takes the table in use once (ActiveKernelsOf) and calls its
// members: one lookup, then the level's own code (the evaluator does, once
// per run). For every other caller simd_dispatch.cc defines the headers'
// names, each calling the table of the level in use. A kernel file is
// compiled at no other level and into no other object, so every function it
// defines for outside callers has its forwarder there, and a class's
// constructors that the program calls are inline (the work they did is a
// dispatched member).
//
// Builds that compile their kernels once (KMT_SIMD_DISPATCH off) link the
// kernel files into kmt_core directly, with simd_kernels.cc as their one
// table (level kBuild) and no forwarders.
#ifndef KMT_CORE_SIMD_KERNELS_H_
#define KMT_CORE_SIMD_KERNELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/assign.h"
#include "core/attention.h"
#include "core/bounds.h"
#include "core/cluster_sums.h"
#include "core/point_passes.h"
#include "core/seeding.h"
#include "core/simd.h"

namespace kmt {

// One level's kernels for one scalar type, in the groups that auto may take
// from different levels (simd.cc): the assignment group shares PointLanes'
// and NearestCenterScan's layouts, so its members come from one level.
template <typename Scalar>
struct SimdKernels {
  using S = Scalar;
  struct Assignment {
    double (*assign_nearest)(const Matrix<S>&, const Matrix<S>&, Labels*, Vector<S>*, ClusterSums*,
                             const Vector<S>*, const PointLanes<S>*, bool);
    PointLanes<S> (*lanes)(const Matrix<S>&, Eigen::Index);  ///< made at this level
    void (NearestCenterScan<S>::*scan_init)();
    void (NearestCenterScan<S>::*scan)(const Eigen::Ref<const Matrix<S>>&,
                                       typename NearestCenterScan<S>::Scratch*, int*, S*, double*,
                                       const S*, const S*) const;
    double (BoundedAssignment<S>::*bounded_assign)(const Matrix<S>&, Labels*, ClusterSums*, bool);
    absl::StatusOr<SeedAnswer<S>> (SeedingShard<S>::*shard_step)(const SeedRequest<S>&);
    absl::StatusOr<double> (SeedingShard<S>::*shard_add_centers)(const Matrix<S>&);
    std::vector<double> (SeedingShard<S>::*shard_taken_weights)() const;
    absl::StatusOr<std::vector<int64_t>> (SeedingShard<S>::*shard_oversample)(double, double,
                                                                              uint64_t, int64_t,
                                                                              int64_t) const;
    std::vector<double> (*nearest_candidate_weights)(const Matrix<S>&, const Vector<S>*,
                                                     const Matrix<S>&);
    absl::StatusOr<Matrix<S>> (*kmeans_plus_plus)(const std::vector<int64_t>&, int, int, uint64_t,
                                                  int, const SeedRound<S>&, const StopCheck&, bool);
  };
  struct Sums {
    void (*accumulate)(const Matrix<S>&, const Labels&, ClusterSums*, const Vector<S>*);
    int (*apply_means)(const ClusterSums&, Matrix<S>*);
    ScalarBits<S> (*largest_magnitude_bits)(const S*, int64_t);
    void (*coordinate_sums)(const S*, int64_t, int, const double*, double*);
  };
  struct Attention {
    Matrix<S> (*weights)(const AttentionBlock<S>&, const Matrix<S>&, const Matrix<S>&, Sampling);
    Matrix<S> (*attend)(const AttentionBlock<S>&, const Matrix<S>&, const Matrix<S>&,
                        std::vector<bool>*, Sampling);
  };

  Assignment assignment;
  Sums sums;
  Attention attention;

  // One level's, filled in simd_kernels.cc at that level.
  static SimdKernels Level();
};

// Everything one level's object provides.
struct LevelKernels {
  SimdLevel level;
  SimdKernels<float> f;
  SimdKernels<double> d;
  void (ClusterSums::*cluster_sums_add)(const ClusterSums&);
};

// The kernels in use (simd.cc): chosen once per process, or when a setting
// changes them; a table once handed out is kept for the process.
const LevelKernels& ActiveKernels();

template <typename Scalar>
const SimdKernels<Scalar>& ActiveKernelsOf();
template <>
inline const SimdKernels<float>& ActiveKernelsOf<float>() {
  return ActiveKernels().f;
}
template <>
inline const SimdKernels<double>& ActiveKernelsOf<double>() {
  return ActiveKernels().d;
}

}  // namespace kmt

#endif  // KMT_CORE_SIMD_KERNELS_H_
