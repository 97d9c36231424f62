// Token embeddings: a point token is [x; y] with y = 0 at embedding, a center
// token is [c; e_j] where e_j is cluster j's code in m register dimensions.
#ifndef KMT_CORE_EMBEDDING_H_
#define KMT_CORE_EMBEDDING_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"

namespace kmt {

enum class Embedding {
  kOneHot,  ///< m = k, e_j = j-th unit vector (paper A)
  kBinary,  ///< m = ceil(log2 k), e_j = bits of j, least significant first (paper B)
  kNone,    ///< m = 0: no registers (the ablation)
};

absl::string_view EmbeddingName(Embedding embedding);
absl::StatusOr<Embedding> ParseEmbedding(absl::string_view name);

// Number of register dimensions m for k clusters.
int RegisterDim(Embedding embedding, int k);

// The center registers E (m x k): column j is cluster j's code.
template <typename Scalar>
Matrix<Scalar> CenterRegisters(Embedding embedding, int k);

// Embeds points (d x n) as [X; 0] and centers (d x k) as [C; E]; with
// `norm_coordinate`, each token ends with its columns' squared norm.
template <typename Scalar>
Matrix<Scalar> EmbedPoints(const Matrix<Scalar>& points, int m, bool norm_coordinate = false);
template <typename Scalar>
Matrix<Scalar> EmbedCenters(const Matrix<Scalar>& centers, Embedding embedding,
                            bool norm_coordinate = false);
// The centers as the first centers.cols() clusters of a layout for
// `clusters` >= centers.cols(): their codes are the first columns of
// CenterRegisters(embedding, clusters), m = RegisterDim(embedding, clusters).
// A model of k clusters runs fewer centers so, as if the others were masked.
template <typename Scalar>
Matrix<Scalar> EmbedCentersOf(const Matrix<Scalar>& centers, Embedding embedding, int clusters,
                              bool norm_coordinate = false);

}  // namespace kmt

#endif  // KMT_CORE_EMBEDDING_H_
