// LoadVocab on hand-built GGUF metadata (defaults, validation, end-of-generation
// detection) and Tokenizer::Create's support checks, plus a small synthetic
// SentencePiece vocab to exercise byte fallback without a model file.
#include "model/vocab.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace {

// Builds a GGUF v3 image with metadata only.
class MetadataBuilder {
 public:
  MetadataBuilder& String(std::string_view key, std::string_view value) {
    Key(key, 8);
    Str(value);
    return *this;
  }
  MetadataBuilder& Uint32(std::string_view key, uint32_t value) {
    Key(key, 4);
    Raw(&value, 4);
    return *this;
  }
  MetadataBuilder& Bool(std::string_view key, bool value) {
    Key(key, 7);
    const uint8_t b = value ? 1 : 0;
    Raw(&b, 1);
    return *this;
  }
  MetadataBuilder& Strings(std::string_view key, const std::vector<std::string>& values) {
    ArrayHeader(key, 8, values.size());
    for (const std::string& v : values) Str(v);
    return *this;
  }
  MetadataBuilder& Floats(std::string_view key, const std::vector<float>& values) {
    ArrayHeader(key, 6, values.size());
    for (float v : values) Raw(&v, 4);
    return *this;
  }
  MetadataBuilder& Int32s(std::string_view key, const std::vector<int32_t>& values) {
    ArrayHeader(key, 5, values.size());
    for (int32_t v : values) Raw(&v, 4);
    return *this;
  }

  // The finished image (kept alive by the builder for GgufFile::FromBuffer).
  const std::vector<uint8_t>& Finish() {
    image_.clear();
    const uint32_t magic = 0x46554747, version = 3;
    const uint64_t n_tensors = 0;
    Append(&magic, 4);
    Append(&version, 4);
    Append(&n_tensors, 8);
    Append(&count_, 8);
    image_.insert(image_.end(), body_.begin(), body_.end());
    while (image_.size() % 32) image_.push_back(0);
    return image_;
  }

 private:
  void Raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    body_.insert(body_.end(), b, b + n);
  }
  void Append(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    image_.insert(image_.end(), b, b + n);
  }
  void Str(std::string_view s) {
    const uint64_t n = s.size();
    Raw(&n, 8);
    Raw(s.data(), s.size());
  }
  void Key(std::string_view key, uint32_t type) {
    ++count_;
    Str(key);
    Raw(&type, 4);
  }
  void ArrayHeader(std::string_view key, uint32_t elem_type, uint64_t n) {
    Key(key, 9);
    Raw(&elem_type, 4);
    Raw(&n, 8);
  }

  uint64_t count_ = 0;
  std::vector<uint8_t> body_;
  std::vector<uint8_t> image_;
};

StatusOr<Vocab> Load(MetadataBuilder& b) {
  const std::vector<uint8_t>& image = b.Finish();
  TANDEM_ASSIGN_OR_RETURN(auto file, GgufFile::FromBuffer(image.data(), image.size()));
  return LoadVocab(*file);
}

// A tiny SentencePiece vocab: <unk> <s> </s>, the 256 byte tokens, then pieces.
MetadataBuilder SpmVocab() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    tokens.push_back(hex);
    scores.push_back(0);
    types.push_back(6);
  }
  for (auto [text, score] : std::vector<std::pair<std::string, float>>{{"\xe2\x96\x81", -1},
                                                                       {"a", -2},
                                                                       {"b", -3},
                                                                       {"ab", -4},
                                                                       {"\xe2\x96\x81"
                                                                        "ab",
                                                                        -5},
                                                                       {"<end_of_turn>", 0}}) {
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(1);  // normal; "<end_of_turn>" is promoted by name
  }
  MetadataBuilder b;
  b.String("tokenizer.ggml.model", "llama")
      .Strings("tokenizer.ggml.tokens", tokens)
      .Floats("tokenizer.ggml.scores", scores)
      .Int32s("tokenizer.ggml.token_type", types);
  return b;
}

TEST(VocabTest, SentencePieceDefaultsAndEog) {
  MetadataBuilder b = SpmVocab();
  auto vocab = Load(b);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->model, "llama");
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_TRUE(vocab->add_bos);
  EXPECT_FALSE(vocab->add_eos);
  EXPECT_TRUE(vocab->add_space_prefix);
  // "<end_of_turn>" is found by name: it becomes the EOT, an EOG and a control token.
  const int32_t eot = vocab->size() - 1;
  EXPECT_EQ(vocab->eot_id, eot);
  EXPECT_EQ(vocab->types[eot], TokenType::kControl);
  EXPECT_EQ(vocab->eog_ids, (std::vector<int32_t>{2, eot}));
}

