#include "proto/model_file.h"

#include <cmath>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "proto/enum_names.h"
#include "proto/init_method.h"
#include "proto/raw_payload.h"

namespace kmt {
namespace {

std::string TokenSize(int dim) { return absl::StrCat("tokens have ", dim, " dimensions"); }

// A rows x cols matrix; `expected` says where the shape comes from.
template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> FromProto(const v1::MatrixProto& m, int rows, int cols,
                                         absl::string_view what, absl::string_view expected) {
  if (m.rows() != rows || m.cols() != cols ||
      m.values_size() != static_cast<int64_t>(rows) * cols) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", m.rows(), "x", m.cols(), " with ",
                                                   m.values_size(), " values; ", expected));
  }
  Matrix<Scalar> out(rows, cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) out(r, c) = static_cast<Scalar>(m.values(r * cols + c));
  }
  return out;
}

template <typename Scalar>
absl::StatusOr<Matrix<Scalar>> FromProto(const v1::MatrixProto& m, int dim,
                                         absl::string_view what) {
  return FromProto<Scalar>(m, dim, dim, what, TokenSize(dim));
}

template <typename Scalar>
absl::StatusOr<Vector<Scalar>> FromProto(const google::protobuf::RepeatedField<double>& v, int size,
                                         absl::string_view what, absl::string_view expected) {
  if (v.size() != size) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", v.size(), " values; ", expected));
  }
  Vector<Scalar> out(size);
  for (int i = 0; i < size; ++i) out[i] = static_cast<Scalar>(v[i]);
  return out;
}

template <typename Scalar>
absl::StatusOr<Vector<Scalar>> FromProto(const google::protobuf::RepeatedField<double>& v, int dim,
                                         absl::string_view what) {
  return FromProto<Scalar>(v, dim, what, TokenSize(dim));
}

template <typename Scalar>
absl::StatusOr<AttentionBlock<Scalar>> BlockFromProto(const v1::AttentionBlockProto& p, int dim,
                                                      const std::string& where) {
  AttentionBlock<Scalar> b;
  absl::StatusOr<Matrix<Scalar>> q = FromProto<Scalar>(p.q(), dim, where + " Q");
  if (!q.ok()) return q.status();
  absl::StatusOr<Matrix<Scalar>> k = FromProto<Scalar>(p.k(), dim, where + " K");
  if (!k.ok()) return k.status();
  absl::StatusOr<Matrix<Scalar>> v = FromProto<Scalar>(p.v(), dim, where + " V");
  if (!v.ok()) return v.status();
  absl::StatusOr<Vector<Scalar>> bq = FromProto<Scalar>(p.b_q(), dim, where + " b_Q");
  if (!bq.ok()) return bq.status();
  absl::StatusOr<Vector<Scalar>> bk = FromProto<Scalar>(p.b_k(), dim, where + " b_K");
  if (!bk.ok()) return bk.status();
  absl::StatusOr<Vector<Scalar>> bv = FromProto<Scalar>(p.b_v(), dim, where + " b_V");
  if (!bv.ok()) return bv.status();
  b.Q = *std::move(q);
  b.K = *std::move(k);
  b.V = *std::move(v);
  b.bQ = *std::move(bq);
  b.bK = *std::move(bk);
  b.bV = *std::move(bv);
  b.score = p.score() == v1::SCORE_DOT ? ScoreKind::kDotProduct : ScoreKind::kEuclidean;
  absl::StatusOr<Normalizer> normalizer =
      ParseNormalizer(EngineName<v1::NormalizerProto>(p.normalizer()));
  if (!normalizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has unknown normalizer ", p.normalizer()));
  }
  b.normalizer = *normalizer;
  b.beta = p.beta() == 0 ? std::numeric_limits<Scalar>::infinity() : static_cast<Scalar>(p.beta());
  b.ties = p.ties() == v1::TIES_LOWEST_INDEX ? Ties::kLowestIndex : Ties::kAverage;
  b.tau = static_cast<Scalar>(p.tau());
  return b;
}

