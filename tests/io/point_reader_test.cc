#include "io/point_reader.h"

#include <gtest/gtest.h>

#include <cmath>
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

TEST_F(PointReaderTest, CsvWithWindowsLineEndings) {
  absl::StatusOr<std::unique_ptr<PointReader>> reader =
      PointReader::Open(File("w.csv", "x,y\r\n1,2\r\n3,4\r\n"), "", 0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->d(), 2);
  std::vector<float> values;
  EXPECT_EQ(*(*reader)->Read(10, &values), 2);
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4}));
}

// The extension says the format in any case; a name without one is read by
// its first bytes, and a file that shows nothing is refused naming --format.
TEST_F(PointReaderTest, FormatByNameInAnyCaseElseByContent) {
  for (const char* name : {"p.txt", "p.CSV", "p.tsv", "points"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::unique_ptr<PointReader>> reader =
        PointReader::Open(File(name, "1 2 3\n4 5 6\n"), "", 0);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->d(), 3);
    EXPECT_EQ((*reader)->n(), -1);  // read as text
  }
  // Text is text even where --d is given.
  absl::StatusOr<std::unique_ptr<PointReader>> text =
      PointReader::Open(File("p.dat", "1,2\n3,4\n"), "", 2);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ((*text)->n(), -1);
  const float data[] = {1.5f, -2, 3, 4};
  const std::string bytes(reinterpret_cast<const char*>(data), sizeof(data));
  const absl::Status unknown = PointReader::Open(File("p.dat", bytes), "", 0).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("--format"), std::string::npos) << unknown;
  absl::StatusOr<std::unique_ptr<PointReader>> f32 = PointReader::Open(File("p.dat", bytes), "", 2);
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ((*f32)->n(), 2);
  absl::StatusOr<std::unique_ptr<PointReader>> upper =
      PointReader::Open(File("P.F32", bytes), "", 4);
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ((*upper)->n(), 1);
}

// A .npy file of `values` with this dtype and shape, as NumPy writes it.
std::string NpyBytes(const std::string& descr, const std::string& shape, const void* values,
                     size_t bytes) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  dict.append(64 - (10 + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + std::string(static_cast<const char*>(values), bytes);
}

TEST_F(PointReaderTest, NpyFloat32AndFloat64InBatchesAndAtAnyPoint) {
  const float f[] = {1.5f, -2, 3, 4, 5, 6};
  const double g[] = {1.5, -2, 3, 4, 5, 6};
  for (const std::string& path : {File("f.npy", NpyBytes("<f4", "(3, 2)", f, sizeof(f))),
                                  File("g.npy", NpyBytes("<f8", "(3, 2)", g, sizeof(g)))}) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::unique_ptr<PointReader>> reader = PointReader::Open(path, "", 0);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->d(), 2);
    EXPECT_EQ((*reader)->n(), 3);
    std::vector<float> values;
    EXPECT_EQ(*(*reader)->Read(2, &values), 2);
    EXPECT_EQ(*(*reader)->Read(2, &values), 1);
    EXPECT_EQ(*(*reader)->Read(2, &values), 0);
    EXPECT_EQ(values, std::vector<float>(std::begin(f), std::end(f)));
    values.clear();
    ASSERT_TRUE((*reader)->ReadAt(1, 2, &values).ok());
    EXPECT_EQ(values, std::vector<float>(f + 2, f + 6));
    EXPECT_EQ((*reader)->ReadAt(2, 2, &values).code(), absl::StatusCode::kOutOfRange);
  }
}

