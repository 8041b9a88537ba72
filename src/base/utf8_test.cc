#include "base/utf8.h"

#include <gtest/gtest.h>

namespace parmon {
namespace {

TEST(Utf8, ValidTextIsKeptAsItIs) {
  for (std::string s : {"", "pigz", "caf\xC3\xA9", "\xE2\x82\xAC 5", "\xF0\x9F\x98\x80 ok"}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
    EXPECT_EQ(ValidUtf8(s), s);
  }
}

TEST(Utf8, StrayBytesAreWrittenAsHexEscapes) {
  EXPECT_EQ(ValidUtf8("caf\xE9"), "caf\\xE9");                       // Latin-1 e-acute
  EXPECT_EQ(ValidUtf8("\xFF\xFE"), "\\xFF\\xFE");                    // never in UTF-8
  EXPECT_EQ(ValidUtf8("a\xC3"), "a\\xC3");                           // sequence cut at the end
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), "\\xC0\\xAF");                    // overlong '/'
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");           // a UTF-16 surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(ValidUtf8("\xE9t\xC3\xA9"), "\\xE9t\xC3\xA9");           // valid parts kept
  EXPECT_FALSE(IsValidUtf8("caf\xE9"));
}

TEST(Utf8, EveryOutputIsValid) {
  // Every two-byte string: the escaped form is always well-formed UTF-8.
  for (int a = 0; a < 256; ++a)
    for (int b = 0; b < 256; ++b) {
      std::string s{static_cast<char>(a), static_cast<char>(b)};
      ASSERT_TRUE(IsValidUtf8(ValidUtf8(s))) << a << " " << b;
    }
}

}  // namespace
}  // namespace parmon
