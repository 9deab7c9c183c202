// Unit tests of unicode_normalization: ill-formed UTF-8 replacement (checked against
// Python's bytes.decode("utf-8", "replace")), NFC / NFD (against unicodedata.normalize),
// lowercasing and the \w class.
#include "tokenizer/unicode_normalization.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem {
namespace {

const std::string kFffd = "\xef\xbf\xbd";

TEST(UnicodeNormalizationTest, ValidUtf8PassesUnchanged) {
  const std::string text = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf";
  EXPECT_TRUE(unicode::IsValidUtf8(text));
  EXPECT_EQ(unicode::ToValidUtf8(text), text);
  EXPECT_TRUE(unicode::IsValidUtf8(""));
}

TEST(UnicodeNormalizationTest, IllFormedBytesBecomeOneReplacementPerMaximalSubpart) {
  struct Case {
    std::string bytes, expected;
  };
  const Case cases[] = {
      {"\xf0\x80\x80\x80x", kFffd + kFffd + kFffd + kFffd + "x"},  // F0 needs 90..BF next
      {"\xed\xa0\x80", kFffd + kFffd + kFffd},                     // a surrogate
      {"\xe2\x96", kFffd},                                         // truncated: one
      {"\xc0\xaf", kFffd + kFffd},                                 // overlong lead
      {"\xf4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},         // above U+10FFFF
      {"\xe6\x97\xa5\xe6\x9c", "\xe6\x97\xa5" + kFffd},
      {"a\xff"
       "b",
       "a" + kFffd + "b"},
      {"\x80", kFffd},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(unicode::IsValidUtf8(c.bytes));
    EXPECT_EQ(unicode::ToValidUtf8(c.bytes), c.expected);
  }
}

TEST(UnicodeNormalizationTest, NfcComposesAndOrders) {
  // e + dot below + acute (already in canonical order) -> ẹ́ (U+1EB9 U+0301).
  EXPECT_EQ(unicode::NormalizeNfc("e\xcc\xa3\xcc\x81"), "\xe1\xba\xb9\xcc\x81");
  // a + acute + dot below: reordered (220 before 230), then composed to ạ + acute.
  EXPECT_EQ(unicode::NormalizeNfc("a\xcc\x81\xcc\xa3"), "\xe1\xba\xa1\xcc\x81");
  // Å + acute composes on to Ǻ.
  EXPECT_EQ(unicode::NormalizeNfc("\xc3\x85\xcc\x81"), "\xc7\xba");
  // Singleton: the Angstrom sign becomes Å.
  EXPECT_EQ(unicode::NormalizeNfc("\xe2\x84\xab"), "\xc3\x85");
  // Composition exclusions stay decomposed: U+0958 -> U+0915 U+093C.
  EXPECT_EQ(unicode::NormalizeNfc("\xe0\xa5\x98"), "\xe0\xa4\x95\xe0\xa4\xbc");
  // A non-starter decomposition: U+0344 -> U+0308 U+0301.
  EXPECT_EQ(unicode::NormalizeNfc("\xcd\x84"), "\xcc\x88\xcc\x81");
  // Hangul: L V T jamo compose to one syllable, and LV + T too.
  EXPECT_EQ(unicode::NormalizeNfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8"), "\xea\xb0\x81");
  EXPECT_EQ(unicode::NormalizeNfc("\xea\xb0\x80\xe1\x86\xa8"), "\xea\xb0\x81");
  EXPECT_EQ(unicode::NormalizeNfc("plain ASCII"), "plain ASCII");
}

TEST(UnicodeNormalizationTest, NfdDecomposesFully) {
  EXPECT_EQ(unicode::NormalizeNfd("\xc7\xba"), "A\xcc\x8a\xcc\x81");  // Ǻ
  EXPECT_EQ(unicode::NormalizeNfd("\xea\xb0\x81"), "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8");
  EXPECT_EQ(unicode::NormalizeNfd("a\xcc\x81\xcc\xa3"), "a\xcc\xa3\xcc\x81");
  EXPECT_EQ(unicode::CanonicalCombiningClass(0x0301), 230);
  EXPECT_EQ(unicode::CanonicalCombiningClass(0x0323), 220);
  EXPECT_EQ(unicode::CanonicalCombiningClass('a'), 0);
}

TEST(UnicodeNormalizationTest, LowercaseIsPerCodePoint) {
  EXPECT_EQ(unicode::Lowercase("HELLO World"), "hello world");
  EXPECT_EQ(unicode::Lowercase("\xce\xa3\xce\x91\xce\xa3"),
            "\xcf\x83\xce\xb1\xcf\x83");                   // ΣΑΣ -> σασ
  EXPECT_EQ(unicode::Lowercase("\xc4\xb0"), "i\xcc\x87");  // İ -> i + combining dot
  EXPECT_EQ(unicode::Lowercase("\xc3\x9f"), "\xc3\x9f");   // ß has no lowercase change
}

TEST(UnicodeNormalizationTest, WordCharacters) {
  for (uint32_t c : {uint32_t{'a'}, uint32_t{'Z'}, uint32_t{'7'}, uint32_t{'_'}, 0x00E9u, 0x4E2Du,
                     0x0301u, 0x0663u, 0x216Bu, 0x24B6u, 0x200Du}) {
    EXPECT_TRUE(unicode::IsWordChar(c)) << std::hex << c;
  }
  for (uint32_t c :
       {uint32_t{' '}, uint32_t{'-'}, uint32_t{'<'}, 0x2460u, 0x00BDu, 0x1F600u, 0x3000u}) {
    EXPECT_FALSE(unicode::IsWordChar(c)) << std::hex << c;
  }
}

}  // namespace
}  // namespace tandem
