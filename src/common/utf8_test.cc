#include "common/utf8.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

std::string Encoded(uint32_t code_point) {
  std::string out;
  AppendUtf8(code_point, &out);
  return out;
}

TEST(Utf8, EachLengthAtItsBoundaries) {
  EXPECT_EQ(Encoded(0), std::string(1, '\0'));
  EXPECT_EQ(Encoded(0x7F), "\x7f");
  EXPECT_EQ(Encoded(0x80), "\xc2\x80");
  EXPECT_EQ(Encoded(0x7FF), "\xdf\xbf");
  EXPECT_EQ(Encoded(0x800), "\xe0\xa0\x80");
  EXPECT_EQ(Encoded(0xFFFF), "\xef\xbf\xbf");
  EXPECT_EQ(Encoded(0x10000), "\xf0\x90\x80\x80");
  EXPECT_EQ(Encoded(0x10FFFF), "\xf4\x8f\xbf\xbf");
  EXPECT_EQ(Utf8EncodedLength(0x7F), 1);
  EXPECT_EQ(Utf8EncodedLength(0x80), 2);
  EXPECT_EQ(Utf8EncodedLength(0x800), 3);
  EXPECT_EQ(Utf8EncodedLength(0x10000), 4);
}

TEST(Utf8, UncheckedValuesKeepTheirBitPattern) {
  EXPECT_EQ(Encoded(0xD800), "\xed\xa0\x80");           // a surrogate, as it is
  EXPECT_EQ(Encoded(0x110000), "\xf4\x90\x80\x80");     // above U+10FFFF: no replacement
  EXPECT_EQ(Encoded(0x1FFFFF), "\xf7\xbf\xbf\xbf");
}

TEST(Utf8, EncodeWritesWhatAppendAppends) {
  for (uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F600u}) {
    uint8_t bytes[4] = {};
    const int n = EncodeUtf8(cp, bytes);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes), n), Encoded(cp)) << cp;
    EXPECT_EQ(n, Utf8EncodedLength(cp));
  }
}

}  // namespace
}  // namespace tandem
