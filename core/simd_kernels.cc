// One level's table of kernels (simd_kernels.h): compiled at each level,
// with KMT_SIMD_ENTRY naming its entry and KMT_SIMD_LEVEL its level, beside
// the kernel sources compiled at the same level (once, at kBuild, in a build
// without dispatch). Every name below is bound
// to that level's own definition when the level's object is made.
#include "core/simd_kernels.h"

namespace kmt {

// Each field bound to this level's own definition of its kernel.
#define KMT_KERNEL_FUNCTION_FILL(name, R, params, args) .name = &name<S>,
#define KMT_KERNEL_MEMBER_FILL(Class, name, R, params, args, qualifier) .name = &Class::name,

template <typename S>
SimdKernels<S> SimdKernels<S>::Level() {
  return {
      .assignment = {KMT_ASSIGNMENT_KERNELS(KMT_KERNEL_FUNCTION_FILL, KMT_KERNEL_MEMBER_FILL)},
      .sums = {KMT_SUMS_KERNELS(KMT_KERNEL_FUNCTION_FILL, KMT_KERNEL_MEMBER_FILL)},
      .attention = {KMT_ATTENTION_KERNELS(KMT_KERNEL_FUNCTION_FILL, KMT_KERNEL_MEMBER_FILL)},
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
