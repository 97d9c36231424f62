#include "tests/integration/model_files.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "proto/model_file.h"
#include "tests/support/random_weights.h"

namespace kmt {

namespace fs = std::filesystem;

v1::ModelFile ModelFor(uint64_t seed, const std::string& name) {
  Model<float> m = RandomSoftmaxModel<float>(kModelFileD, kModelFileK, InputScaling::kNone, seed);
  m.name = name;
  v1::ModelFile file = ModelToProto(m);
  file.set_description(absl::StrCat("seed ", seed));
  return file;
}

v1::ModelFile FittedFor(uint64_t seed, const std::string& name) {
  Matrix<float> centers(kModelFileD, kModelFileK);
  for (int j = 0; j < kModelFileK; ++j) {
    for (int l = 0; l < kModelFileD; ++l) {
      centers(l, j) = static_cast<float>((seed * 7 + j * 5 + l * 3) % 11) * 0.9f - 4.1f;
    }
  }
  const Vector<float> mean = centers.rowwise().mean();
  v1::ModelFile file =
      FittedToProto<float>(name, centers, std::vector<float>(mean.begin(), mean.end()));
  file.set_description(absl::StrCat("seed ", seed));
  file.mutable_fitted()->set_n(24);
  file.mutable_fitted()->set_iterations(static_cast<int>(seed));
  file.mutable_fitted()->set_inertia(1.25);
  file.mutable_fitted()->set_algorithm("test");
  file.mutable_provenance()->set_created("2026-01-02T03:04:05Z");
  return file;
}

std::string Bytes(uint64_t seed, const std::string& name) {
  std::string bytes;
  EXPECT_TRUE(ModelFor(seed, name).SerializeToString(&bytes));
  return bytes;
}

namespace {

void PublishFile(const fs::path& path, const v1::ModelFile& file) {
  fs::create_directories(path.parent_path());
  const absl::Status written = WriteModelFile(file, path.string());
  ASSERT_TRUE(written.ok()) << written;
}

}  // namespace

void Publish(const fs::path& path, uint64_t seed, const std::string& name) {
  PublishFile(path, ModelFor(seed, name));
}

void PublishVersion(const fs::path& dir, const std::string& name, int version,
                    const v1::ModelFile& file) {
  const fs::path staging = dir / absl::StrCat(".staging-", name, "-", version);
  PublishFile(staging / "model.kmt", file);
  fs::create_directories(dir / name);
  fs::rename(staging, dir / name / std::to_string(version));
}

void PublishVersion(const fs::path& dir, const std::string& name, int version, uint64_t seed) {
  PublishVersion(dir, name, version, ModelFor(seed, name));
}

v1::ClusterRequest ModelBatch(const std::string& model, int64_t version) {
  v1::ClusterRequest r;
  r.set_model(model);
  r.set_model_version(version);
  r.set_n(24);
  r.set_d(kModelFileD);
  r.set_k(kModelFileK);
  r.set_iterations(3);
  r.set_seed(9);
  for (int i = 0; i < 24 * kModelFileD; ++i) {
    r.add_points(static_cast<float>((i * 37) % 11) - 5.0f);
  }
  return r;
}

}  // namespace kmt
