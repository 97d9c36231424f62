#include "io/point_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/narrow_float.h"
#include "io/npy.h"

namespace kmt {
namespace {

// Values separated by commas, semicolons or whitespace; a line's ending may
// be CRLF.
std::vector<absl::string_view> Fields(const std::string& line) {
  return absl::StrSplit(line, absl::ByAnyChar(", \t;\r"), absl::SkipEmpty());
}

// The format a file's name says, case aside: "" where it says none.
std::string FormatOfName(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  const std::string ext = absl::AsciiStrToLower(path.substr(dot + 1));
  if (ext == "csv" || ext == "txt" || ext == "tsv") return "csv";
  if (ext == "npy") return "npy";
  if (ext == "f32" || ext == "bin" || ext == "raw") return "f32";
  if (ext == "f16" || ext == "bf16") return ext;
  return "";
}

// The format a file's first bytes show: "npy" for NumPy's magic, "csv" for
// text (printable ASCII and whitespace only), "" for other bytes.
std::string FormatOfContent(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char buffer[4096];
  in.read(buffer, sizeof(buffer));
  const absl::string_view head(buffer, static_cast<size_t>(in.gcount()));
  if (absl::StartsWith(head, "\x93NUMPY")) return "npy";
  if (head.empty()) return "";
  for (char c : head) {
    const auto u = static_cast<unsigned char>(c);
    if (!(u == '\n' || u == '\r' || u == '\t' || (u >= 0x20 && u < 0x7f))) return "";
  }
  return "csv";
}

bool ParseFloat(absl::string_view field, float* out) {
  const std::string s(field);
  char* end = nullptr;
  errno = 0;
  *out = std::strtof(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PointReader>> PointReader::Open(const std::string& path,
                                                               const std::string& format, int d) {
  std::string chosen = format;
  if (chosen.empty()) chosen = FormatOfName(path);
  if (chosen.empty()) {
    if (!std::ifstream(path)) return absl::NotFoundError(absl::StrCat("cannot open ", path));
    chosen = FormatOfContent(path);
    // Bytes that are neither text nor NumPy's are float32 only when the
    // caller says how many make a point.
    if (chosen.empty() && d > 0) chosen = "f32";
    if (chosen.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot tell the format of ", path,
          " from its name or its first bytes; say --format=csv, npy or f32, f16 or bf16 (with "
          "--d)"));
    }
  }
  Format f;
  if (chosen == "csv") {
    f = Format::kCsv;
  } else if (chosen == "npy") {
    f = Format::kNpy;
  } else if (chosen == "f32") {
    f = Format::kFloat32;
  } else if (chosen == "f16") {
    f = Format::kFloat16;
  } else if (chosen == "bf16") {
    f = Format::kBFloat16;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown format '", format, "', expected csv, f32, f16, bf16 or npy"));
  }
  std::unique_ptr<PointReader> reader(new PointReader(path, f));
  if (f != Format::kCsv) {
    if (absl::Status s = reader->OpenBinary(d); !s.ok()) return s;
    return reader;
  }
  reader->in_.open(path, std::ios::binary);
  if (!reader->in_) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  reader->in_.seekg(0, std::ios::end);
  reader->size_ = reader->in_.tellg();
  reader->in_.seekg(0);
  // The first line with numbers fixes d.
  std::string line;
  while (std::getline(reader->in_, line)) {
    std::vector<absl::string_view> fields = Fields(line);
    float unused;
    if (fields.empty() || !ParseFloat(fields[0], &unused)) continue;
    reader->d_ = static_cast<int>(fields.size());
    break;
  }
  if (reader->d_ == 0) return absl::InvalidArgumentError(absl::StrCat(path, " has no points"));
  if (d > 0 && d != reader->d_) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " has d = ", reader->d_, " values per line, expected ", d));
  }
  if (absl::Status s = reader->Rewind(); !s.ok()) return s;
  return reader;
}

PointReader::~PointReader() {
  if (fd_ >= 0) close(fd_);
}

