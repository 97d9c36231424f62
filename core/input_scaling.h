// How a model sees a caller's points. A learned model was trained on tasks
// in [0, 1]^d and is served through a map onto that box: the batch is mapped
// before the layers, and the centers are mapped back, so labels, centers and
// objectives are reported in the caller's units. The global map (paper B's
// appendix D) translates and scales every dimension alike, so the caller's
// k-means problem is the model's, up to a translation and a uniform scale;
// the per-dimension map stretches each axis to [0, 1] and changes it.
#ifndef KMT_CORE_INPUT_SCALING_H_
#define KMT_CORE_INPUT_SCALING_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

enum class InputScaling {
  kNone,    ///< the points as they are
  kMinMax,  ///< per dimension, (x - min) / (max - min) over the batch; a constant dimension maps to
            ///< 0
  kGlobalMinMax,  ///< (x - min) / r: min per dimension, r the largest of the dimensions' ranges
};

absl::string_view InputScalingName(InputScaling scaling);
absl::StatusOr<InputScaling> ParseInputScaling(absl::string_view name);

// The affine map x -> (x - offset) * inverse_scale a scaling defines for one
// batch of points (d x n), and its inverse.
template <typename Scalar>
class InputMap {
 public:
  InputMap(InputScaling scaling, const Matrix<Scalar>& points);

  bool identity() const { return identity_; }
  // Caller's units to the model's (points or centers, d x anything).
  Matrix<Scalar> ToModel(const Matrix<Scalar>& m) const;
  // The model's units back to the caller's.
  Matrix<Scalar> ToCaller(const Matrix<Scalar>& m) const;

 private:
  bool identity_ = true;
  Vector<Scalar> offset_, scale_, inverse_scale_;
};

}  // namespace kmt

#endif  // KMT_CORE_INPUT_SCALING_H_
