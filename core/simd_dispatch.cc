// The kernels' names for the program: each calls the kernel of the level in
// use (simd_kernels.h). Compiled into kmt_core only where the kernels are
// compiled per level.
#include "core/simd_kernels.h"

namespace kmt {

// Each kernel of the lists (simd_kernels.h) calls its field of the table in
// use, and is instantiated for float and double.
#define KMT_KERNEL_FUNCTION_FORWARDER(name, R, params, args, group) \
  template <typename S>                                             \
  R name params {                                                   \
    return ActiveKernelsOf<S>().group.name args;                    \
  }
#define KMT_KERNEL_MEMBER_FORWARDER(Class, name, R, params, args, qualifier, group) \
  template <typename S>                                                             \
  R Class::name params qualifier {                                                  \
    return (this->*ActiveKernelsOf<S>().group.name) args;                           \
  }
#define KMT_ASSIGNMENT_FUNCTION(...) KMT_KERNEL_FUNCTION_FORWARDER(__VA_ARGS__, assignment)
#define KMT_ASSIGNMENT_MEMBER(...) KMT_KERNEL_MEMBER_FORWARDER(__VA_ARGS__, assignment)
#define KMT_SUMS_FUNCTION(...) KMT_KERNEL_FUNCTION_FORWARDER(__VA_ARGS__, sums)
#define KMT_SUMS_MEMBER(...) KMT_KERNEL_MEMBER_FORWARDER(__VA_ARGS__, sums)
#define KMT_ATTENTION_FUNCTION(...) KMT_KERNEL_FUNCTION_FORWARDER(__VA_ARGS__, attention)
#define KMT_ATTENTION_MEMBER(...) KMT_KERNEL_MEMBER_FORWARDER(__VA_ARGS__, attention)
KMT_ASSIGNMENT_KERNELS(KMT_ASSIGNMENT_FUNCTION, KMT_ASSIGNMENT_MEMBER)
KMT_SUMS_KERNELS(KMT_SUMS_FUNCTION, KMT_SUMS_MEMBER)
KMT_ATTENTION_KERNELS(KMT_ATTENTION_FUNCTION, KMT_ATTENTION_MEMBER)

void ClusterSums::Add(const ClusterSums& other) {
  (this->*ActiveKernels().cluster_sums_add)(other);
}

#define KMT_KERNEL_FUNCTION_INSTANCE(name, R, params, args) template R name<S> params;
#define KMT_KERNEL_MEMBER_INSTANCE(Class, name, R, params, args, qualifier) \
  template R Class::name params qualifier;
#define KMT_KERNEL_INSTANCES                                                       \
  KMT_ASSIGNMENT_KERNELS(KMT_KERNEL_FUNCTION_INSTANCE, KMT_KERNEL_MEMBER_INSTANCE) \
  KMT_SUMS_KERNELS(KMT_KERNEL_FUNCTION_INSTANCE, KMT_KERNEL_MEMBER_INSTANCE)       \
  KMT_ATTENTION_KERNELS(KMT_KERNEL_FUNCTION_INSTANCE, KMT_KERNEL_MEMBER_INSTANCE)
#define S float
KMT_KERNEL_INSTANCES
#undef S
#define S double
KMT_KERNEL_INSTANCES
#undef S

}  // namespace kmt
