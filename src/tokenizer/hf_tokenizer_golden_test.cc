// Golden tests: LoadHfTokenizer's Tokenizer against the Python `tokenizers` package
// (0.23) on small tokenizers trained in each model family's configuration
// (tests/data/hf_tokenizers/<name>/, written by tools/make_hf_tokenizer_golden.py with
// tools/hf_tokenizers.py): token ids with and without special tokens, special-token
// spellings as text, decoded texts, ill-formed UTF-8 input, and the special ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/test_paths.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/unicode_normalization.h"

namespace tandem {
namespace {

using Json = nlohmann::json;

struct GoldenConfig {
  const char* name;
};

const GoldenConfig kConfigs[] = {
    {"llama3"},         {"qwen2"},  {"qwen3"},        {"deepseek3"},   {"glm45"},
    {"glm5"},           {"gemma3"}, {"t_spm_legacy"}, {"t_metaspace"}, {"t_metaspace_split"},
    {"t_bpe_features"}, {"t_gpt2"},
};

// The configurations whose decoder leaves a token's text alone in the middle of a text,
// so that the pieces of TokenToPiece joined are the decoded text (no Metaspace
// first-token rule, no Strip, no BPEDecoder last-token rule).
const GoldenConfig kPieceConfigs[] = {
    {"llama3"}, {"qwen2"}, {"qwen3"}, {"deepseek3"}, {"glm45"}, {"glm5"}, {"gemma3"}, {"t_gpt2"},
};

void PrintTo(const GoldenConfig& c, std::ostream* os) { *os << c.name; }

std::string Ids(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  return out.str();
}

std::string Unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

class HfTokenizerGoldenTest : public ::testing::TestWithParam<GoldenConfig> {
 protected:
  void SetUp() override {
    const std::string dir = TestDataPath(std::string("hf_tokenizers/") + GetParam().name + "/");
    const std::string golden_text = ReadFileToString(dir + "golden.json");
    ASSERT_FALSE(golden_text.empty()) << "missing " << dir << "golden.json";
    golden_ = Json::parse(golden_text);
    HfTokenizerOptions opts;
    for (const Json& id : golden_["info"]["eos_token_ids"])
      opts.extra_eog_ids.push_back(id.get<int32_t>());
    auto tokenizer =
        LoadHfTokenizerFiles(dir + "tokenizer.json", dir + "tokenizer_config.json", opts);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    tokenizer_ = std::move(tokenizer).value();
  }

  Json golden_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(HfTokenizerGoldenTest, EncodeMatchesTokenizers) {
  int checked = 0;
  for (const Json& row : golden_["strings"]) {
    const std::string text = row["text"].get<std::string>();
    const auto expect = [&](const char* key) { return Ids(row[key].get<std::vector<int32_t>>()); };
    EXPECT_EQ(Ids(tokenizer_->Encode(text, false, true)), expect("ids")) << "text: " << text;
    EXPECT_EQ(Ids(tokenizer_->Encode(text, true, true)), expect("ids_special")) << "text: " << text;
    EXPECT_EQ(Ids(tokenizer_->Encode(text, false, false)), expect("ids_literal"))
        << "text: " << text;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST_P(HfTokenizerGoldenTest, DecodeMatchesTokenizers) {
  for (const Json& row : golden_["strings"]) {
    const std::string text = row["text"].get<std::string>();
    const std::vector<int32_t> ids = row["ids_special"].get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer_->Decode(ids, /*skip_special=*/true), row["decoded"].get<std::string>())
        << "text: " << text;
    EXPECT_EQ(tokenizer_->Decode(ids, /*skip_special=*/false),
              row["decoded_special"].get<std::string>())
        << "text: " << text;
    // decode(encode(x)) == x wherever it holds for tokenizers (not where the normalizer
    // changed the text).
    const std::vector<int32_t> plain = tokenizer_->Encode(text, false, true);
    EXPECT_EQ(tokenizer_->Decode(plain, false) == text, row["round_trips"].get<bool>())
        << "text: " << text;
  }
}

class HfTokenizerPiecesTest : public HfTokenizerGoldenTest {};

TEST_P(HfTokenizerPiecesTest, PiecesJoinToTheDecodedText) {
  for (const Json& row : golden_["strings"]) {
    const std::string text = row["text"].get<std::string>();
    const std::vector<int32_t> ids = tokenizer_->Encode(text, false, true);
    std::string joined;
    for (int32_t id : ids) joined += tokenizer_->TokenToPiece(id, /*special=*/true);
    EXPECT_EQ(unicode::ToValidUtf8(joined), tokenizer_->Decode(ids, false)) << "text: " << text;
  }
}

TEST_P(HfTokenizerGoldenTest, IllFormedUtf8IsReadAsReplacementCharacters) {
  for (const Json& row : golden_["malformed"]) {
    const std::string bytes = Unhex(row["hex"].get<std::string>());
    EXPECT_EQ(Ids(tokenizer_->Encode(bytes, false, true)),
              Ids(row["ids"].get<std::vector<int32_t>>()))
        << "hex: " << row["hex"].get<std::string>();
  }
}

TEST_P(HfTokenizerGoldenTest, SpecialIds) {
  const Vocab& v = tokenizer_->vocab();
  const Json& info = golden_["info"];
  EXPECT_EQ(v.model, "hf");
  EXPECT_EQ(v.size(), info["vocab_size"].get<int32_t>());
  auto id_or = [](const Json& j) { return j.is_null() ? -1 : j.get<int32_t>(); };
  EXPECT_EQ(v.bos_id, id_or(info["bos_token_id"]));
  EXPECT_EQ(v.eos_id, id_or(info["eos_token_id"]));
  EXPECT_EQ(v.pad_id, id_or(info["pad_token_id"]));
  if (v.eos_id >= 0) {
    EXPECT_TRUE(tokenizer_->IsEog(v.eos_id));
  }
  for (const Json& id : info["eos_token_ids"]) EXPECT_TRUE(tokenizer_->IsEog(id.get<int32_t>()));
  // add_bos / add_eos agree with what add_special puts before and after a text.
  const std::vector<int32_t> plain = tokenizer_->Encode("hello", false, true);
  const std::vector<int32_t> full = tokenizer_->Encode("hello", true, true);
  const auto at = std::search(full.begin(), full.end(), plain.begin(), plain.end());
  ASSERT_NE(at, full.end());
  const std::vector<int32_t> prefix(full.begin(), at), suffix(at + plain.size(), full.end());
  EXPECT_EQ(v.add_bos, !prefix.empty() && prefix.front() == v.bos_id);
  EXPECT_EQ(v.add_eos, !suffix.empty() && suffix.back() == v.eos_id);
  // Every token text finds its id back (where no other token shares the text).
  for (int32_t id = 0; id < v.size(); ++id) {
    if (v.tokens[id].empty()) continue;
    const auto found = tokenizer_->FindToken(v.tokens[id]);
    ASSERT_TRUE(found.has_value()) << v.tokens[id];
    EXPECT_EQ(v.tokens[*found], v.tokens[id]);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, HfTokenizerGoldenTest, ::testing::ValuesIn(kConfigs),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(Configs, HfTokenizerPiecesTest, ::testing::ValuesIn(kPieceConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tandem