template <typename Scalar>
absl::StatusOr<FeedForward<Scalar>> FeedForwardFromProto(const v1::FeedForwardProto& p, int dim,
                                                         const std::string& where) {
  if (p.activation() != v1::ACTIVATION_RELU_SQUARED) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has activation ", p.activation(),
                                                   "; only ReLU^2 (", v1::ACTIVATION_RELU_SQUARED,
                                                   ") is defined"));
  }
  const int hidden = p.w1().rows();
  if (hidden < 1) return absl::InvalidArgumentError(absl::StrCat(where, " has no hidden unit"));
  const std::string shape =
      absl::StrCat("expected ", hidden, " hidden units (W1's rows) and tokens of ", dim);
  FeedForward<Scalar> f;
  absl::StatusOr<Matrix<Scalar>> w1 = FromProto<Scalar>(p.w1(), hidden, dim, where + " W1", shape);
  if (!w1.ok()) return w1.status();
  absl::StatusOr<Matrix<Scalar>> w2 = FromProto<Scalar>(p.w2(), dim, hidden, where + " W2", shape);
  if (!w2.ok()) return w2.status();
  absl::StatusOr<Vector<Scalar>> b1 = FromProto<Scalar>(p.b1(), hidden, where + " b1", shape);
  if (!b1.ok()) return b1.status();
  absl::StatusOr<Vector<Scalar>> b2 = FromProto<Scalar>(p.b2(), dim, where + " b2");
  if (!b2.ok()) return b2.status();
  f.W1 = *std::move(w1);
  f.W2 = *std::move(w2);
  f.b1 = *std::move(b1);
  f.b2 = *std::move(b2);
  return f;
}

template <typename Scalar>
void ToProto(const Matrix<Scalar>& m, v1::MatrixProto* out) {
  out->set_rows(static_cast<int>(m.rows()));
  out->set_cols(static_cast<int>(m.cols()));
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    for (Eigen::Index c = 0; c < m.cols(); ++c) out->add_values(m(r, c));
  }
}

template <typename Scalar>
void ToProto(const Vector<Scalar>& v, google::protobuf::RepeatedField<double>* out) {
  for (Eigen::Index i = 0; i < v.size(); ++i) out->Add(v[i]);
}

template <typename Scalar>
void BlockToProto(const AttentionBlock<Scalar>& b, v1::AttentionBlockProto* p) {
  ToProto(b.Q, p->mutable_q());
  ToProto(b.K, p->mutable_k());
  ToProto(b.V, p->mutable_v());
  ToProto(b.bQ, p->mutable_b_q());
  ToProto(b.bK, p->mutable_b_k());
  ToProto(b.bV, p->mutable_b_v());
  p->set_score(b.score == ScoreKind::kDotProduct ? v1::SCORE_DOT : v1::SCORE_EUCLIDEAN);
  p->set_normalizer(ProtoValue<v1::NormalizerProto>(NormalizerName(b.normalizer)));
  p->set_beta(std::isinf(b.beta) ? 0.0 : static_cast<double>(b.beta));
  p->set_ties(b.ties == Ties::kLowestIndex ? v1::TIES_LOWEST_INDEX : v1::TIES_AVERAGE);
  p->set_tau(static_cast<double>(b.tau));
}

}  // namespace

template <typename Scalar>
absl::StatusOr<Model<Scalar>> ModelFromProto(const v1::ModelFile& file) {
  Model<Scalar> model;
  model.name = file.name();
  if (model.name.empty()) return absl::InvalidArgumentError("model has no name");
  if (file.has_fitted()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model.name, "' is a fitted model (k centers), not layers"));
  }
  model.d = file.d();
  model.k = file.k();
  absl::StatusOr<Embedding> embedding = ParseEmbedding(file.embedding());
  if (!embedding.ok()) return embedding.status();
  model.embedding = *embedding;
  if (model.d < 1 || model.k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has d = ", model.d, ", k = ", model.k, "; both must be at least 1"));
  }
  absl::StatusOr<InputScaling> input_scaling =
      ParseInputScaling(EngineName<v1::InputScalingProto>(file.input_scaling()));
  if (!input_scaling.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has unknown input scaling ", file.input_scaling()));
  }
  model.input_scaling = *input_scaling;
  model.reembed = file.reembed();
  model.unit_norm = file.unit_norm();
  model.norm_coordinate = file.norm_coordinate();
  model.keep_empty_centers = file.keep_empty_centers();
  model.lloyd_after = file.lloyd_after();
  for (const v1::ModelSize& size : file.padded_sizes()) {
    model.padded_sizes.push_back({.d = size.d(), .k = size.k()});
  }
  for (int init : file.trained_inits()) {
    absl::StatusOr<InitMethod> method = InitFromProto(init);
    if (!method.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model's trained_inits: ", method.status().message()));
    }
    model.trained_inits.push_back(*method);
  }
  const int dim = model.dim();
  for (int t = 0; t < file.layers_size(); ++t) {
    const v1::LayerProto& layer = file.layers(t);
    const std::string where = absl::StrCat("layer ", t, " ");
    LayerWeights<Scalar> w;
    const v1::AttentionBlockProto* blocks[] = {
        &layer.points_to_centers(), &layer.points_to_points(), &layer.centers_to_points(),
        &layer.centers_to_centers()};
    for (BlockId id : kBlockIds) {
      absl::StatusOr<AttentionBlock<Scalar>> block = BlockFromProto<Scalar>(
          *blocks[static_cast<int>(id)], dim, where + std::string(BlockName(id)));
      if (!block.ok()) return block.status();
      w[id] = *std::move(block);
    }
    for (int s = 0; s < layer.center_steps_size(); ++s) {
      const std::string step = absl::StrCat(where, "center step ", s, " ");
      absl::StatusOr<AttentionBlock<Scalar>> to_points =
          BlockFromProto<Scalar>(layer.center_steps(s).to_points(), dim, step + "to_points");
      if (!to_points.ok()) return to_points.status();
      absl::StatusOr<AttentionBlock<Scalar>> to_centers =
          BlockFromProto<Scalar>(layer.center_steps(s).to_centers(), dim, step + "to_centers");
      if (!to_centers.ok()) return to_centers.status();
      w.center_steps.push_back({*std::move(to_points), *std::move(to_centers)});
    }
    if (layer.has_center_feed_forward()) {
      absl::StatusOr<FeedForward<Scalar>> ffn =
          FeedForwardFromProto<Scalar>(layer.center_feed_forward(), dim, where + "feed-forward");
      if (!ffn.ok()) return ffn.status();
      w.center_feed_forward = *std::move(ffn);
    }
    model.layers.push_back(std::move(w));
  }
  if (absl::Status s = ValidateModel(model); !s.ok()) return s;
  return model;
}

