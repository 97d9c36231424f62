// What a string field may hold, and how the server keeps it so.
#include "proto/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace kmt {
namespace {

TEST(Utf8, TakesEveryWellFormedLength) {
  for (const std::string s :
       {"", "plain", "caf\xC3\xA9", "\xE2\x82\xAC 5", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"}) {
    SCOPED_TRACE(s);
    EXPECT_TRUE(IsUtf8(s));
  }
}

TEST(Utf8, RefusesWhatProtobufRefuses) {
  for (const std::string s : {"caf\xE9",              // Latin-1
                              "\xC3",                 // cut after the lead byte
                              "\xE2\x82",             // cut inside a three-byte character
                              "\x80",                 // a continuation byte alone
                              "\xC0\xAF",             // overlong '/'
                              "\xE0\x80\xAF",         // overlong again
                              "\xED\xA0\x80",         // a surrogate
                              "\xF4\x90\x80\x80",     // past U+10FFFF
                              "\xF5\x80\x80\x80"}) {  // a lead byte no character has
    SCOPED_TRACE(testing::PrintToString(s));
    EXPECT_FALSE(IsUtf8(s));
  }
}

TEST(Utf8, APrefixEndsBeforeACharacterNeverInsideOne) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC";  // a, é (2 bytes), € (3 bytes)
  EXPECT_EQ(Utf8Prefix(s, 100), s);
  EXPECT_EQ(Utf8Prefix(s, 0), "");
  EXPECT_EQ(Utf8Prefix(s, 1), "a");
  EXPECT_EQ(Utf8Prefix(s, 2), "a");
  EXPECT_EQ(Utf8Prefix(s, 3), "a\xC3\xA9");
  EXPECT_EQ(Utf8Prefix(s, 4), "a\xC3\xA9");
  EXPECT_EQ(Utf8Prefix(s, 5), "a\xC3\xA9");
  for (size_t n = 0; n <= s.size(); ++n) EXPECT_TRUE(IsUtf8(Utf8Prefix(s, n))) << n;
}

TEST(Utf8, OtherBytesAreEscapedAndUtf8IsKept) {
  EXPECT_EQ(AsUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(AsUtf8("caf\xE9.kmt"), "caf\\xe9.kmt");
  EXPECT_TRUE(IsUtf8(AsUtf8("\xFF\xFE\x80")));
}

}  // namespace
}  // namespace kmt
