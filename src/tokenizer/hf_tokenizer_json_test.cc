// Unit tests of LoadHfTokenizer on small hand-written tokenizer.json texts: what it reads
// (vocab and types, special ids from tokenizer_config.json, add_bos / add_eos, EOG), what
// it refuses (each with its JSON path), and the pieces below it (HfRegex's match
// iteration, the Split behaviors, BPE merging) where the outputs were checked against the
// Python `tokenizers` package.
#include "tokenizer/hf_tokenizer_json.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/hf_pre_tokenizer.h"
#include "tokenizer/hf_regex.h"

namespace tandem {
namespace {

// The pipeline sections of MiniJson (JSON text each).
struct Sections {
  std::string normalizer = "null";
  std::string pre_tokenizer = R"({"type": "WhitespaceSplit"})";
  std::string post_processor = "null";
  std::string decoder = "null";
  std::string merges = R"(["a b", ["ab", "c"]])";
};

// A BPE over a, b, c with the merges "a b" and "ab c", plus three added tokens.
std::string MiniJson(const Sections& s = {}) {
  return R"({"version": "1.0", "added_tokens": [
      {"id": 6, "content": "<s>", "special": true, "normalized": false},
      {"id": 7, "content": "</s>", "special": true, "normalized": false},
      {"id": 8, "content": "<x>", "special": false, "normalized": false}],
    "normalizer": )" +
         s.normalizer + R"(, "pre_tokenizer": )" + s.pre_tokenizer + R"(, "post_processor": )" +
         s.post_processor + R"(, "decoder": )" + s.decoder + R"(,
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "vocab":
      {"<unk>": 0, "a": 1, "b": 2, "c": 3, "ab": 4, "abc": 5}, "merges": )" +
         s.merges + "}}";
}

std::unique_ptr<Tokenizer> Load(const std::string& json, const std::string& config = "",
                                const HfTokenizerOptions& opts = {}) {
  auto t = LoadHfTokenizer(json, config, opts);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::string LoadError(const std::string& json, const std::string& config = "") {
  auto t = LoadHfTokenizer(json, config);
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : t.status().message();
}

TEST(HfTokenizerJsonTest, ReadsVocabTypesAndMerges) {
  auto t = Load(MiniJson());
  ASSERT_NE(t, nullptr);
  const Vocab& v = t->vocab();
  EXPECT_EQ(v.model, "hf");
  ASSERT_EQ(v.size(), 9);
  EXPECT_EQ(v.tokens[5], "abc");
  EXPECT_EQ(v.types[0], TokenType::kUnknown);
  EXPECT_EQ(v.types[4], TokenType::kNormal);
  EXPECT_EQ(v.types[6], TokenType::kControl);
  EXPECT_EQ(v.types[8], TokenType::kUserDefined);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(t->Encode("abc ab ba", false, true), (std::vector<int32_t>{5, 4, 2, 1}));
  EXPECT_EQ(t->Encode("abd", false, true), (std::vector<int32_t>{4, 0}));  // d: the unknown token
  EXPECT_EQ(t->Encode("<s>abc<x>", false, true), (std::vector<int32_t>{6, 5, 8}));
  EXPECT_EQ(t->Encode("<s>a<x>", false, false), (std::vector<int32_t>{0, 0, 0, 1, 8}));
  EXPECT_EQ(*t->FindToken("ab"), 4);
  // No decoder: tokens joined with spaces; special tokens skipped on request.
  EXPECT_EQ(t->Decode({6, 5, 4, 8}, false), "<s> abc ab <x>");
  EXPECT_EQ(t->Decode({6, 5, 4, 8}, true), "abc ab <x>");
  EXPECT_EQ(t->TokenToPiece(6, false), "");
  EXPECT_EQ(t->TokenToPiece(6, true), "<s>");
  EXPECT_EQ(t->TokenToPiece(8, false), "<x>");
  EXPECT_EQ(t->TokenToPiece(99, true), "");
}

TEST(HfTokenizerJsonTest, SpecialIdsComeFromTheConfigAndTheTemplate) {
  Sections sections;
  sections.post_processor = R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [6], "tokens": ["<s>"]}}})";
  const std::string json = MiniJson(sections);
  {
    auto t = Load(json);  // no config: bos is the template's token
    EXPECT_EQ(t->vocab().bos_id, 6);
    EXPECT_TRUE(t->vocab().add_bos);
    EXPECT_EQ(t->Encode("ab", true, true), (std::vector<int32_t>{6, 4}));
  }
  {
    // add_bos_token false overrides the template; the eos token as {"content": ...}.
    auto t = Load(json, R"({"add_bos_token": false, "add_eos_token": true, "bos_token": "<s>",
                            "eos_token": {"content": "</s>", "special": true}, "pad_token": null})");
    EXPECT_EQ(t->vocab().eos_id, 7);
    EXPECT_EQ(t->vocab().pad_id, -1);
    EXPECT_FALSE(t->vocab().add_bos);
    EXPECT_TRUE(t->vocab().add_eos);
    EXPECT_EQ(t->Encode("ab", true, true), (std::vector<int32_t>{4, 7}));
    EXPECT_TRUE(t->IsEog(7));
  }
  {
    // add_bos_token true without a template; a bos text that is no token is ignored.
    auto t = Load(MiniJson(), R"({"add_bos_token": true, "bos_token": "<s>"})");
    EXPECT_EQ(t->Encode("ab", true, true), (std::vector<int32_t>{6, 4}));
    auto u = Load(MiniJson(), R"({"bos_token": "<nope>"})");
    EXPECT_EQ(u->vocab().bos_id, -1);
  }
}

