#include "io/npy.h"

#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kmt {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

// The value of 'key' in the header's dict: the text after "'key':" up to
// the next top-level comma or the closing brace.
absl::StatusOr<std::string> Field(absl::string_view dict, absl::string_view key) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t at = dict.find(quoted);
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(".npy header has no ", quoted, ": ", dict));
  }
  at = dict.find(':', at + quoted.size());
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(".npy header: ", quoted, " has no value"));
  }
  size_t end = at + 1;
  int depth = 0;
  for (; end < dict.size(); ++end) {
    const char c = dict[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  return std::string(absl::StripAsciiWhitespace(dict.substr(at + 1, end - at - 1)));
}

}  // namespace

absl::StatusOr<NpyHeader> ParseNpyHeader(const std::string& bytes) {
  if (bytes.size() < kMagicBytes + 4 || bytes.compare(0, kMagicBytes, kMagic) != 0) {
    return absl::InvalidArgumentError("not a .npy file: it does not start with \\x93NUMPY");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) {
    return absl::InvalidArgumentError(absl::StrCat(".npy version ", major, " is not 1, 2 or 3"));
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) {
    return absl::InvalidArgumentError(".npy file ends inside its header");
  }
  uint32_t length = 0;
  for (size_t b = 0; b < length_bytes; ++b) {
    length |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[8 + b])) << (8 * b);
  }
  NpyHeader header;
  header.data_offset = static_cast<int64_t>(8 + length_bytes + length);
  if (bytes.size() < static_cast<size_t>(header.data_offset)) {
    return absl::InvalidArgumentError(
        absl::StrCat(".npy header says ", length, " bytes, the file ends before them"));
  }
  const absl::string_view dict =
      absl::StripAsciiWhitespace(absl::string_view(bytes).substr(8 + length_bytes, length));
  if (dict.empty() || dict.front() != '{' || dict.back() != '}') {
    return absl::InvalidArgumentError(absl::StrCat(".npy header is not a dict: ", dict));
  }
  absl::StatusOr<std::string> descr = Field(dict, "descr");
  if (!descr.ok()) return descr.status();
  if (*descr == "'<f2'") {
    header.item_bytes = 2;
  } else if (*descr == "'<f4'") {
    header.item_bytes = 4;
  } else if (*descr == "'<f8'") {
    header.item_bytes = 8;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(".npy dtype ", *descr,
                                                   " is not supported; expected '<f2' (float16), "
                                                   "'<f4' (float32) or '<f8' (float64)"));
  }
  absl::StatusOr<std::string> fortran = Field(dict, "fortran_order");
  if (!fortran.ok()) return fortran.status();
  if (*fortran != "False") {
    return absl::InvalidArgumentError(absl::StrCat(
        ".npy fortran_order is ", *fortran, "; expected False (C order, one point per row)"));
  }
  absl::StatusOr<std::string> shape = Field(dict, "shape");
  if (!shape.ok()) return shape.status();
  absl::string_view dims = *shape;
  if (!absl::ConsumePrefix(&dims, "(") || !absl::ConsumeSuffix(&dims, ")")) {
    return absl::InvalidArgumentError(absl::StrCat(".npy shape ", *shape, " is not a tuple"));
  }
  for (absl::string_view dim : absl::StrSplit(dims, ',', absl::SkipWhitespace())) {
    dim = absl::StripAsciiWhitespace(dim);
    int64_t value = 0;
    if (!absl::SimpleAtoi(dim, &value) || value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(".npy shape ", *shape, " has '", dim, "', not a size"));
    }
    header.shape.push_back(value);
  }
  if (header.shape.empty() || header.shape.size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        ".npy shape ", *shape, " has ", header.shape.size(), " dimensions; expected (n, d)"));
  }
  // The values' bytes, and the file's, must fit an int64 for the readers
  // to compute them.
  int64_t bytes_needed = header.item_bytes, with_header = 0;
  for (const int64_t dim : header.shape) {
    if (__builtin_mul_overflow(bytes_needed, dim, &bytes_needed) ||
        __builtin_add_overflow(bytes_needed, header.data_offset, &with_header)) {
      return absl::InvalidArgumentError(
          absl::StrCat(".npy shape ", *shape, " holds more bytes than a file can"));
    }
  }
  return header;
}

absl::Status WriteNpy(const std::string& path, const std::string& descr,
                      const std::vector<int64_t>& shape, const void* data, int64_t bytes) {
  std::string dict = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (",
                                  absl::StrJoin(shape, ", "), shape.size() == 1 ? ",), }" : "), }");
  // Magic, version, length, dict and padding fill a multiple of 64 bytes,
  // the dict ending in a newline.
  const size_t unpadded = kMagicBytes + 4 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  const uint16_t length = static_cast<uint16_t>(dict.size());
  const char prefix[] = {'\x01', '\x00', static_cast<char>(length & 0xff),
                         static_cast<char>(length >> 8)};
  out.write(kMagic, kMagicBytes);
  out.write(prefix, sizeof(prefix));
  out << dict;
  out.write(static_cast<const char*>(data), bytes);
  out.close();
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
}

}  // namespace kmt
