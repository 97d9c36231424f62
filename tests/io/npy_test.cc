#include "io/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace kmt {
namespace {

// A version 1.0 header around `dict` (no padding needed by the parser).
std::string Header(const std::string& dict, char major = 1) {
  std::string bytes = std::string("\x93NUMPY", 6) + major + '\0';
  const size_t length = dict.size();
  bytes += static_cast<char>(length & 0xff);
  bytes += static_cast<char>(length >> 8);
  if (major > 1) bytes += std::string(2, '\0');
  return bytes + dict;
}

TEST(Npy, ParsesFloat32AndFloat64InCOrder) {
  const std::string v1 = "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 3), }\n";
  absl::StatusOr<NpyHeader> h = ParseNpyHeader(Header(v1));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->item_bytes, 4);
  EXPECT_EQ(h->shape, (std::vector<int64_t>{10, 3}));
  EXPECT_EQ(h->data_offset, static_cast<int64_t>(10 + v1.size()));
  const std::string v2 = "{'shape': (7,), 'fortran_order': False, 'descr': '<f8'}";
  h = ParseNpyHeader(Header(v2, 2));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->item_bytes, 8);
  EXPECT_EQ(h->shape, (std::vector<int64_t>{7}));
  EXPECT_EQ(h->data_offset, static_cast<int64_t>(12 + v2.size()));
}

TEST(Npy, MalformedHeadersSayWhatIsWrong) {
  const struct {
    std::string bytes, message;
  } cases[] = {
      {"PK\x03\x04 not numpy", "not a .npy file: it does not start with \\x93NUMPY"},
      {Header("{}", 9), ".npy version 9 is not 1, 2 or 3"},
      {Header("{'descr': '<f4'}").substr(0, 12),
       ".npy header says 16 bytes, the file ends before them"},
      {Header("['descr', '<f4']"), ".npy header is not a dict: ['descr', '<f4']"},
      {Header("{'fortran_order': False, 'shape': (2, 2)}"),
       ".npy header has no 'descr': {'fortran_order': False, 'shape': (2, 2)}"},
      {Header("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2)}"),
       ".npy dtype '>f4' is not supported; expected '<f2' (float16), '<f4' (float32) or "
       "'<f8' (float64)"},
      {Header("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2)}"),
       ".npy dtype '<i8' is not supported; expected '<f2' (float16), '<f4' (float32) or "
       "'<f8' (float64)"},
      {Header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}"),
       ".npy fortran_order is True; expected False (C order, one point per row)"},
      {Header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4)}"),
       ".npy shape (2, 3, 4) has 3 dimensions; expected (n, d)"},
      {Header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}"),
       ".npy shape (2, x) has 'x', not a size"},
      {Header("{'descr': '<f4', 'fortran_order': False, 'shape': 4}"),
       ".npy shape 4 is not a tuple"},
      // Sizes whose bytes do not fit an int64 (a reader would overflow).
      {Header("{'descr': '<f8', 'fortran_order': False, 'shape': (00000400752841041379316, 3)}"),
       ".npy shape (00000400752841041379316, 3) holds more bytes than a file can"},
      {Header("{'descr': '<f4', 'fortran_order': False, 'shape': (2305843009213693952,)}"),
       ".npy shape (2305843009213693952,) holds more bytes than a file can"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.bytes);
    const absl::StatusOr<NpyHeader> h = ParseNpyHeader(c.bytes);
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(h.status().message(), c.message);
  }
}

TEST(Npy, WrittenFilesReadBack) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("kmt-npy-test-" + std::to_string(::getpid()) + ".npy");
  const float values[] = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(WriteNpy(path, "<f4", {3, 2}, values, sizeof(values)).ok());
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  absl::StatusOr<NpyHeader> h = ParseNpyHeader(bytes);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data_offset % 64, 0);
  EXPECT_EQ(h->shape, (std::vector<int64_t>{3, 2}));
  ASSERT_EQ(bytes.size(), h->data_offset + sizeof(values));
  EXPECT_EQ(std::memcmp(bytes.data() + h->data_offset, values, sizeof(values)), 0);
}

}  // namespace
}  // namespace kmt
