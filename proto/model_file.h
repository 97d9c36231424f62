// Model files: a learned model is one binary-serialised kmt.v1.ModelFile.
// Conversion between that message and core models, and file reading/writing
// that says what is wrong with a file that cannot be used.
#ifndef KMT_PROTO_MODEL_FILE_H_
#define KMT_PROTO_MODEL_FILE_H_

#include <string>

#include "absl/status/statusor.h"
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