template <typename Scalar>
v1::ModelFile ModelToProto(const Model<Scalar>& model) {
  v1::ModelFile file;
  file.set_name(model.name);
  file.set_d(model.d);
  file.set_k(model.k);
  file.set_embedding(std::string(EmbeddingName(model.embedding)));
  file.set_input_scaling(ProtoValue<v1::InputScalingProto>(InputScalingName(model.input_scaling)));
  file.set_reembed(model.reembed);
  file.set_unit_norm(model.unit_norm);
  file.set_norm_coordinate(model.norm_coordinate);
  file.set_keep_empty_centers(model.keep_empty_centers);
  file.set_lloyd_after(model.lloyd_after);
  for (const ModelSize& size : model.padded_sizes) {
    v1::ModelSize* out = file.add_padded_sizes();
    out->set_d(size.d);
    out->set_k(size.k);
  }
  for (InitMethod method : model.trained_inits) file.add_trained_inits(InitToProto(method));
  for (const LayerWeights<Scalar>& w : model.layers) {
    v1::LayerProto* layer = file.add_layers();
    BlockToProto(w[BlockId::kPointsToCenters], layer->mutable_points_to_centers());
    BlockToProto(w[BlockId::kPointsToPoints], layer->mutable_points_to_points());
    BlockToProto(w[BlockId::kCentersToPoints], layer->mutable_centers_to_points());
    BlockToProto(w[BlockId::kCentersToCenters], layer->mutable_centers_to_centers());
    for (const CenterStep<Scalar>& step : w.center_steps) {
      v1::CenterStepProto* out = layer->add_center_steps();
      BlockToProto(step.to_points, out->mutable_to_points());
      BlockToProto(step.to_centers, out->mutable_to_centers());
    }
    if (const auto& ffn = w.center_feed_forward; ffn) {
      v1::FeedForwardProto* out = layer->mutable_center_feed_forward();
      ToProto(ffn->W1, out->mutable_w1());
      ToProto(ffn->b1, out->mutable_b1());
      ToProto(ffn->W2, out->mutable_w2());
      ToProto(ffn->b2, out->mutable_b2());
      out->set_activation(v1::ACTIVATION_RELU_SQUARED);
    }
  }
  return file;
}

namespace {

// The fitted model's values in Scalar: centers shifted by the offset.
template <typename Scalar>
absl::StatusOr<FittedCenters> FittedAs(const v1::ModelFile& file) {
  const v1::FittedCenters& f = file.fitted();
  const RawType type = kRawTypeOf<Scalar>;
  absl::StatusOr<Matrix<Scalar>> centers =
      RawMatrix<Scalar>({"fitted.centers", "k", file.k(), "d", file.d()}, 0, f.centers(), type);
  if (!centers.ok()) return centers.status();
  std::vector<Scalar> offset;
  if (!f.offset().empty()) {
    absl::StatusOr<std::vector<Scalar>> read =
        RawVector<Scalar>({"fitted.offset", "d", file.d(), "", 1}, 0, f.offset(), type);
    if (!read.ok()) return read.status();
    offset = *std::move(read);
  }
  for (int l = 0; l < file.d(); ++l) {
    if (!offset.empty() && !std::isfinite(offset[l])) {
      return absl::InvalidArgumentError(
          absl::StrCat("fitted.offset[", l, "] is ", offset[l], "; it must be finite"));
    }
    for (int j = 0; j < file.k(); ++j) {
      const Scalar value = (*centers)(l, j);
      if (!std::isfinite(value)) {
        return absl::InvalidArgumentError(absl::StrCat("fitted.centers[", j, "][", l, "] is ",
                                                       value, "; every center must be finite"));
      }
      if (!offset.empty()) {
        // Subtracted here once, as a request that sends the shifted centers
        // would have them.
        (*centers)(l, j) = value - offset[l];
        if (!std::isfinite((*centers)(l, j))) {
          return absl::InvalidArgumentError(absl::StrCat(
              "fitted.centers[", j, "][", l, "] minus fitted.offset[", l, "] overflows"));
        }
      }
    }
  }
  return FittedCenters{.shifted = *std::move(centers), .offset = std::move(offset)};
}

}  // namespace

