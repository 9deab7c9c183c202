// Unit tests of the tokenizer building blocks: UTF-8, categories, GPT-2 byte map,
// pre-tokenizer splits.
#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace tandem {
namespace {

using unicode::CodepointFlags;

TEST(UnicodeTest, Utf8RoundTrip) {
  const std::string text = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80";  // a é 中 😀
  const std::vector<uint32_t> cpts = unicode::DecodeUtf8(text);
  EXPECT_EQ(cpts, (std::vector<uint32_t>{0x61, 0xE9, 0x4E2D, 0x1F600}));
  std::string back;
  for (uint32_t c : cpts) unicode::AppendUtf8(c, &back);
  EXPECT_EQ(back, text);
  EXPECT_EQ(unicode::EncodeUtf8(0x10FFFF), "\xf4\x8f\xbf\xbf");
  EXPECT_EQ(unicode::EncodeUtf8(0x110000), "\xef\xbf\xbd");  // out of range -> U+FFFD
}

TEST(UnicodeTest, MalformedUtf8BecomesReplacementPerByte) {
  // Stray continuation, truncated 3-byte sequence, invalid lead byte.
  const std::vector<uint32_t> cpts = unicode::DecodeUtf8(
      "\x80"
      "a\xe4\xb8"
      "b\xff");
  EXPECT_EQ(cpts, (std::vector<uint32_t>{0xFFFD, 'a', 0xFFFD, 0xFFFD, 'b', 0xFFFD}));
}

TEST(UnicodeTest, SequenceLengthFromLeadByte) {
  EXPECT_EQ(unicode::Utf8SequenceLength('a'), 1u);
  EXPECT_EQ(unicode::Utf8SequenceLength(0x80), 1u);  // continuation byte
  EXPECT_EQ(unicode::Utf8SequenceLength(0xC3), 2u);
  EXPECT_EQ(unicode::Utf8SequenceLength(0xE4), 3u);
  EXPECT_EQ(unicode::Utf8SequenceLength(0xF0), 4u);
}

TEST(UnicodeTest, Categories) {
  EXPECT_TRUE(unicode::IsLetter(CodepointFlags('a')));
  EXPECT_TRUE(unicode::IsLetter(CodepointFlags(0x4E2D)));   // 中
  EXPECT_TRUE(unicode::IsLetter(CodepointFlags(0x31350)));  // CJK Ext. H (Unicode 15.0)
  EXPECT_TRUE(unicode::IsNumber(CodepointFlags('7')));
  EXPECT_TRUE(unicode::IsNumber(CodepointFlags(0x00B2)));  // ² (No)
  EXPECT_TRUE(unicode::IsNumber(CodepointFlags(0x0663)));  // Arabic-Indic 3
  EXPECT_EQ(CodepointFlags(0x0301) & unicode::kFlagCategoryMask, unicode::kFlagMark);
  EXPECT_EQ(CodepointFlags('!') & unicode::kFlagCategoryMask, unicode::kFlagPunctuation);
  EXPECT_EQ(CodepointFlags('$') & unicode::kFlagCategoryMask, unicode::kFlagSymbol);
  EXPECT_EQ(CodepointFlags(0x1F600) & unicode::kFlagCategoryMask, unicode::kFlagSymbol);
  EXPECT_EQ(CodepointFlags(0x0378), unicode::kFlagUndefined);  // unassigned
  EXPECT_EQ(CodepointFlags(0x200000), unicode::kFlagUndefined);
  EXPECT_EQ(CodepointFlags('\n'), unicode::kFlagControl | unicode::kFlagWhitespace);
  EXPECT_EQ(CodepointFlags(0x3000), unicode::kFlagSeparator | unicode::kFlagWhitespace);
  EXPECT_TRUE(unicode::IsWhitespace(CodepointFlags(0x0085)));
  EXPECT_FALSE(unicode::IsWhitespace(CodepointFlags(0x200B)));  // zero width space is Cf
  EXPECT_FALSE(unicode::IsWhitespace(CodepointFlags(0x001C)));  // isspace() in Python, not \s
}

TEST(UnicodeTest, ByteLevelMap) {
  EXPECT_EQ(unicode::ByteToCodepoint('A'), static_cast<uint32_t>('A'));
  EXPECT_EQ(unicode::ByteToCodepoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(unicode::ByteToCodepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(unicode::ByteToCodepoint(0x00), 0x100u);
  EXPECT_EQ(unicode::ByteToCodepoint(0xAD), 0x143u);  // soft hyphen is remapped
  EXPECT_EQ(unicode::ByteToUtf8(' '), "\xc4\xa0");
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(unicode::CodepointToByte(unicode::ByteToCodepoint(static_cast<uint8_t>(b))), b);
  }
  EXPECT_EQ(unicode::CodepointToByte(0x4E2D), -1);
}

// Splits and un-byte-encodes the words, for readable expectations.
std::vector<std::string> Words(PreTokenizer::Kind kind, std::string_view text) {
  std::vector<std::string> words;
  for (const std::string& word : PreTokenizer(kind).Split(text)) {
    std::string raw;
    for (uint32_t cpt : unicode::DecodeUtf8(word))
      raw.push_back(static_cast<char>(unicode::CodepointToByte(cpt)));
    words.push_back(raw);
  }
  return words;
}

using Kind = PreTokenizer::Kind;
using W = std::vector<std::string>;

TEST(UnicodePreTokenizerTest, Gpt2) {
  EXPECT_EQ(Words(Kind::kGpt2, "Hello world"), (W{"Hello", " world"}));
  EXPECT_EQ(Words(Kind::kGpt2, "  hi"), (W{" ", " hi"}));
  EXPECT_EQ(Words(Kind::kGpt2, "it's 12345!"), (W{"it", "'s", " 12345", "!"}));
  EXPECT_EQ(Words(Kind::kGpt2, "IT'S"), (W{"IT", "'", "S"}));  // case-sensitive
  EXPECT_EQ(Words(Kind::kGpt2, "a\n\nb"), (W{"a", "\n", "\n", "b"}));
}

TEST(UnicodePreTokenizerTest, Llama3AndQwen2) {
  EXPECT_EQ(Words(Kind::kLlama3, "IT'S 12345"), (W{"IT", "'S", " ", "123", "45"}));
  EXPECT_EQ(Words(Kind::kQwen2, "12345"), (W{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(Words(Kind::kLlama3, "a\n\n  b"), (W{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(Words(Kind::kLlama3, "x = [1]\n"), (W{"x", " =", " [", "1", "]\n"}));
  EXPECT_EQ(Words(Kind::kLlama3, "(hello)"), (W{"(hello", ")"}));
}

TEST(UnicodePreTokenizerTest, DefaultSplitsPunctuationAndDigitTriples) {
  EXPECT_EQ(Words(Kind::kDefault, "a+b=12345"), (W{"a", "+", "b", "=", "123", "45"}));
}

TEST(UnicodePreTokenizerTest, SupportedNames) {
  EXPECT_TRUE(PreTokenizer::OptionsForName("qwen2").ok());
  EXPECT_TRUE(PreTokenizer::OptionsForName("").ok());
  const auto bad = PreTokenizer::OptionsForName("falcon");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(bad.status().message().find("llama-bpe"), std::string::npos);
}

}  // namespace
}  // namespace tandem