TEST(VocabTest, MetadataOverridesDefaults) {
  MetadataBuilder b = SpmVocab();
  b.Uint32("tokenizer.ggml.bos_token_id", 2)
      .Uint32("tokenizer.ggml.eos_token_id", 999999)  // out of range: default kept
      .Bool("tokenizer.ggml.add_bos_token", false)
      .Bool("tokenizer.ggml.add_space_prefix", false);
  auto vocab = Load(b);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->bos_id, 2);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_FALSE(vocab->add_bos);
  EXPECT_FALSE(vocab->add_space_prefix);
}

TEST(VocabTest, LengthMismatchNamesTheKey) {
  MetadataBuilder b;
  b.String("tokenizer.ggml.model", "llama")
      .Strings("tokenizer.ggml.tokens", {"a", "b", "c"})
      .Floats("tokenizer.ggml.scores", {0, 0});
  auto vocab = Load(b);
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(vocab.status().message().find("tokenizer.ggml.scores"), std::string::npos);

  MetadataBuilder t;
  t.String("tokenizer.ggml.model", "llama")
      .Strings("tokenizer.ggml.tokens", {"a", "b"})
      .Int32s("tokenizer.ggml.token_type", {1, 1, 1});
  auto vocab2 = Load(t);
  ASSERT_FALSE(vocab2.ok());
  EXPECT_NE(vocab2.status().message().find("tokenizer.ggml.token_type"), std::string::npos);
}

TEST(VocabTest, BpeNeedsMerges) {
  MetadataBuilder b;
  b.String("tokenizer.ggml.model", "gpt2").Strings("tokenizer.ggml.tokens", {"a", "b"});
  auto vocab = Load(b);
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.status().message().find("tokenizer.ggml.merges"), std::string::npos);
}

TEST(VocabTest, CreateRejectsUnsupportedModels) {
  MetadataBuilder b;
  b.String("tokenizer.ggml.model", "bert").Strings("tokenizer.ggml.tokens", {"a", "b"});
  auto vocab = Load(b);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  auto tokenizer = Tokenizer::Create(*vocab);
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(tokenizer.status().message().find("gpt2"), std::string::npos);

  MetadataBuilder p;
  p.String("tokenizer.ggml.model", "gpt2")
      .String("tokenizer.ggml.pre", "falcon")
      .Strings("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .Strings("tokenizer.ggml.merges", {"a b"});
  auto bpe_vocab = Load(p);
  ASSERT_TRUE(bpe_vocab.ok()) << bpe_vocab.status().ToString();
  auto bpe = Tokenizer::Create(*bpe_vocab);
  ASSERT_FALSE(bpe.ok());
  EXPECT_EQ(bpe.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(bpe.status().message().find("qwen2"), std::string::npos);
}

TEST(VocabTest, SyntheticSpmEncodeDecode) {
  MetadataBuilder b = SpmVocab();
  auto vocab = Load(b);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  auto tokenizer = Tokenizer::Create(std::move(vocab).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const Tokenizer& t = **tokenizer;
  const int32_t space = *t.FindToken("\xe2\x96\x81");
  const int32_t ab = *t.FindToken("ab");
  const int32_t space_ab = *t.FindToken(
      "\xe2\x96\x81"
      "ab");
  const int32_t eot = *t.FindToken("<end_of_turn>");
  // "ab ab" is encoded as "▁ab▁ab": only pairs whose concatenation is a token merge,
  // so "ab" forms first, then "▁" + "ab".
  EXPECT_EQ(t.Encode("ab ab", true, false), (std::vector<int32_t>{1, space_ab, space_ab}));
  // 'c' is not a piece: byte fallback to <0x63> (id 3 + 0x63).
  EXPECT_EQ(t.Encode("c", false, false), (std::vector<int32_t>{space, 3 + 0x63}));
  // Control spellings only with parse_special; the text after gets a space prefix.
  EXPECT_EQ(t.Encode("<end_of_turn>ab", false, true), (std::vector<int32_t>{eot, space_ab}));
  // As llama.cpp, removing the BOS keeps the prefixed space.
  EXPECT_EQ(t.Decode({1, space_ab, ab, eot}, /*skip_special=*/true), " abab");
  EXPECT_EQ(t.Decode({space_ab, ab}, /*skip_special=*/true), "abab");
  EXPECT_EQ(t.Decode({1, space_ab, ab, eot}, /*skip_special=*/false), "<s> abab<end_of_turn>");
  EXPECT_TRUE(t.IsEog(eot));
  EXPECT_TRUE(t.IsEog(2));
  EXPECT_FALSE(t.IsEog(ab));
  EXPECT_EQ(t.TokenToPiece(3 + 0x41, false), "A");
  EXPECT_EQ(t.TokenToPiece(-1, true), "");
}

}  // namespace
}  // namespace tandem