absl::Status PointReader::OpenBinary(int d) {
  fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path_));
  const off_t size = lseek(fd_, 0, SEEK_END);
  if (size < 0) return absl::InternalError(absl::StrCat("cannot read the size of ", path_));
  if (format_ != Format::kNpy) {
    const char* type = format_ == Format::kFloat32   ? "float32"
                       : format_ == Format::kFloat16 ? "binary16"
                                                     : "bfloat16";
    if (format_ != Format::kFloat32) {
      item_bytes_ = 2;
      widen_ = format_ == Format::kFloat16 ? WidenFloat16 : WidenBFloat16;
    }
    if (d < 1) return absl::InvalidArgumentError(absl::StrCat("a ", type, " file needs --d"));
    const int64_t point_bytes = item_bytes_ * int64_t{d};
    if (size % point_bytes != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, " has ", size, " bytes, not a multiple of ", item_bytes_, "*d = ", point_bytes));
    }
    d_ = d;
    n_ = size / point_bytes;
    return absl::OkStatus();
  }
  // A .npy header fits in its first 64 KiB in practice; version 2 allows
  // more, read as far as it says.
  std::string head(std::min<int64_t>(size, 1 << 16), '\0');
  if (pread(fd_, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size())) {
    return absl::InternalError(absl::StrCat("cannot read ", path_));
  }
  absl::StatusOr<NpyHeader> header = ParseNpyHeader(head);
  if (!header.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", header.status().message()));
  }
  const int64_t rows = header->shape[0];
  const int64_t cols = header->shape.size() == 2 ? header->shape[1] : 1;
  if (cols < 1 || cols > (1 << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": shape has d = ", cols));
  }
  if (d > 0 && cols != d) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, " has d = ", cols, " values per point, expected ", d));
  }
  const int64_t expected = header->data_offset + rows * cols * header->item_bytes;
  if (size != expected) {
    return absl::InvalidArgumentError(absl::StrCat(path_, " has ", size, " bytes; its header (",
                                                   rows, " x ", cols, " values of ",
                                                   header->item_bytes, " bytes) needs ", expected));
  }
  d_ = static_cast<int>(cols);
  n_ = rows;
  rank_ = static_cast<int>(header->shape.size());
  data_offset_ = header->data_offset;
  item_bytes_ = header->item_bytes;
  if (item_bytes_ == 2) widen_ = WidenFloat16;
  return absl::OkStatus();
}

absl::Status PointReader::ReadAt(int64_t first, int64_t count, std::vector<float>* values) const {
  if (fd_ < 0 || first < 0 || count < 0 || first + count > n_) {
    return ReadAt(first, count, static_cast<float*>(nullptr));
  }
  const size_t start = values->size();
  values->resize(start + count * d_);
  return ReadAt(first, count, values->data() + start);
}

absl::Status PointReader::ReadAt(int64_t first, int64_t count, float* values) const {
  if (fd_ < 0) return absl::FailedPreconditionError("only binary files are read at a point");
  if (first < 0 || count < 0 || first + count > n_) {
    return absl::OutOfRangeError(
        absl::StrCat("points ", first, " + ", count, " are outside ", path_, "'s ", n_));
  }
  const int64_t items = count * d_;
  // Float64 and 2-byte values are read beside and converted; float32 ones
  // in place.
  std::vector<double> wide(item_bytes_ == 8 ? items : 0);
  std::vector<uint16_t> narrow(item_bytes_ == 2 ? items : 0);
  char* out = item_bytes_ == 8   ? reinterpret_cast<char*>(wide.data())
              : item_bytes_ == 2 ? reinterpret_cast<char*>(narrow.data())
                                 : reinterpret_cast<char*>(values);
  int64_t want = items * item_bytes_, offset = data_offset_ + first * d_ * item_bytes_;
  while (want > 0) {
    const ssize_t got = pread(fd_, out, want, offset);
    if (got <= 0) {
      return absl::InternalError(absl::StrCat("cannot read ", path_, ": ",
                                              got == 0 ? "it ended early" : std::strerror(errno)));
    }
    out += got;
    want -= got;
    offset += got;
  }
  if (item_bytes_ == 8) std::copy(wide.begin(), wide.end(), values);
  if (item_bytes_ == 2) std::transform(narrow.begin(), narrow.end(), values, widen_);
  return absl::OkStatus();
}

absl::Status PointReader::Rewind() {
  next_ = 0;
  if (format_ != Format::kCsv) return absl::OkStatus();
  in_.clear();
  in_.seekg(0);
  line_number_ = 0;
  header_checked_ = false;
  return in_ ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot rewind ", path_));
}

double PointReader::progress() {
  if (format_ != Format::kCsv) return n_ == 0 ? 1.0 : static_cast<double>(next_) / n_;
  if (size_ == 0) return 1;
  const auto pos = in_.tellg();
  return pos < 0 ? 1.0 : static_cast<double>(pos) / static_cast<double>(size_);
}

absl::Status PointReader::ParseLine(const std::string& line, std::vector<float>* values) {
  const std::vector<absl::string_view> fields = Fields(line);
  if (fields.empty()) return absl::OkStatus();
  float value;
  if (!header_checked_) {
    header_checked_ = true;
    if (!ParseFloat(fields[0], &value)) return absl::OkStatus();  // a header
  }
  if (static_cast<int>(fields.size()) != d_) {
    return absl::InvalidArgumentError(absl::StrCat(path_, " line ", line_number_, ": ",
                                                   fields.size(), " values, expected d = ", d_));
  }
  for (absl::string_view field : fields) {
    if (!ParseFloat(field, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, " line ", line_number_, ": '", field, "' is not a number"));
    }
    values->push_back(value);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PointReader::Read(int64_t max_points, std::vector<float>* values) {
  if (format_ != Format::kCsv) {
    const int64_t got = std::min(max_points, n_ - next_);
    if (absl::Status s = ReadAt(next_, got, values); !s.ok()) return s;
    next_ += got;
    return got;
  }
  int64_t got = 0;
  std::string line;
  while (got < max_points && std::getline(in_, line)) {
    ++line_number_;
    const size_t before = values->size();
    if (absl::Status s = ParseLine(line, values); !s.ok()) return s;
    got += values->size() > before;
  }
  return got;
}

}  // namespace kmt
