#include "proto/utf8.h"

#include <cstdint>

#include "absl/strings/escaping.h"

namespace kmt {

bool IsUtf8(absl::string_view s) {
  static constexpr uint32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const int extra = lead < 0x80                   ? 0
                      : lead >= 0xC2 && lead < 0xE0 ? 1
                      : lead >= 0xE0 && lead < 0xF0 ? 2
                      : lead >= 0xF0 && lead < 0xF5 ? 3
                                                    : -1;
    if (extra < 0 || s.size() - i <= static_cast<size_t>(extra)) return false;
    uint32_t point = extra == 0 ? lead : lead & (0x3F >> extra);
    for (int j = 1; j <= extra; ++j) {
      const auto next = static_cast<unsigned char>(s[i + j]);
      if ((next & 0xC0) != 0x80) return false;
      point = point << 6 | (next & 0x3F);
    }
    if (point < kLeast[extra] || (point >= 0xD800 && point <= 0xDFFF) || point > 0x10FFFF) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

absl::string_view Utf8Prefix(absl::string_view s, size_t bytes) {
  if (s.size() <= bytes) return s;
  while (bytes > 0 && (static_cast<unsigned char>(s[bytes]) & 0xC0) == 0x80) --bytes;
  return s.substr(0, bytes);
}

std::string AsUtf8(absl::string_view s) { return IsUtf8(s) ? std::string(s) : absl::CHexEscape(s); }

}  // namespace kmt
