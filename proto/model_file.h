// Model files: a learned model is one binary-serialised kmt.v1.ModelFile.
// Conversion between that message and core models, and file reading/writing
// that says what is wrong with a file that cannot be used.
#ifndef KMT_PROTO_MODEL_FILE_H_
#define KMT_PROTO_MODEL_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/fitted_centers.h"
#include "core/model.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

// The model described by a file's message, its input scaling included,
// validated (shapes, values).
template <typename Scalar>
absl::StatusOr<Model<Scalar>> ModelFromProto(const v1::ModelFile& file);

// The message for a model; description and provenance are left for the
// caller.
template <typename Scalar>
v1::ModelFile ModelToProto(const Model<Scalar>& model);

// A fitted model's file (ModelFile.fitted set): its centers minus its
// offset, validated (a name, d and k at least 1, no layers, a precision, the
// byte counts of k*d centers and of d or no offset values, every value and
// every shifted center finite, n, iterations and inertia not negative);
// INVALID_ARGUMENT naming the field otherwise.
absl::StatusOr<FittedCenters> FittedFromProto(const v1::ModelFile& file);

// A fitted model's file for `centers` (d x k) and `offset` (d values or
// none), in Scalar's precision: name, d, k and fitted's precision, centers
// and offset set; the provenance and fitted's other fields are the
// caller's.
template <typename Scalar>
v1::ModelFile FittedToProto(const std::string& name, const Matrix<Scalar>& centers,
                            const std::vector<Scalar>& offset);

// A binary protobuf message from or to a file; writing goes through a
// temporary file renamed into place, so readers never see half a file.
absl::Status ReadMessage(const std::string& path, google::protobuf::Message* message);
absl::Status WriteMessage(const google::protobuf::Message& message, const std::string& path);

absl::StatusOr<v1::ModelFile> ReadModelFile(const std::string& path);
// The model a file describes: ReadModelFile, then ModelFromProto.
template <typename Scalar>
absl::StatusOr<Model<Scalar>> ReadModel(const std::string& path);
absl::Status WriteModelFile(const v1::ModelFile& file, const std::string& path);

}  // namespace kmt

#endif  // KMT_PROTO_MODEL_FILE_H_
