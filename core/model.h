// A k-means transformer: per layer four attention blocks over point tokens
// X = [X; Y] and center tokens C = [C; E], applied with residual connections
//   X <- X + A(X, C; theta1) + A(X, X; theta2)
//   C <- C + A(C, X; theta3) + A(C, C; theta4)
// for T layers. The centers are the first d rows of C.
#ifndef KMT_CORE_MODEL_H_
#define KMT_CORE_MODEL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/attention.h"
#include "core/embedding.h"

namespace kmt {

template <typename Scalar>
struct LayerWeights {
  AttentionBlock<Scalar> points_to_centers;   ///< theta1: points query centers
  AttentionBlock<Scalar> points_to_points;    ///< theta2: points query points
  AttentionBlock<Scalar> centers_to_points;   ///< theta3: centers query the updated points
  AttentionBlock<Scalar> centers_to_centers;  ///< theta4: centers query centers
};

template <typename Scalar>
struct Model {
  std::string name;                  ///< how the registry and logs call it
  int d = 0;                         ///< data dimensions
  int k = 0;                         ///< clusters
  Embedding embedding = Embedding::kOneHot;  ///< register layout
  /// Layer t uses layers[t % layers.size()]; a single entry is a looped model.
  std::vector<LayerWeights<Scalar>> layers;
  /// Before every layer, embed the points afresh as [X; 0] and reset the
  /// center registers to E, so only the centers carry over (learned models;
  /// iterating without it diverges). Exact constructions carry all over.
  bool reembed = false;
  /// A center whose theta3 attention has no support (no point carries its
  /// code) keeps its token, as Lloyd's keeps an empty cluster's center.
  bool keep_empty_centers = true;

  int registers() const { return RegisterDim(embedding, k); }
  int dim() const { return d + registers(); }
};

// Checks d, k and every block's shapes and parameters.
template <typename Scalar>
absl::Status ValidateModel(const Model<Scalar>& model);

}  // namespace kmt

#endif  // KMT_CORE_MODEL_H_