absl::StatusOr<FittedCenters> FittedFromProto(const v1::ModelFile& file) {
  if (file.name().empty()) return absl::InvalidArgumentError("model has no name");
  if (!file.has_fitted()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", file.name(), "' is not a fitted model (fitted is unset)"));
  }
  if (file.d() < 1 || file.k() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fitted model has d = ", file.d(), ", k = ", file.k(), "; both must be at least 1"));
  }
  if (file.layers_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fitted model has ", file.layers_size(), " layers; a fitted model has none"));
  }
  const v1::FittedCenters& f = file.fitted();
  if (f.n() < 0 || f.iterations() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("fitted.n = ", f.n(), ", fitted.iterations = ",
                                                   f.iterations(), "; neither may be negative"));
  }
  if (!std::isfinite(f.inertia()) || f.inertia() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fitted.inertia is ", f.inertia(), "; it must be finite and not negative"));
  }
  switch (f.precision()) {
    case v1::FittedCenters::PRECISION_FLOAT32:
      return FittedAs<float>(file);
    case v1::FittedCenters::PRECISION_FLOAT64:
      return FittedAs<double>(file);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("fitted.precision is ", f.precision(),
                       "; it must be PRECISION_FLOAT32 (1) or PRECISION_FLOAT64 (2)"));
  }
}

template <typename Scalar>
v1::ModelFile FittedToProto(const std::string& name, const Matrix<Scalar>& centers,
                            const std::vector<Scalar>& offset) {
  v1::ModelFile file;
  file.set_name(name);
  file.set_d(static_cast<int>(centers.rows()));
  file.set_k(static_cast<int>(centers.cols()));
  v1::FittedCenters* f = file.mutable_fitted();
  // A d x k matrix is its k x d row-major values.
  const absl::Span<const Scalar> values(centers.data(), centers.size());
  if constexpr (std::is_same_v<Scalar, double>) {
    f->set_precision(v1::FittedCenters::PRECISION_FLOAT64);
    EncodeFloat64(values, f->mutable_centers());
    if (!offset.empty()) EncodeFloat64(offset, f->mutable_offset());
  } else {
    f->set_precision(v1::FittedCenters::PRECISION_FLOAT32);
    EncodeFloat32(values, f->mutable_centers());
    if (!offset.empty()) EncodeFloat32(offset, f->mutable_offset());
  }
  return file;
}

template v1::ModelFile FittedToProto<float>(const std::string&, const Matrix<float>&,
                                            const std::vector<float>&);
template v1::ModelFile FittedToProto<double>(const std::string&, const Matrix<double>&,
                                             const std::vector<double>&);

absl::Status ReadMessage(const std::string& path, google::protobuf::Message* message) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  if (!message->ParseFromIstream(&in)) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a ", message->GetTypeName(), " (protobuf parse failed)"));
  }
  return absl::OkStatus();
}

absl::Status WriteMessage(const google::protobuf::Message& message, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !message.SerializeToOstream(&out)) {
      return absl::InternalError(absl::StrCat("cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ModelFile> ReadModelFile(const std::string& path) {
  v1::ModelFile file;
  if (absl::Status s = ReadMessage(path, &file); !s.ok()) return s;
  return file;
}

absl::Status WriteModelFile(const v1::ModelFile& file, const std::string& path) {
  return WriteMessage(file, path);
}

template <typename Scalar>
absl::StatusOr<Model<Scalar>> ReadModel(const std::string& path) {
  absl::StatusOr<v1::ModelFile> file = ReadModelFile(path);
  if (!file.ok()) return file.status();
  return ModelFromProto<Scalar>(*file);
}

template absl::StatusOr<Model<float>> ReadModel<float>(const std::string&);
template absl::StatusOr<Model<double>> ReadModel<double>(const std::string&);
template absl::StatusOr<Model<float>> ModelFromProto<float>(const v1::ModelFile&);
template absl::StatusOr<Model<double>> ModelFromProto<double>(const v1::ModelFile&);
template v1::ModelFile ModelToProto<float>(const Model<float>&);
template v1::ModelFile ModelToProto<double>(const Model<double>&);

}  // namespace kmt
