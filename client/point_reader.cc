#include "client/point_reader.h"

#include <cerrno>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kmt {
namespace {

std::vector<absl::string_view> Fields(const std::string& line) {
  return absl::StrSplit(line, absl::ByAnyChar(", \t;"), absl::SkipEmpty());
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
  const bool csv = format.empty() ? absl::EndsWith(path, ".csv") : format == "csv";
  if (!format.empty() && format != "csv" && format != "f32") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown format '", format, "', expected csv or f32"));
  }
  std::unique_ptr<PointReader> reader(new PointReader(path, csv));
  reader->in_.open(path, std::ios::binary);
  if (!reader->in_) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  reader->in_.seekg(0, std::ios::end);
  reader->size_ = reader->in_.tellg();
  reader->in_.seekg(0);
  if (!csv) {
    if (d < 1) return absl::InvalidArgumentError("a float32 file needs --d");
    if (reader->size_ % (4 * int64_t{d}) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has ", reader->size_, " bytes, not a multiple of 4*d = ", 4 * d));
    }
    reader->d_ = d;
    return reader;
  }
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

absl::Status PointReader::Rewind() {
  in_.clear();
  in_.seekg(0);
  line_number_ = 0;
  header_checked_ = false;
  return in_ ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot rewind ", path_));
}

double PointReader::progress() {
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
  if (!csv_) {
    const size_t start = values->size();
    values->resize(start + max_points * d_);
    in_.read(reinterpret_cast<char*>(values->data() + start),
             static_cast<std::streamsize>(max_points * d_ * sizeof(float)));
    const int64_t got = in_.gcount() / static_cast<int64_t>(sizeof(float) * d_);
    values->resize(start + got * d_);
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
