#include "core/padding.h"

#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/validation.h"

namespace kmt {

template <typename Scalar>
Matrix<Scalar> PadRows(const Matrix<Scalar>& x, int rows) {
  Matrix<Scalar> padded = Matrix<Scalar>::Zero(rows, x.cols());
  padded.topRows(x.rows()) = x;
  return padded;
}

template <typename Scalar>
absl::Status CheckPaddable(const Model<Scalar>& model, int d, int k) {
  if (d < 1 || d > model.d || k < 1 || k > model.k) {
    return absl::InvalidArgumentError(absl::StrCat("model ", model.name, " runs d <= ", model.d,
                                                   " and k <= ", model.k,
                                                   " by padding; got d = ", d, ", k = ", k));
  }
  if (!model.reembed && (d < model.d || k < model.k)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", model.name,
                     " carries its registers over from layer to layer and cannot be padded"));
  }
  return absl::OkStatus();
}

template <typename Scalar>
void Unpad(const Matrix<Scalar>& points, int d, RunResult<Scalar>* result) {
  result->centers = Matrix<Scalar>(result->centers.topRows(d));
  for (LayerRecord<Scalar>& record : result->trajectory) {
    record.centers = Matrix<Scalar>(record.centers.topRows(d));
  }
  ClusterSums* sums = nullptr;
  if (result->cluster_sums) {
    sums = &result->cluster_sums.emplace(d, static_cast<int>(result->centers.cols()));
  }
  result->objective = AssignNearest(points, result->centers, &result->labels, nullptr, sums);
  if (!result->layer_objectives.empty()) result->layer_objectives.back() = result->objective;
}

template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> RunPadded(const Model<Scalar>& model,
                                            const Matrix<Scalar>& points,
                                            const Matrix<Scalar>& initial_centers,
                                            const RunOptions& options) {
  if (absl::Status s = ValidateModel(model); !s.ok()) return s;
  const int d = static_cast<int>(points.rows()), k = static_cast<int>(initial_centers.cols());
  if (absl::Status s = CheckPaddable(model, d, k); !s.ok()) return s;
  if (absl::Status s = ValidateCenters(points, initial_centers); !s.ok()) return s;
  if (d == model.d && k == model.k) return RunTransformer(model, points, initial_centers, options);
  if (options.layers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers = ", options.layers, ", must not be negative"));
  }
  const Matrix<Scalar> padded = PadRows(points, model.d);
  const InputMap<Scalar> map(model.input_scaling, padded);
  const Matrix<Scalar> mapped = map.ToModel(padded);
  absl::StatusOr<RunResult<Scalar>> run = Evaluate<Scalar>(
      {.weights = &model, .embedding = model.embedding, .k = k, .data_dims = d}, padded, mapped,
      map, map.ToModel(PadRows(initial_centers, model.d)), options);
  if (run.ok()) Unpad(points, d, &*run);
  return run;
}

#define KMT_INSTANTIATE(S)                                                              \
  template Matrix<S> PadRows<S>(const Matrix<S>&, int);                                 \
  template absl::Status CheckPaddable<S>(const Model<S>&, int, int);                    \
  template void Unpad<S>(const Matrix<S>&, int, RunResult<S>*);                         \
  template absl::StatusOr<RunResult<S>> RunPadded<S>(const Model<S>&, const Matrix<S>&, \
                                                     const Matrix<S>&, const RunOptions&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
