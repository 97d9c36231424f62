// Exact constructions: weights under which every layer of the transformer is
// one iteration of Lloyd's algorithm (paper A Theorem 2.1 with one-hot
// registers, paper B Theorem 2.1 with binary ones). theta1 writes the code of
// the nearest center into each point's registers, theta2 removes the old code,
// theta3 averages the points carrying a center's code, theta4 removes the old
// center.
#ifndef KMT_CORE_CONSTRUCTIONS_H_
#define KMT_CORE_CONSTRUCTIONS_H_

#include <limits>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model.h"

namespace kmt {

// How theta3 turns code matches into the cluster mean.
enum class Theta3Form {
  kHardmax,  ///< hardmax on code distances -||e_j - y_i||^2 (paper B); any embedding with registers
  kLinear,   ///< linear attention <e_j, y_i> / sum_i <e_j, y_i> (paper A); one-hot only
};

absl::string_view Theta3FormName(Theta3Form form);
absl::StatusOr<Theta3Form> ParseTheta3Form(absl::string_view name);

struct LloydOptions {
  Embedding embedding = Embedding::kOneHot;  ///< onehot or binary
  Theta3Form theta3 = Theta3Form::kHardmax;  ///< center update form
  /// theta1's inverse temperature: infinity is hardmax (exact Lloyd's), a
  /// finite value is softmax with that beta (paper A validated 1e4).
  double beta = std::numeric_limits<double>::infinity();
  /// How theta1 and theta2 score: Euclidean (paper A Theorem 2.1), or dot
  /// products over tokens that carry their squared norm (paper A Theorem
  /// 2.2: <x, c> - ||c||^2 / 2 ranks the centers as the distances do, and a
  /// ReLU^2 feed-forward block recomputes ||c||^2 after each update). The
  /// dot-product circuit has one-hot registers and a linear theta3, so that
  /// every block scores by dot products.
  ScoreKind score = ScoreKind::kEuclidean;
};

// Whether a construction exists for d, k and these options, and if not why.
absl::Status ValidateLloydOptions(int d, int k, const LloydOptions& options);

// The registry name of a construction:
// lloyd-<embedding>[-linear | -dot][-softmax].
std::string LloydModelName(const LloydOptions& options);

// The looped one-layer model for any d >= 1, k >= 1.
template <typename Scalar>
absl::StatusOr<Model<Scalar>> LloydConstruction(int d, int k, const LloydOptions& options);

// If the model's weights are exactly a Lloyd construction with hardmax
// assignment (either score), its theta3 form; the fast path runs exactly
// those models.
template <typename Scalar>
std::optional<Theta3Form> MatchLloyd(const Model<Scalar>& model);

}  // namespace kmt

#endif  // KMT_CORE_CONSTRUCTIONS_H_