TEST_F(PointReaderTest, BadNpyFilesSayWhatIsWrong) {
  const float f[] = {1, 2, 3, 4, 5, 6};
  const std::string truncated = NpyBytes("<f4", "(4, 2)", f, sizeof(f));
  absl::StatusOr<std::unique_ptr<PointReader>> r =
      PointReader::Open(File("t.npy", truncated), "", 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("has 152 bytes; its header (4 x 2 values of 4 bytes) "
                                      "needs 160"),
            std::string::npos)
      << r.status();
  r = PointReader::Open(File("i.npy", NpyBytes("<i4", "(3, 2)", f, sizeof(f))), "", 0);
  EXPECT_NE(r.status().message().find(".npy dtype '<i4' is not supported"), std::string::npos)
      << r.status();
  r = PointReader::Open(File("d.npy", NpyBytes("<f4", "(3, 2)", f, sizeof(f))), "", 3);
  EXPECT_NE(r.status().message().find("has d = 2 values per point, expected 3"), std::string::npos)
      << r.status();
  r = PointReader::Open(File("x.npy", "not numpy at all"), "", 0);
  EXPECT_NE(r.status().message().find("not a .npy file"), std::string::npos) << r.status();
  EXPECT_EQ(PointReader::Open(File("p.bin", "abcd"), "parquet", 0).status().message(),
            "unknown format 'parquet', expected csv, f32, f16, bf16 or npy");
}

// Binary16 values given by their bits: 1, -2, the smallest subnormal, -0,
// 65504, 0.5 (numpy's float16), then bfloat16 bits of 1, -2, 3e38's.
const uint16_t kF16[] = {0x3c00, 0xc000, 0x0001, 0x8000, 0x7bff, 0x3800};
const uint16_t kBF16[] = {0x3f80, 0xc000, 0x7f62, 0x0000, 0x0001, 0x3f00};

TEST_F(PointReaderTest, NarrowValuesAreReadAsTheirFloat32Values) {
  const std::vector<float> f16 = {1, -2, std::ldexp(1.f, -24), -0.f, 65504, 0.5f};
  const std::vector<float> bf16 = {1,   -2, std::ldexp(1.765625f, 127), 0, std::ldexp(1.f, -133),
                                   0.5f};
  const std::string f16_bytes(reinterpret_cast<const char*>(kF16), sizeof(kF16));
  const std::string bf16_bytes(reinterpret_cast<const char*>(kBF16), sizeof(kBF16));
  struct Case {
    std::string path, format;
    int d;
    const std::vector<float>& want;
  } cases[] = {
      {File("h.npy", NpyBytes("<f2", "(3, 2)", kF16, sizeof(kF16))), "", 0, f16},
      {File("h.f16", f16_bytes), "", 2, f16},
      {File("h.BF16", bf16_bytes), "", 2, bf16},
      {File("h.data", bf16_bytes), "bf16", 2, bf16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    absl::StatusOr<std::unique_ptr<PointReader>> reader = PointReader::Open(c.path, c.format, c.d);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->d(), 2);
    EXPECT_EQ((*reader)->n(), 3);
    std::vector<float> values;
    ASSERT_EQ((*reader)->Read(2, &values).value(), 2);
    ASSERT_EQ((*reader)->Read(2, &values).value(), 1);
    ASSERT_EQ(values.size(), c.want.size());
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(values[i], c.want[i]) << i;
      EXPECT_EQ(std::signbit(values[i]), std::signbit(c.want[i])) << i;
    }
    std::vector<float> at;
    ASSERT_TRUE((*reader)->ReadAt(1, 2, &at).ok());
    EXPECT_EQ(at, std::vector<float>(values.begin() + 2, values.end()));
  }
  const std::string odd = File("odd.f16", f16_bytes + "x");
  EXPECT_EQ(PointReader::Open(odd, "", 2).status().message(),
            odd + " has 13 bytes, not a multiple of 2*d = 4");
  EXPECT_EQ(PointReader::Open(File("nod.bf16", bf16_bytes), "", 0).status().message(),
            "a bfloat16 file needs --d");
}

TEST_F(PointReaderTest, NpyByItsMagicWhateverItsName) {
  const float values[] = {1, 2, 3, 4, 5, 6};
  absl::StatusOr<std::unique_ptr<PointReader>> reader = PointReader::Open(
      File("points.data", NpyBytes("<f4", "(3, 2)", values, sizeof(values))), "", 0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->d(), 2);
  EXPECT_EQ((*reader)->n(), 3);
}

}  // namespace
}  // namespace kmt
