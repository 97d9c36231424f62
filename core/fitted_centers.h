// A fitted model: k centers of d dimensions fitted to data, which a batch's
// points are assigned to as given centers. The centers are held once, in the
// precision of the fit; a batch of the other precision takes them converted
// when it is built (Centers<Scalar>), so no second copy is kept.
#ifndef KMT_CORE_FITTED_CENTERS_H_
#define KMT_CORE_FITTED_CENTERS_H_

#include <variant>
#include <vector>

#include "core/types.h"

namespace kmt {

struct FittedCenters {
  /// d x k: the centers minus the offset, in the fit's precision
  std::variant<Matrix<float>, Matrix<double>> shifted;
  /// d values subtracted from a batch's points (the centers' mean, as the
  /// estimators' predict subtracts it); empty: none
  std::variant<std::vector<float>, std::vector<double>> offset;

  int d() const {
    return std::visit([](const auto& m) { return static_cast<int>(m.rows()); }, shifted);
  }
  int k() const {
    return std::visit([](const auto& m) { return static_cast<int>(m.cols()); }, shifted);
  }
  bool float64() const { return std::holds_alternative<Matrix<double>>(shifted); }

  // The shifted centers as a batch of Scalar takes them (a copy: the batch
  // owns its given centers).
  template <typename Scalar>
  Matrix<Scalar> Centers() const {
    return std::visit([](const auto& m) -> Matrix<Scalar> { return m.template cast<Scalar>(); },
                      shifted);
  }
  template <typename Scalar>
  std::vector<Scalar> Offset() const {
    return std::visit([](const auto& v) { return std::vector<Scalar>(v.begin(), v.end()); },
                      offset);
  }
};

}  // namespace kmt

#endif  // KMT_CORE_FITTED_CENTERS_H_
