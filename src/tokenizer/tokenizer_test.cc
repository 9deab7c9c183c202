// Golden tests: our Tokenizer against llama.cpp (llama-cpp-python 0.3.36) on real
// vocabs. The golden files come from tools/make_tokenizer_golden.py; the vocab
// files from scripts/fetch_vocabs.sh (models/vocab/) and the default gemma3 model
// (models/default.gguf, or $TANDEM_MODEL). A missing model file fails the test
// unless TANDEM_ALLOW_MISSING_MODELS=1, which skips it instead.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "model/gguf_file.h"
#include "model/test_json.h"
#include "model/vocab.h"

namespace tandem {
namespace {

using testing::JsonValue;

std::string SourceDir() {
  const char* dir = std::getenv("TANDEM_SOURCE_DIR");
  return (dir != nullptr && *dir != '\0') ? dir : ".";
}

bool AllowMissingModels() {
  const char* allow = std::getenv("TANDEM_ALLOW_MISSING_MODELS");
  return allow != nullptr && std::string(allow) == "1";
}

struct GoldenVocab {
  const char* name;        // tests/data/tokenizer_golden_<name>.json
  const char* model_path;  // relative to the source dir
  // Decode(Encode(s)) == s. False where llama.cpp's detokenizer cleans up spaces
  // before punctuation (gpt-2, llama3, gpt-neox), which loses " ," and the like.
  bool decode_round_trips;
};

// Same table as tools/make_tokenizer_golden.py.
const GoldenVocab kGoldenVocabs[] = {
    {"gemma3", "models/default.gguf", true},
    {"qwen2", "models/vocab/ggml-vocab-qwen2.gguf", true},
    {"llama-bpe", "models/vocab/ggml-vocab-llama-bpe.gguf", false},
    {"gpt-2", "models/vocab/ggml-vocab-gpt-2.gguf", false},
    {"llama-spm", "models/vocab/ggml-vocab-llama-spm.gguf", true},
    {"gpt-neox", "models/vocab/ggml-vocab-gpt-neox.gguf", false},
};

void PrintTo(const GoldenVocab& v, std::ostream* os) { *os << v.name; }

std::string ModelPath(const GoldenVocab& v) {
  if (std::string(v.name) == "gemma3") {
    if (const char* model = std::getenv("TANDEM_MODEL"); model != nullptr && *model != '\0') {
      return model;
    }
  }
  return SourceDir() + "/" + v.model_path;
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 15]);
  }
  return out;
}

std::string Ids(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  return out.str();
}

class TokenizerGoldenTest : public ::testing::TestWithParam<GoldenVocab> {
 protected:
  // Loading a vocab takes up to ~0.5 s, so each one is loaded once per process.
  struct Loaded {
    std::unique_ptr<Tokenizer> tokenizer;
    JsonValue golden;
  };

  void SetUp() override {
    const GoldenVocab& v = GetParam();
    static std::map<std::string, Loaded>* cache = new std::map<std::string, Loaded>();
    auto it = cache->find(v.name);
    if (it == cache->end()) {
      Loaded loaded;
      ASSERT_NO_FATAL_FAILURE(Load(v, &loaded));
      if (IsSkipped()) return;
      it = cache->emplace(v.name, std::move(loaded)).first;
    }
    tokenizer_ = it->second.tokenizer.get();
    golden_ = &it->second.golden;
  }

  static void Load(const GoldenVocab& v, Loaded* loaded) {
    const std::string model = ModelPath(v);
    if (!std::filesystem::exists(model)) {
      const std::string msg = "model file for vocab '" + std::string(v.name) +
                              "' not found: " + model +
                              " (run scripts/fetch_vocabs.sh / scripts/setup.sh, or set "
                              "TANDEM_ALLOW_MISSING_MODELS=1 to skip)";
      if (AllowMissingModels()) GTEST_SKIP() << msg;
      GTEST_FAIL() << msg;
    }
    auto file = GgufFile::Open(model);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto vocab = LoadVocab(**file);
    ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
    auto tokenizer = Tokenizer::Create(std::move(vocab).value());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    loaded->tokenizer = std::move(tokenizer).value();

    const std::string golden_path =
        SourceDir() + "/tests/data/tokenizer_golden_" + std::string(v.name) + ".json";
    auto golden = testing::ReadJsonFile(golden_path);
    ASSERT_TRUE(golden.ok()) << golden.status().ToString();
    loaded->golden = std::move(golden).value();
    ASSERT_NE(loaded->golden.Get("cases"), nullptr) << golden_path;
    ASSERT_NE(loaded->golden.Get("pieces"), nullptr) << golden_path;
  }

  const Tokenizer* tokenizer_ = nullptr;  // owned by the cache
  const JsonValue* golden_ = nullptr;
};

