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

std::string Bytes(uint64_t seed, const std::string& name) {
  std::string bytes;
  EXPECT_TRUE(ModelFor(seed, name).SerializeToString(&bytes));
  return bytes;
}

void Publish(const fs::path& path, uint64_t seed, const std::string& name) {
  fs::create_directories(path.parent_path());
  const absl::Status written = WriteModelFile(ModelFor(seed, name), path.string());
  ASSERT_TRUE(written.ok()) << written;
}

void PublishVersion(const fs::path& dir, const std::string& name, int version, uint64_t seed) {
  const fs::path staging = dir / absl::StrCat(".staging-", name, "-", version);
  Publish(staging / "model.kmt", seed, name);
  fs::create_directories(dir / name);
  fs::rename(staging, dir / name / std::to_string(version));
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
