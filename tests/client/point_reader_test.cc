#include "client/point_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kmt {
namespace {

class PointReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kmt-point-reader-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string File(const std::string& name, const std::string& content) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(PointReaderTest, CsvWithHeaderInBatchesAndAgainAfterRewind) {
  const std::string path = File("p.csv", "x,y\n1,2\n3 4\n5,6\n");
  absl::StatusOr<std::unique_ptr<PointReader>> reader = PointReader::Open(path, "", 0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->d(), 2);
  std::vector<float> values;
  EXPECT_EQ(*(*reader)->Read(2, &values), 2);
  EXPECT_EQ(*(*reader)->Read(2, &values), 1);
  EXPECT_EQ(*(*reader)->Read(2, &values), 0);
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE((*reader)->Rewind().ok());
  values.clear();
  EXPECT_EQ(*(*reader)->Read(10, &values), 3);
  EXPECT_EQ(values.size(), 6u);
}

TEST_F(PointReaderTest, Float32RowMajor) {
  const float data[] = {1.5f, -2, 3, 4, 5, 6};
  const std::string path =
      File("p.f32", std::string(reinterpret_cast<const char*>(data), sizeof(data)));
  absl::StatusOr<std::unique_ptr<PointReader>> reader = PointReader::Open(path, "", 3);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> values;
  EXPECT_EQ(*(*reader)->Read(5, &values), 2);
  EXPECT_EQ(values, (std::vector<float>(std::begin(data), std::end(data))));
}

TEST_F(PointReaderTest, BadFilesSayWhatIsWrong) {
  EXPECT_EQ(PointReader::Open((dir_ / "missing.csv").string(), "", 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(PointReader::Open(File("p.f32", "abcd"), "", 0).status().message(),
            "a float32 file needs --d");
  absl::StatusOr<std::unique_ptr<PointReader>> ragged =
      PointReader::Open(File("r.csv", "1,2\n3\n"), "", 0);
  ASSERT_TRUE(ragged.ok()) << ragged.status();
  std::vector<float> values;
  const absl::StatusOr<int64_t> read = (*ragged)->Read(10, &values);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(read.status().message().find("line 2"), std::string::npos) << read.status();
}

}  // namespace
}  // namespace kmt