TEST(HfTokenizerJsonTest, EndOfGenerationIds) {
  const std::string json = R"({"added_tokens": [
      {"id": 1, "content": "<|endoftext|>", "special": true},
      {"id": 2, "content": "[gMASK]", "special": true},
      {"id": 3, "content": "<|user|>", "special": true},
      {"id": 4, "content": "<|observation|>", "special": true}],
    "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
  HfTokenizerOptions opts;
  opts.extra_eog_ids = {0};
  auto t = Load(json, "", opts);
  EXPECT_EQ(t->vocab().eog_ids, (std::vector<int32_t>{0, 1, 3, 4}));  // GLM: user, observation
  EXPECT_EQ(t->vocab().eot_id, 1);
  opts.extra_eog_ids = {5};
  EXPECT_FALSE(LoadHfTokenizer(json, "", opts).ok());
}

TEST(HfTokenizerJsonTest, RefusesWhatItDoesNotSupportNamingTheJsonPath) {
  EXPECT_EQ(LoadError("{\"model\": "), "tokenizer.json: is not valid JSON");
  EXPECT_EQ(LoadError("[1, 2]"), "tokenizer.json: is not a JSON object");
  EXPECT_EQ(LoadError(std::string(100, '[') + std::string(100, ']')),
            "tokenizer.json: nests deeper than 64 levels");
  EXPECT_EQ(LoadError(R"({"model": {"type": "WordPiece", "vocab": {}}})"),
            "tokenizer.json: model.type \"WordPiece\" is not supported (only BPE models are)");
  EXPECT_EQ(LoadError(R"({"model": {"type": "Unigram", "vocab": []}})"),
            "tokenizer.json: model.type \"Unigram\" is not supported (only BPE models are)");
  EXPECT_EQ(LoadError(R"({"model": {"type": "BPE", "dropout": 0.1, "vocab": {}, "merges": []}})"),
            "tokenizer.json: model.dropout must be null (BPE dropout samples merges at random)");
  Sections pre;
  pre.pre_tokenizer =
      R"({"type": "Sequence", "pretokenizers": [{"type": "Digits"}, {"type": "Foo"}]})";
  EXPECT_EQ(LoadError(MiniJson(pre)),
            "tokenizer.json: pre_tokenizer.pretokenizers[1].type \"Foo\" is not supported");
  Sections norm;
  norm.normalizer = R"({"type": "Sequence", "normalizers": [{"type": "NFKC"}]})";
  EXPECT_EQ(LoadError(MiniJson(norm)),
            "tokenizer.json: normalizer.normalizers[0].type \"NFKC\" is not supported");
  Sections merges;
  merges.merges = R"(["a b", "x q"])";
  EXPECT_EQ(LoadError(MiniJson(merges)),
            "tokenizer.json: model: merges[1]: \"x\" is not in the vocab");
  merges.merges = R"(["a b", "abc"])";
  EXPECT_EQ(LoadError(MiniJson(merges)), "tokenizer.json: model.merges[1] \"abc\" has no space");
  EXPECT_EQ(LoadError(R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"},
                          "behavior": "Isolated"}, "model": {"vocab": {"a": 0}, "merges": []}})"),
            "tokenizer.json: pre_tokenizer.pattern.Regex bad regex: end pattern with unmatched "
            "parenthesis");
  EXPECT_EQ(LoadError(R"({"pre_tokenizer": {"type": "Split", "pattern": {"String": "a"},
                          "behavior": "Sideways"}, "model": {"vocab": {"a": 0}, "merges": []}})"),
            "tokenizer.json: pre_tokenizer.behavior \"Sideways\" is not supported");
  EXPECT_EQ(
      LoadError(
          R"({"decoder": {"type": "WordPiece"}, "model": {"vocab": {"a": 0}, "merges": []}})"),
      "tokenizer.json: decoder.type \"WordPiece\" is not supported");
  EXPECT_EQ(LoadError(R"({"model": {"vocab": {"a": 2000000}, "merges": []}})"),
            "tokenizer.json: model.vocab has ids up to 2000000 for 1 tokens");
  EXPECT_EQ(LoadError(R"({"model": {"vocab": {"a": -1}, "merges": []}})"),
            "tokenizer.json: model.vocab.\"a\" must be a token id (an integer from 0 to 2^31 - 1)");
  EXPECT_EQ(LoadError(R"({"post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 5],
                          "sep": ["[SEP]", 0]}, "model": {"vocab": {"a": 0}, "merges": []}})"),
            "tokenizer.json: post_processor adds id 5, which no token has");
  EXPECT_EQ(LoadError(MiniJson(), R"({"bos_token": 3})"),
            "tokenizer_config.json: bos_token must be a string, {\"content\": ...} or null");
  Vocab vocab;
  vocab.model = "hf";
  vocab.tokens = {"a"};
  vocab.types = {TokenType::kNormal};
  EXPECT_FALSE(Tokenizer::Create(vocab).ok());
}

