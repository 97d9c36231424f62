// A user's dataset: row ranges as the tools take them (either end optional,
// empty and out-of-file ranges refused), an .npy file read as d x N points,
// and the rows a range names.
#include "learn/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "io/npy.h"

namespace kmt {
namespace {

TEST(Dataset, ARowRangeNamesRowsAToBMinusOne) {
  const RowRange both = *ParseRowRange("3:7", 10);
  EXPECT_EQ(both.first, 3);
  EXPECT_EQ(both.end, 7);
  EXPECT_EQ(RowRangeName(both), "3:7");
  EXPECT_EQ(ParseRowRange("4:", 10)->first, 4);
  EXPECT_EQ(ParseRowRange("4:", 10)->end, 10);
  EXPECT_EQ(ParseRowRange(":6", 10)->first, 0);
  EXPECT_EQ(ParseRowRange(":6", 10)->end, 6);
  EXPECT_EQ(ParseRowRange("", 10)->end, 10);
  EXPECT_EQ(ParseRowRange("0:10", 10)->end, 10);
}

TEST(Dataset, ARowRangeOutsideTheFileOrEmptyIsRefused) {
  for (const char* bad : {"5", "a:b", "3:3", "7:3", "0:11", "-1:4", "10:", ":0"}) {
    const absl::StatusOr<RowRange> range = ParseRowRange(bad, 10);
    EXPECT_FALSE(range.ok()) << bad;
    EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(Dataset, AnNpyFileIsReadAsColumnsAndARangeKeepsItsRows) {
  // 5 points of d = 3, point i = (i, 10 i, 100 i).
  std::vector<float> values;
  for (int i = 0; i < 5; ++i) {
    for (float scale : {1.0f, 10.0f, 100.0f}) values.push_back(scale * static_cast<float>(i));
  }
  const std::string path =
      ::testing::TempDir() + "/dataset_test_" + std::to_string(getpid()) + ".npy";
  ASSERT_TRUE(WriteNpy(path, "<f4", {5, 3}, values.data(), 5 * 3 * 4).ok());
  const std::shared_ptr<const Matrix<float>> points = *ReadDataset(path);
  std::remove(path.c_str());
  ASSERT_EQ(points->rows(), 3);
  ASSERT_EQ(points->cols(), 5);
  EXPECT_EQ((*points)(1, 4), 40.0f);
  const std::shared_ptr<const Matrix<float>> rows = DatasetRows(*points, *ParseRowRange("1:3", 5));
  ASSERT_EQ(rows->cols(), 2);
  EXPECT_EQ(rows->col(0), points->col(1));
  EXPECT_EQ(rows->col(1), points->col(2));
  EXPECT_FALSE(ReadDataset(path).ok());  // gone
}

}  // namespace
}  // namespace kmt
