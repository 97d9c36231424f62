#include "io/svmlight.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kmt {
namespace {

class SvmlightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kmt-svmlight-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string File(const std::string& content) {
    const std::string path = (dir_ / "points.svm").string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  // The error reading `content` (with `d`), or "" if it reads.
  std::string ErrorOf(const std::string& content, int64_t d = 0) {
    absl::StatusOr<SvmlightFile> file = ReadSvmlight(File(content), d);
    if (file.ok()) return "";
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
    return std::string(file.status().message());
  }
  std::filesystem::path dir_;
};

TEST_F(SvmlightTest, ReadsOneBasedRowsWithCommentsQidsAndEmptyRows) {
  // libsvm's convention: indices from 1.
  const std::string path = File(
      "# a comment line\n"
      "1 qid:3 1:0.5 4:-2 # trailing comment\n"
      "\n"
      "-1\n"
      "2.5 2:1e-3 3:+0\r\n");
  absl::StatusOr<SvmlightFile> file = ReadSvmlight(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->one_based);
  EXPECT_EQ(file->rows, 3);
  EXPECT_EQ(file->cols, 4);
  EXPECT_EQ(file->indptr, (std::vector<int64_t>{0, 2, 2, 4}));
  EXPECT_EQ(file->indices, (std::vector<int32_t>{0, 3, 1, 2}));
  EXPECT_EQ(file->values, (std::vector<float>{0.5f, -2.0f, 1e-3f, 0.0f}));
}

TEST_F(SvmlightTest, AnIndexZeroMakesTheFileZeroBasedAndDWidensIt) {
  // scikit-learn's dump_svmlight_file writes zero-based indices.
  absl::StatusOr<SvmlightFile> file = ReadSvmlight(File("0 0:1 5:2\n1 3:4\n"), 10);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(file->one_based);
  EXPECT_EQ(file->cols, 10);
  EXPECT_EQ(file->indices, (std::vector<int32_t>{0, 5, 3}));
  EXPECT_EQ(IsSvmlight("a/B.SVM", ""), true);
  EXPECT_EQ(IsSvmlight("a/b.libsvm", ""), true);
  EXPECT_EQ(IsSvmlight("a/b.csv", ""), false);
  EXPECT_EQ(IsSvmlight("a/b.txt", "svmlight"), true);
  EXPECT_EQ(IsSvmlight("a/b.svm", "csv"), false);
}

TEST_F(SvmlightTest, RefusesEachMalformedLineNamingIt) {
  EXPECT_NE(ErrorOf("1 1:2\n2 3:1 2:1\n").find(":2: '2:1': index 2 is below the one before it"),
            std::string::npos);
  EXPECT_NE(ErrorOf("1 1:2 1:3\n").find(":1: '1:3': index 1 repeats the one before it"),
            std::string::npos);
  EXPECT_NE(ErrorOf("1 1:nan\n").find("'1:nan': the value is not a finite number"),
            std::string::npos);
  EXPECT_NE(ErrorOf("1 1:inf\n").find("not a finite number"), std::string::npos);
  EXPECT_NE(ErrorOf("1 1:2x\n").find("not a finite number"), std::string::npos);
  EXPECT_NE(ErrorOf("1 x:2\n").find("'x:2': the index is not an integer"), std::string::npos);
  EXPECT_NE(ErrorOf("1 -1:2\n").find("index -1 is outside [0, 2^31 - 2]"), std::string::npos);
  EXPECT_NE(ErrorOf("1 3000000000:2\n").find("is outside [0, 2^31 - 2]"), std::string::npos);
  EXPECT_NE(ErrorOf("1 12\n").find("'12' is not index:value"), std::string::npos);
  EXPECT_NE(ErrorOf("1 :2\n").find("':2' is not index:value"), std::string::npos);
  EXPECT_NE(ErrorOf("1:2 3:4\n").find("not a target"), std::string::npos);
  EXPECT_NE(ErrorOf("1 1:1 qid:2\n").find("'qid:2': the index is not an integer"),
            std::string::npos);
  EXPECT_NE(ErrorOf("1 1:1 7:1\n", 6).find("index 7 (one-based) is feature 6, outside the d = 6"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("1 1:1 6:1\n", 6), "");
  EXPECT_EQ(ReadSvmlight((dir_ / "missing.svm").string()).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kmt
