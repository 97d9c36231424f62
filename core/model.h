// A k-means transformer: per layer four attention blocks over point tokens
// X = [X; Y] and center tokens C = [C; E], applied with residual connections
//   X <- X + A(X, C; theta1) + A(X, X; theta2)
//   C <- C + A(C, X; theta3) + A(C, C; theta4)
// for T layers. The centers are the first d rows of C.
#ifndef KMT_CORE_MODEL_H_
#define KMT_CORE_MODEL_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/attention.h"
#include "core/embedding.h"
#include "core/feed_forward.h"
#include "core/init.h"
#include "core/input_scaling.h"

namespace kmt {

// The four attention blocks of a layer, in the order they run.
enum class BlockId {
  kPointsToCenters,   ///< theta1: points query centers
  kPointsToPoints,    ///< theta2: points query points
  kCentersToPoints,   ///< theta3: centers query the updated points
  kCentersToCenters,  ///< theta4: centers query centers
};
inline constexpr std::array<BlockId, 4> kBlockIds = {
    BlockId::kPointsToCenters, BlockId::kPointsToPoints, BlockId::kCentersToPoints,
    BlockId::kCentersToCenters};

// "theta1" ... "theta4", as errors and model files name the blocks.
absl::string_view BlockName(BlockId id);

// A further update of the center tokens after theta3 and theta4, with the
// same residual form: C <- C + A(C, X; to_points) + A(C, C; to_centers).
// Randomized k-medoids draws each center among its cluster's points with one.
template <typename Scalar>
struct CenterStep {
  AttentionBlock<Scalar> to_points;   ///< centers query the updated points
  AttentionBlock<Scalar> to_centers;  ///< centers query centers (removes the old value)
};

template <typename Scalar>
struct LayerWeights {
  std::array<AttentionBlock<Scalar>, 4> blocks;  ///< indexed by BlockId
  std::vector<CenterStep<Scalar>> center_steps;  ///< after theta4, in order; usually none
  /// On the center tokens after the center steps (residual): the dot-product
  /// Lloyd circuit recomputes the new centers' squared norms with it.
  std::optional<FeedForward<Scalar>> center_feed_forward;

  AttentionBlock<Scalar>& operator[](BlockId id) { return blocks[static_cast<int>(id)]; }
  const AttentionBlock<Scalar>& operator[](BlockId id) const {
    return blocks[static_cast<int>(id)];
  }
};

// A batch size a model serves: d dimensions, k clusters.
struct ModelSize {
  int d = 0;  ///< dimensions; default 0
  int k = 0;  ///< clusters; default 0
  friend bool operator==(const ModelSize& a, const ModelSize& b) {
    return a.d == b.d && a.k == b.k;
  }
};

template <typename Scalar>
struct Model {
  std::string name;                          ///< how the registry and logs call it
  int d = 0;                                 ///< data dimensions
  int k = 0;                                 ///< clusters
  Embedding embedding = Embedding::kOneHot;  ///< register layout
  /// Layer t uses layers[t % layers.size()]; a single entry is a looped model.
  std::vector<LayerWeights<Scalar>> layers;
  /// Before every layer, embed the points afresh as [X; 0] and reset the
  /// center registers to E, so only the centers carry over (learned models;
  /// iterating without it diverges). Exact constructions carry all over.
  bool reembed = false;
  /// How a caller's points are mapped before the layers (input_scaling.h).
  InputScaling input_scaling = InputScaling::kNone;
  /// A norm layer on the data coordinates: point tokens scaled to unit norm
  /// at embedding and center tokens after every update (spherical k-means).
  /// A token of norm 0 is left as it is (the engine refuses such points for
  /// spherical k-means before any layer).
  bool unit_norm = false;
  /// Tokens end with one more coordinate: the squared norm of their data
  /// coordinates, set at embedding for points and centers (paper A's
  /// Theorem 2.2: dot-product scores <x, c> - ||c||^2 / 2 order centers as
  /// the distances do). Layers that move the centers must keep it up to date.
  bool norm_coordinate = false;
  /// A center whose theta3 attention has no support (no point carries its
  /// code) keeps its token, as Lloyd's keeps an empty cluster's center.
  bool keep_empty_centers = true;
  /// Learned models: the initialisations they were trained from, distinct,
  /// the one a request gets by default first. Empty: any (the exact
  /// constructions, and model files that do not say).
  std::vector<InitMethod> trained_inits;
  /// Layers from this index on are exact Lloyd's steps (assignment to the
  /// nearest center, then the means, in the model's units) instead of the
  /// model's own: the learned steps move the centers, Lloyd's settles them in
  /// a local optimum of the caller's objective. 0: the model's layers only.
  int lloyd_after = 0;
  /// The guarded form of a learned model: each of its own layers also takes
  /// one exact Lloyd's step from the centers the layer starts from, and
  /// keeps whichever of the two gives the lower k-means objective of the
  /// caller's points (ties: the learned step), so that the objective never
  /// increases from layer to layer. Not stored in model files: the engine
  /// runs any learned model guarded on request.
  bool guard = false;
  /// Smaller batch sizes the weights also serve, by padding (padding.h):
  /// those where the padded model was measured ahead of Lloyd's. Empty: its
  /// own d and k only.
  std::vector<ModelSize> padded_sizes;

  int registers() const { return RegisterDim(embedding, k); }
  /// Tokens are [data (d); registers; squared norm (if norm_coordinate)].
  int dim() const { return d + registers() + (norm_coordinate ? 1 : 0); }
};

// Checks d, k and every block's shapes and parameters.
template <typename Scalar>
absl::Status ValidateModel(const Model<Scalar>& model);

}  // namespace kmt

#endif  // KMT_CORE_MODEL_H_