TEST(HfTokenizerJsonTest, FilesAreNamedInErrors) {
  const std::string dir = ::testing::TempDir() + "hf_tokenizer_json_test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/tokenizer.json";
  auto missing = LoadHfTokenizerFiles(path + ".absent", "");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  std::ofstream(path) << R"({"model": {"type": "WordLevel", "vocab": {}}})";
  auto bad = LoadHfTokenizerFiles(path, dir + "/no_config.json");
  EXPECT_EQ(bad.status().message(),
            path + ": model.type \"WordLevel\" is not supported (only BPE models are)");
  std::ofstream(path) << MiniJson();
  EXPECT_TRUE(LoadHfTokenizerFiles(path, dir + "/no_config.json").ok());
  EXPECT_TRUE(LoadHfTokenizerFiles(path, "").ok());
}

TEST(HfTokenizerJsonTest, ByteFallbackPiecesAreRawBytes) {
  std::string vocab = R"("<unk>": 0, "a": 1)";
  for (int b = 0; b < 256; ++b) {
    char entry[32];
    std::snprintf(entry, sizeof(entry), ", \"<0x%02X>\": %d", b, 2 + b);
    vocab += entry;
  }
  const std::string json =
      R"({"decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"},
      {"type": "Fuse"}]}, "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
      "vocab": {)" +
      vocab + R"(}, "merges": []}})";
  auto t = Load(json);
  ASSERT_NE(t, nullptr);
  const std::vector<int32_t> ids = t->Encode("a\xe4\xb8\xad", false, true);  // a 中
  ASSERT_EQ(ids, (std::vector<int32_t>{1, 2 + 0xE4, 2 + 0xB8, 2 + 0xAD}));
  EXPECT_EQ(t->vocab().types[2 + 0xE4], TokenType::kByte);
  EXPECT_EQ(t->TokenToPiece(ids[1], false), "\xe4");
  EXPECT_EQ(t->Decode(ids, false), "a\xe4\xb8\xad");
  EXPECT_EQ(t->Decode({2 + 0xE4, 1}, false),
            "\xef\xbf\xbd"
            "a");  // a lone lead byte: U+FFFD
}

TEST(HfTokenizerJsonTest, EncodeRunsConcurrently) {
  auto t = Load(MiniJson());
  ASSERT_NE(t, nullptr);
  std::vector<std::thread> threads;
  std::vector<bool> ok(4, true);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) {
        ok[i] = ok[i] && t->Encode("abc ab <s> c", false, true) == std::vector<int32_t>{5, 4, 6, 3};
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (bool b : ok) EXPECT_TRUE(b);
}

TEST(HfRegexTest, EmptyMatchesFollowTheOnigCrate) {
  auto re = HfRegex::Compile("x*");
  ASSERT_TRUE(re.ok());
  // An empty match right where the previous match ended is skipped.
  using Matches = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ((*re)->FindAll("axxbx"), (Matches{{0, 0}, {1, 3}, {4, 5}}));
  EXPECT_EQ((*re)->FindAll(""), (Matches{{0, 0}}));
  EXPECT_FALSE(HfRegex::Compile("[a").ok());
}

// Outputs of tokenizers' pre_tokenizers.Split(Regex("x*"), behavior) on "axxbx".
TEST(HfPreTokenizerTest, SplitBehaviorsWithEmptyMatches) {
  using B = HfPreTokenizer::Behavior;
  struct Case {
    B behavior;
    bool invert;
    std::vector<std::string> words;
  };
  const Case cases[] = {
      {B::kIsolated, false, {"a", "xx", "b", "x"}},
      {B::kRemoved, false, {"a", "b"}},
      {B::kRemoved, true, {"xx", "x"}},
      {B::kMergedWithPrevious, false, {"axx", "bx"}},
      {B::kMergedWithPrevious, true, {"a", "xxb", "x"}},
      {B::kMergedWithNext, false, {"a", "xxb", "x"}},
      {B::kMergedWithNext, true, {"axx", "bx"}},
      {B::kContiguous, false, {"a", "xx", "b", "x"}},
  };
  for (const Case& c : cases) {
    std::vector<HfPreTokenizer::Step> steps(1);
    steps[0].kind = HfPreTokenizer::Step::Kind::kSplit;
    steps[0].pattern = std::move(HfPattern::Regex("x*")).value();
    steps[0].behavior = c.behavior;
    steps[0].invert = c.invert;
    HfPreTokenizer pre(std::move(steps));
    std::vector<HfWord> words = {{"axxbx", true}};
    pre.PreTokenize(&words);
    std::vector<std::string> texts;
    for (const HfWord& w : words) texts.push_back(w.text);
    EXPECT_EQ(texts, c.words) << static_cast<int>(c.behavior) << " invert " << c.invert;
  }
}

}  // namespace
}  // namespace tandem
