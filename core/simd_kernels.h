// How the kernels are compiled per SIMD level (core/simd.h) and called.
//
// The kernel sources (assign.cc, bounds.cc, cluster_sums.cc,
// exact_sums_additions.cc, point_passes.cc, seeding.cc, sparse.cc,
// attention.cc) are compiled once per level, with
// that level's -march, each level with simd_kernels.cc into one relocatable
// object whose only global symbol is its entry, kmt_simd_kernels_<level>
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
#include "core/exact_sums.h"
#include "core/point_passes.h"
#include "core/seeding.h"
#include "core/simd.h"
#include "core/sparse.h"

namespace kmt {

// The dispatched kernels, each named once, in the groups that auto may take
// from different levels (simd.cc): the assignment group shares PointLanes'
// and NearestCenterScan's layouts, so its members come from one level. Each
// list gives, for the scalar type S, either
//   FUNCTION(name, return type, (parameters), (arguments)): a function
//     template of S, or
//   MEMBER(class, name, return type, (parameters), (arguments), qualifier):
//     a member of a class template of S,
// with the declaration its header has. From them come a level's table
// (SimdKernels, one field a kernel, named after it), its filling at each
// level (simd_kernels.cc), and the forwarders and their instantiations
// (simd_dispatch.cc). A kernel is added here and in its header, nowhere
// else.
#define KMT_ASSIGNMENT_KERNELS(FUNCTION, MEMBER)                                                  \
  FUNCTION(AssignNearest, double,                                                                 \
           (const Matrix<S>& points, const Matrix<S>& centers, Labels* labels,                    \
            NonDeduced<Vector<S>>* sq_dist, ClusterSums* sums,                                    \
            const NonDeduced<Vector<S>>* weights, const PointLanes<S>* lanes, bool objective),    \
           (points, centers, labels, sq_dist, sums, weights, lanes, objective))                   \
  FUNCTION(                                                                                       \
      AssignRows, double,                                                                         \
      (const Matrix<S>& points, const Matrix<S>& centers, const int64_t* rows, Eigen::Index m,    \
       Labels* labels, ClusterSums* sums, const NonDeduced<Vector<S>>* weights),                  \
      (points, centers, rows, m, labels, sums, weights))                                          \
  MEMBER(PointLanes<S>, Build, void, (const Matrix<S>& points, Eigen::Index k), (points, k), )    \
  MEMBER(NearestCenterScan<S>, Init, void, (), (), )                                              \
  MEMBER(NearestCenterScan<S>, Scan, void,                                                        \
         (const Eigen::Ref<const Matrix<S>>& x, typename NearestCenterScan<S>::Scratch* scratch,  \
          int* labels, S* sq, double* gap, const S* lanes, const S* norms),                       \
         (x, scratch, labels, sq, gap, lanes, norms), const)                                      \
  MEMBER(BoundedAssignment<S>, Assign, double,                                                    \
         (const Matrix<S>& centers, Labels* labels, ClusterSums* sums, bool objective),           \
         (centers, labels, sums, objective), )                                                    \
  MEMBER(SeedingShard<S>, Step, absl::StatusOr<SeedAnswer<S>>, (const SeedRequest<S>& request),   \
         (request), )                                                                             \
  MEMBER(SeedingShard<S>, AddCenters, absl::StatusOr<double>, (const Matrix<S>& centers),         \
         (centers), )                                                                             \
  MEMBER(SeedingShard<S>, TakenCenterWeights, std::vector<double>, (), (), const)                 \
  MEMBER(                                                                                         \
      SeedingShard<S>, Oversample, absl::StatusOr<std::vector<int64_t>>,                          \
      (double oversampling, double potential, uint64_t seed, int64_t round, int64_t first_point), \
      (oversampling, potential, seed, round, first_point), const)                                 \
  FUNCTION(NearestCandidateWeights, std::vector<double>,                                          \
           (const Matrix<S>& points, const Vector<S>* weights, const Matrix<S>& candidates),      \
           (points, weights, candidates))                                                         \
  FUNCTION(ShardedKMeansPlusPlus, absl::StatusOr<Matrix<S>>,                                      \
           (const std::vector<int64_t>& shard_sizes, int d, int k, uint64_t seed, int trials,     \
            const SeedRound<S>& round, const StopCheck& check, bool weighted),                    \
           (shard_sizes, d, k, seed, trials, round, check, weighted))                             \
  FUNCTION(AssignNearestSparse, double,                                                           \
           (const CsrMatrix<S>& points, const Matrix<S>& centers, Labels* labels,                 \
            NonDeduced<Vector<S>>* sq_dist, ClusterSums* sums,                                    \
            const NonDeduced<Vector<S>>* weights, SparseDistances distances),                     \
           (points, centers, labels, sq_dist, sums, weights, distances))                          \
  FUNCTION(SparseSquaredDistances, Matrix<S>,                                                     \
           (const CsrMatrix<S>& points, const Matrix<S>& centers), (points, centers))
#define KMT_SUMS_KERNELS(FUNCTION, MEMBER)                                                         \
  FUNCTION(AccumulateClusterSums, void,                                                            \
           (const Matrix<S>& points, const Labels& labels, ClusterSums* into,                      \
            const Vector<S>* weights),                                                             \
           (points, labels, into, weights))                                                        \
  MEMBER(ExactClusterSums<S>, Recompute, void, (const Labels& labels), (labels), )                 \
  MEMBER(ExactClusterSums<S>, Apply, void,                                                         \
         (const std::vector<typename ExactClusterSums<S>::Move>& moves), (moves), )                \
  FUNCTION(ApplyMeans, int, (const ClusterSums& sums, Matrix<S>* centers), (sums, centers))        \
  FUNCTION(LargestMagnitudeBits, ScalarBits<S>, (const S* values, int64_t count), (values, count)) \
  FUNCTION(CoordinateSums, void,                                                                   \
           (const S* values, int64_t count, int d, const double* center, double* out),             \
           (values, count, d, center, out))                                                        \
  FUNCTION(AccumulateSparseClusterSums, void,                                                      \
           (const CsrMatrix<S>& points, const Labels& labels, ClusterSums* into,                   \
            const NonDeduced<Vector<S>>* weights),                                                 \
           (points, labels, into, weights))
#define KMT_ATTENTION_KERNELS(FUNCTION, MEMBER)                                              \
  FUNCTION(AttentionWeights, Matrix<S>,                                                      \
           (const AttentionBlock<S>& block, const Matrix<S>& queries, const Matrix<S>& keys, \
            Sampling sampling),                                                              \
           (block, queries, keys, sampling))                                                 \
  FUNCTION(Attend, Matrix<S>,                                                                \
           (const AttentionBlock<S>& block, const Matrix<S>& queries, const Matrix<S>& keys, \
            std::vector<bool>* support, Sampling sampling),                                  \
           (block, queries, keys, support, sampling))

// A table field for each kernel of a list.
#define KMT_KERNEL_FUNCTION_FIELD(name, R, params, args) R(*name) params;
#define KMT_KERNEL_MEMBER_FIELD(Class, name, R, params, args, qualifier) \
  R(Class::*name) params qualifier;

// One level's kernels for one scalar type, by group.
template <typename S>
struct SimdKernels {
  struct Assignment {
    KMT_ASSIGNMENT_KERNELS(KMT_KERNEL_FUNCTION_FIELD, KMT_KERNEL_MEMBER_FIELD)
  };
  struct Sums {
    KMT_SUMS_KERNELS(KMT_KERNEL_FUNCTION_FIELD, KMT_KERNEL_MEMBER_FIELD)
  };
  struct Attention {
    KMT_ATTENTION_KERNELS(KMT_KERNEL_FUNCTION_FIELD, KMT_KERNEL_MEMBER_FIELD)
  };

  Assignment assignment;
  Sums sums;
  Attention attention;

  // One level's, filled in simd_kernels.cc at that level.
  static SimdKernels Level();
};

// Everything one level's object provides: its kernels for each scalar type,
// and ClusterSums::Add (a kernel of the sums group with no scalar type).
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
