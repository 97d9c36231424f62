// Model files as an operator publishes them into a server's model
// directory, and a batch their models take: what the tests of a model
// directory changed under a running server share.
#ifndef KMT_TESTS_INTEGRATION_MODEL_FILES_H_
#define KMT_TESTS_INTEGRATION_MODEL_FILES_H_

#include <cstdint>
#include <filesystem>
#include <string>

#include "proto/kmeans_transformer.pb.h"

namespace kmt {

// The size every ModelFor model takes.
inline constexpr int kModelFileD = 2, kModelFileK = 3;

// The weights a seed names: a learned model's shape, so each seed's answers
// differ; the description says the seed.
v1::ModelFile ModelFor(uint64_t seed, const std::string& name);
// A fitted model of the same size: centers a seed names (in float32), the
// offset their mean; n, iterations and inertia recorded.
v1::ModelFile FittedFor(uint64_t seed, const std::string& name);
// Its serialised bytes.
std::string Bytes(uint64_t seed, const std::string& name);

// Publishes a file the safe way: written beside it, then renamed.
void Publish(const std::filesystem::path& path, uint64_t seed, const std::string& name);
// Publishes version `version` of `name`: the version directory filled
// aside, then renamed into place (where no directory of that version is).
void PublishVersion(const std::filesystem::path& dir, const std::string& name, int version,
                    uint64_t seed);
void PublishVersion(const std::filesystem::path& dir, const std::string& name, int version,
                    const v1::ModelFile& file);

// A batch the models of ModelFor take: 24 points, k = 3, seed 9.
v1::ClusterRequest ModelBatch(const std::string& model, int64_t version = 0);

}  // namespace kmt

#endif  // KMT_TESTS_INTEGRATION_MODEL_FILES_H_