TEST_P(TokenizerGoldenTest, EncodeMatchesLlamaCpp) {
  const auto& cases = golden_->Get("cases")->array;
  ASSERT_GE(cases.size(), 200u);
  size_t matched = 0;
  int reported = 0;
  for (const JsonValue& c : cases) {
    const std::string& text = c.Get("text")->str;
    const std::vector<int32_t> ids = tokenizer_->Encode(text, false, false);
    const std::vector<int32_t> ids_special = tokenizer_->Encode(text, true, true);
    const std::vector<int32_t> want = c.Get("ids")->AsIntVector();
    const std::vector<int32_t> want_special = c.Get("ids_special")->AsIntVector();
    if (ids == want && ids_special == want_special) {
      ++matched;
    } else if (reported++ < 10) {
      ADD_FAILURE() << "text hex " << Hex(text) << " '" << text << "'\n  plain   want ["
                    << Ids(want) << "]\n          got  [" << Ids(ids) << "]\n  special want ["
                    << Ids(want_special) << "]\n          got  [" << Ids(ids_special) << "]";
    }
  }
  std::printf("[ %s ] %zu/%zu strings identical to llama.cpp (plain and special)\n",
              GetParam().name, matched, cases.size());
  EXPECT_EQ(matched, cases.size());
}

TEST_P(TokenizerGoldenTest, DecodeMatchesLlamaCpp) {
  size_t matched = 0;
  const auto& cases = golden_->Get("cases")->array;
  for (const JsonValue& c : cases) {
    const std::vector<int32_t> ids = c.Get("ids_special")->AsIntVector();
    const std::string decoded = tokenizer_->Decode(ids, /*skip_special=*/true);
    const std::string decoded_special = tokenizer_->Decode(ids, /*skip_special=*/false);
    if (decoded == c.Get("decoded")->str && decoded_special == c.Get("decoded_special")->str) {
      ++matched;
    } else {
      ADD_FAILURE() << "ids [" << Ids(ids) << "]\n  want '" << c.Get("decoded")->str << "' / '"
                    << c.Get("decoded_special")->str << "'\n  got  '" << decoded << "' / '"
                    << decoded_special << "'";
    }
  }
  EXPECT_EQ(matched, cases.size());
}

// Pieces of the plain encoding concatenate back to the input, byte for byte, and so
// does Decode where the vocab's detokenizer does not clean up spaces.
TEST_P(TokenizerGoldenTest, RoundTrip) {
  const bool strips_prefix = tokenizer_->vocab().add_space_prefix;
  const bool spm = tokenizer_->vocab().model == "llama";
  for (const JsonValue& c : golden_->Get("cases")->array) {
    const std::string& text = c.Get("text")->str;
    // SentencePiece spells spaces as U+2581, so a literal U+2581 decodes as a space.
    if (spm && text.find("\xe2\x96\x81") != std::string::npos) continue;
    const std::vector<int32_t> ids = tokenizer_->Encode(text, false, false);
    std::string joined;
    for (int32_t id : ids) joined += tokenizer_->TokenToPiece(id, /*special=*/true);
    const std::string want = (strips_prefix && !text.empty()) ? " " + text : text;
    EXPECT_EQ(Hex(joined), Hex(want)) << "text '" << text << "'";
    if (GetParam().decode_round_trips) {
      EXPECT_EQ(tokenizer_->Decode(ids, /*skip_special=*/false), text);
      // Dropping a BOS keeps SentencePiece's prefix space (as llama.cpp does).
      const std::string after_bos = strips_prefix && !text.empty() ? " " + text : text;
      EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text, true, false), true), after_bos);
    }
  }
}

TEST_P(TokenizerGoldenTest, TokenToPieceMatchesLlamaCpp) {
  for (const JsonValue& p : golden_->Get("pieces")->array) {
    const int32_t id = static_cast<int32_t>(p.array[0].number);
    EXPECT_EQ(Hex(tokenizer_->TokenToPiece(id, true)), p.array[1].str) << "id " << id;
    EXPECT_EQ(Hex(tokenizer_->TokenToPiece(id, false)), p.array[2].str) << "id " << id;
  }
}

TEST_P(TokenizerGoldenTest, SpecialIdsMatchLlamaCpp) {
  const Vocab& vocab = tokenizer_->vocab();
  EXPECT_EQ(vocab.size(), golden_->Get("n_vocab")->AsInt());
  EXPECT_EQ(vocab.bos_id, golden_->Get("bos")->AsInt());
  EXPECT_EQ(vocab.eos_id, golden_->Get("eos")->AsInt());
  EXPECT_EQ(vocab.add_bos, golden_->Get("add_bos")->boolean);
  EXPECT_EQ(vocab.add_eos, golden_->Get("add_eos")->boolean);
  const std::vector<int32_t> eog = golden_->Get("eog_ids")->AsIntVector();
  EXPECT_EQ(Ids(vocab.eog_ids), Ids(eog));
  for (int32_t id : eog) EXPECT_TRUE(tokenizer_->IsEog(id)) << id;
  EXPECT_EQ(vocab.eot_id, golden_->Get("eot")->AsInt());
}

// ~10 KB of mixed text encodes; the time is printed (a measurement, not asserted: tests
// never assert timings; a quadratic path shows in this line, at 50 ms on an idle core).
TEST_P(TokenizerGoldenTest, EncodesTenKilobytes) {
  std::string text;
  const auto& cases = golden_->Get("cases")->array;
  for (size_t i = 0; text.size() < 10 * 1024; i = (i + 1) % cases.size()) {
    text += cases[i].Get("text")->str;
    text += ' ';
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer_->Encode(text, true, true);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ %s ] encoded %zu bytes into %zu tokens in %.2f ms\n", GetParam().name, text.size(),
              ids.size(), ms);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(tokenizer_->Encode(text, true, true), ids);  // deterministic
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerGoldenTest, ::testing::ValuesIn(kGoldenVocabs),
                         [](const ::testing::TestParamInfo<GoldenVocab>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tandem
