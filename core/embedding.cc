#include "core/embedding.h"

#include "absl/strings/str_cat.h"
#include "core/distances.h"

namespace kmt {

absl::string_view EmbeddingName(Embedding embedding) {
  switch (embedding) {
    case Embedding::kOneHot:
      return "onehot";
    case Embedding::kBinary:
      return "binary";
    case Embedding::kNone:
      return "none";
  }
  return "unknown";
}

absl::StatusOr<Embedding> ParseEmbedding(absl::string_view name) {
  for (Embedding e : {Embedding::kOneHot, Embedding::kBinary, Embedding::kNone}) {
    if (name == EmbeddingName(e)) return e;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown embedding '", name, "', expected onehot, binary or none"));
}

int RegisterDim(Embedding embedding, int k) {
  switch (embedding) {
    case Embedding::kOneHot:
      return k;
    case Embedding::kBinary: {
      int bits = 0;
      while ((int64_t{1} << bits) < k) ++bits;
      return bits;
    }
    case Embedding::kNone:
      return 0;
  }
  return 0;
}

template <typename Scalar>
Matrix<Scalar> CenterRegisters(Embedding embedding, int k) {
  const int m = RegisterDim(embedding, k);
  Matrix<Scalar> e = Matrix<Scalar>::Zero(m, k);
  for (int j = 0; j < k; ++j) {
    if (embedding == Embedding::kOneHot) {
      e(j, j) = 1;
    } else if (embedding == Embedding::kBinary) {
      for (int b = 0; b < m; ++b) e(b, j) = (j >> b) & 1;
    }
  }
  return e;
}

namespace {

// Tokens [data; registers; squared norm of the data (if asked)].
template <typename Scalar>
Matrix<Scalar> Tokens(const Matrix<Scalar>& data, const Matrix<Scalar>& registers,
                      bool norm_coordinate) {
  const Eigen::Index d = data.rows(), m = registers.rows();
  Matrix<Scalar> tokens(d + m + (norm_coordinate ? 1 : 0), data.cols());
  tokens.topRows(d) = data;
  tokens.middleRows(d, m) = registers;
  if (norm_coordinate) tokens.bottomRows(1) = SquaredNorms<Scalar>(data).transpose();
  return tokens;
}

}  // namespace

template <typename Scalar>
Matrix<Scalar> EmbedPoints(const Matrix<Scalar>& points, int m, bool norm_coordinate) {
  return Tokens<Scalar>(points, Matrix<Scalar>::Zero(m, points.cols()), norm_coordinate);
}

template <typename Scalar>
Matrix<Scalar> EmbedCenters(const Matrix<Scalar>& centers, Embedding embedding,
                            bool norm_coordinate) {
  return EmbedCentersOf(centers, embedding, static_cast<int>(centers.cols()), norm_coordinate);
}

template <typename Scalar>
Matrix<Scalar> EmbedCentersOf(const Matrix<Scalar>& centers, Embedding embedding, int clusters,
                              bool norm_coordinate) {
  const Matrix<Scalar> codes =
      CenterRegisters<Scalar>(embedding, clusters).leftCols(centers.cols());
  return Tokens<Scalar>(centers, codes, norm_coordinate);
}

#define KMT_INSTANTIATE(S)                                               \
  template Matrix<S> CenterRegisters<S>(Embedding, int);                 \
  template Matrix<S> EmbedPoints<S>(const Matrix<S>&, int, bool);        \
  template Matrix<S> EmbedCenters<S>(const Matrix<S>&, Embedding, bool); \
  template Matrix<S> EmbedCentersOf<S>(const Matrix<S>&, Embedding, int, bool);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
