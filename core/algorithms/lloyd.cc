// Lloyd's algorithm: each center the mean of its cluster, an empty cluster
// keeping its center. Served on each exact circuit of paper A (one-hot
// registers, Theorem 2.1; dot-product attention, Theorem 2.2) and paper B
// (binary registers).
#include "core/algorithms/homes.h"

namespace kmt {
namespace {

class Lloyd final : public Algorithm {
 public:
  Lloyd()
      : Algorithm({
            .name = "lloyd",
            .description = "Lloyd's algorithm: each center the mean of its cluster",
            .served = {{.options = {.embedding = Embedding::kOneHot},
                        .description =
                            "Lloyd's algorithm, one-hot registers (d + k per token), hardmax "
                            "center update; any d and k"},
                       {.options = {.embedding = Embedding::kBinary},
                        .description = "Lloyd's algorithm, binary registers (d + ceil(log2 k) per "
                                       "token); any d and k"},
                       {.options = {.embedding = Embedding::kOneHot,
                                    .theta3 = Theta3Form::kLinear,
                                    .score = ScoreKind::kDotProduct},
                        .description =
                            "Lloyd's algorithm as paper A's Theorem 2.2 circuit: dot-product "
                            "attention over tokens carrying their squared norm (d + k + 1 "
                            "per token), a ReLU^2 feed-forward block recomputing the "
                            "centers' norms; any d and k"}},
            .reference = "ReferenceLloyd (reference/lloyd.h)",
            .unread_hint = "a softmax assignment is soft-kmeans, or lloyd-onehot-linear with beta",
            .weighted = true,
            .translation_invariant = true,
            .lloyd_at_defaults = true,
        }) {}

  bool UpdatesFromSums() const override { return true; }
};

}  // namespace

const Algorithm& LloydAlgorithm() {
  static const Lloyd lloyd;
  return lloyd;
}

}  // namespace kmt
