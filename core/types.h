// Matrix aliases shared by the core. Tokens, points and centers are columns.
#ifndef KMT_CORE_TYPES_H_
#define KMT_CORE_TYPES_H_

#include <Eigen/Dense>
#include <vector>

namespace kmt {

template <typename Scalar>
using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
template <typename Scalar>
using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

// One cluster index per point.
using Labels = std::vector<int>;

// A parameter type that takes no part in template argument deduction, so a
// nullptr can be passed for it (C++20's std::type_identity_t).
template <typename T>
struct TypeIdentity {
  using type = T;
};
template <typename T>
using NonDeduced = typename TypeIdentity<T>::type;

}  // namespace kmt

#endif  // KMT_CORE_TYPES_H_
