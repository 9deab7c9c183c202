// The forward pass against llama.cpp: teacher-forced top-1 tokens and top logits from
// tests/data/golden_*.json (made by tools/make_golden.py with llama-cpp-python).
//
// Tests named *RealModel* use the default model (models/default.gguf); the others use
// the generated random-weight fixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/thread_pool.h"
#include "engine/generator.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/test_paths.h"

namespace tandem {
namespace {

std::string SourceDir() {
  const char* src = std::getenv("TANDEM_SOURCE_DIR");
  return (src != nullptr && *src != '\0') ? src : ".";
}

std::string DefaultModelPath() {
  if (const char* m = std::getenv("TANDEM_MODEL"); m != nullptr && *m != '\0') return m;
  return SourceDir() + "/models/default.gguf";
}

nlohmann::json ReadGolden(const std::string& name) {
  std::ifstream in(SourceDir() + "/tests/data/golden_" + name + ".json");
  if (!in) return nullptr;
  return nlohmann::json::parse(in);
}

struct Agreement {
  int positions = 0;
  int top1_matches = 0;
  // Positions where llama.cpp's token-by-token path picks the same top-1 as its batched
  // path (the golden data), and tandem's matches there.
  int stable_positions = 0;
  int stable_matches = 0;
  double max_logit_diff = 0;  // over llama.cpp's top-k tokens
  double first_position_diff = 0;  // the same, at each prompt's first position only
  int first_positions = 0, first_positions_exact = 0;  // prompts; those within 1e-3
  // Positions where tandem's top-1 is llama.cpp's token-by-token answer, and where
  // llama.cpp's batched answer is (its two paths' own agreement).
  int token_by_token_matches = 0;
  int llamacpp_self_matches = 0;
};

Agreement CompareWithGolden(const Model& model, const nlohmann::json& golden) {
  ThreadPool pool(2);
  Forward forward(model.config(), model.weights(), &pool);
  Agreement a;
  const int n_vocab = model.config().n_vocab;
  for (const auto& prompt : golden["prompts"]) {
    std::vector<int32_t> tokens = prompt["tokens"].get<std::vector<int32_t>>();
    ContiguousKvStore kv(model.config().n_layers, static_cast<int64_t>(tokens.size()),
                         model.config().kv_dim(), model.config().v_dim());
    ForwardSequence s{tokens.data(), static_cast<int>(tokens.size()), 0, &kv, true};
    std::vector<float> logits;
    forward.Run({s}, &logits);
    for (size_t i = 0; i < tokens.size(); ++i) {
      const float* row = logits.data() + i * n_vocab;
      int32_t best = 0;
      for (int v = 1; v < n_vocab; ++v) best = row[v] > row[best] ? v : best;
      ++a.positions;
      const bool match = best == prompt["top1"][i].get<int32_t>();
      if (match) ++a.top1_matches;
      if (prompt.contains("top1_token_by_token") &&
          prompt["top1_token_by_token"][i] == prompt["top1"][i]) {
        ++a.stable_positions;
        if (match) ++a.stable_matches;
      }
      double pos_diff = 0;
      for (const auto& pair : prompt["top"][i]) {
        const double diff = std::fabs(row[pair[0].get<int>()] - pair[1].get<double>());
        pos_diff = std::max(pos_diff, diff);
      }
      a.max_logit_diff = std::max(a.max_logit_diff, pos_diff);
      if (i == 0) {
        // llama.cpp's two paths differ in the last bits for some tensor types (its
        // batched kernels repack them); the first position is compared with the nearer.
        if (prompt.contains("top_token_by_token")) {
          double tbt_diff = 0;
          for (const auto& pair : prompt["top_token_by_token"][i]) {
            tbt_diff = std::max(tbt_diff, std::fabs(row[pair[0].get<int>()] - pair[1].get<double>()));
          }
          pos_diff = std::min(pos_diff, tbt_diff);
        }
        a.first_position_diff = std::max(a.first_position_diff, pos_diff);
        ++a.first_positions;
        if (pos_diff < 1e-3) ++a.first_positions_exact;
      }
      if (prompt.contains("top1_token_by_token")) {
        const int32_t tbt = prompt["top1_token_by_token"][i].get<int32_t>();
        if (best == tbt) ++a.token_by_token_matches;
        if (prompt["top1"][i].get<int32_t>() == tbt) ++a.llamacpp_self_matches;
      }
      if (std::getenv("TANDEM_GOLDEN_VERBOSE")) {
        std::printf("pos %zu: ours %d theirs %d max diff %.4f\n", i, best, prompt["top1"][i].get<int>(), pos_diff);
      }
    }
  }
  return a;
}

void ExpectAgreement(const std::string& model_path, const std::string& golden_name,
                     double max_logit_diff) {
  if (!std::filesystem::exists(model_path)) {
    if (std::getenv("TANDEM_ALLOW_MISSING_MODELS")) GTEST_SKIP() << model_path << " missing";
    FAIL() << model_path << " is missing: run scripts/setup.sh (and tools/make_fixtures.py)";
  }
  nlohmann::json golden = ReadGolden(golden_name);
  ASSERT_FALSE(golden.is_null()) << "tests/data/golden_" << golden_name << ".json missing";
  auto model = Model::Load(model_path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Agreement a = CompareWithGolden(**model, golden);
  const double rate = static_cast<double>(a.top1_matches) / a.positions;
  // llama.cpp's own token-by-token results agree with its batched results (the golden
  // data) only this often; near-ties flip with any change of summation order or
  // rounding. Tandem must agree at least as well as llama.cpp agrees with itself,
  // and at 99% where llama.cpp itself does.
  const double floor = std::min(0.99, golden["llamacpp_self_top1_agreement"].get<double>());
  std::printf("%s: top-1 agreement %d/%d (%.2f%%; llama.cpp with itself %.2f%%), max |logit diff| on "
              "llama.cpp's top-%d: %.4f\n",
              golden_name.c_str(), a.top1_matches, a.positions, 100 * rate, 100 * floor,
              golden["top_k"].get<int>(), a.max_logit_diff);
  EXPECT_GE(rate, floor);
  EXPECT_LE(a.max_logit_diff, max_logit_diff);
  if (a.stable_positions > 0) {
    // Recorded, not gated (docs/PERFORMANCE.md): agreement where llama.cpp's answer does
    // not depend on its own summation order.
    std::printf("%s: top-1 agreement where llama.cpp agrees with itself %d/%d (%.2f%%)\n",
                golden_name.c_str(), a.stable_matches, a.stable_positions,
                100.0 * a.stable_matches / a.stable_positions);
  }
}

// Sparse fixtures. Random-weight MoE models are chaotic: a last-bit difference anywhere
// (a summation order, one activation rounded to the other int8 step) can flip a top-k
// expert choice downstream, and llama.cpp's own batched and token-by-token paths
// disagree on the top-1 token at 0.2-3% of these fixtures' positions. So the gates are:
// at each prompt's first position (no attention mixing yet) the logits match one of
// llama.cpp's two paths to 0.05, and to 1e-3 at all but two prompts in nine (the routing,
// experts, shared expert and LM head computed as llama.cpp does, a rounding flip
// allowed); top-1 agreement where llama.cpp agrees with itself >= 99% (95% for the joint
// attn_kv_b file; the figures are printed and recorded in docs/PERFORMANCE.md); and the
// perplexity of the fixture text
// within 1% (ExpectPerplexityNear).
// `bit_level_first`: false for a file Tandem runs by another algorithm than llama.cpp
// does (the joint attn_kv_b: llama.cpp unabsorbed, Tandem absorbed through a Q8_0
// split), where no position can be bit-level and the perplexity gate holds it.
void ExpectSparseAgreement(const std::string& model_path, const std::string& golden_name,
                           bool bit_level_first, double min_stable_agreement) {
  nlohmann::json golden = ReadGolden(golden_name);
  ASSERT_FALSE(golden.is_null()) << "tests/data/golden_" << golden_name << ".json missing";
  auto model = Model::Load(model_path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Agreement a = CompareWithGolden(**model, golden);
  std::printf("%s: top-1 agreement %d/%d (%.2f%%; llama.cpp batched vs token by token %.2f%%); with llama.cpp's "
              "token-by-token answer %d/%d (llama.cpp batched: %d/%d); where llama.cpp agrees with itself %d/%d "
              "(%.2f%%); max |logit diff| %.4f, at first positions %.4f (%d/%d within 1e-3)\n",
              golden_name.c_str(), a.top1_matches, a.positions, 100.0 * a.top1_matches / a.positions,
              100 * golden["llamacpp_self_top1_agreement"].get<double>(), a.token_by_token_matches, a.positions,
              a.llamacpp_self_matches, a.positions, a.stable_matches, a.stable_positions,
              100.0 * a.stable_matches / std::max(1, a.stable_positions), a.max_logit_diff, a.first_position_diff,
              a.first_positions_exact, a.first_positions);
  if (!bit_level_first) {
    EXPECT_LE(a.first_position_diff, 0.25);
  } else {
    EXPECT_LE(a.first_position_diff, 0.05);
    EXPECT_GE(a.first_positions_exact, a.first_positions - 2);
  }
  EXPECT_GE(static_cast<double>(a.stable_matches) / a.stable_positions, min_stable_agreement);
}

void ExpectPerplexityNear(const std::string& model_path, const std::string& golden_name, int threads) {
  nlohmann::json golden = ReadGolden(golden_name);
  ASSERT_TRUE(golden.contains("perplexity")) << golden_name;
  const auto& ref = golden["perplexity"];
  auto model = Model::Load(model_path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::ifstream in(SourceDir() + "/tests/data/perplexity.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ThreadPool pool(threads);
  auto result = Perplexity(**model, &pool, text, ref["ctx"].get<int>(), ref["chunks"].get<int>(), nullptr);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const double want = ref["ppl"].get<double>();
  std::printf("%s perplexity: tandem %.4f, llama.cpp %.4f (token by token %.4f; %d chunks of %d)\n",
              golden_name.c_str(), result->ppl, want, ref.value("ppl_token_by_token", 0.0),
              ref["chunks"].get<int>(), ref["ctx"].get<int>());
  EXPECT_EQ(result->scored_tokens, ref["scored_tokens"].get<int64_t>());
  // Within 1% of llama.cpp: of its batched figure, or (where its two paths differ by
  // more than that, as they do with some repacked tensor types) of its token-by-token one.
  const double tbt = ref.value("ppl_token_by_token", want);
  EXPECT_LE(std::min(std::fabs(result->ppl - want) / want, std::fabs(result->ppl - tbt) / tbt), 0.01)
      << "tandem " << result->ppl << ", llama.cpp " << want << " / token by token " << tbt;
}

TEST(ForwardGoldenRealModel, DefaultModelMatchesLlamaCpp) {
  ExpectAgreement(DefaultModelPath(), "default", 3.0);
}

TEST(ForwardGoldenRealModel, PerplexityWithinOnePercentOfLlamaCpp) {
  const std::string path = DefaultModelPath();
  if (!std::filesystem::exists(path)) {
    if (std::getenv("TANDEM_ALLOW_MISSING_MODELS")) GTEST_SKIP() << path << " missing";
    FAIL() << path << " is missing: run scripts/setup.sh";
  }
  ExpectPerplexityNear(path, "default", 2);
}

// --kv-cache-dtype: the same text and windows as the llama.cpp comparison above, the
// cache in each dtype; fp8 (e4m3, vLLM's "fp8") and bf16 within 1% of the fp16 cache's
// perplexity (the bar), e5m2 (two mantissa bits) within 8%. Measured: e4m3
// -0.01%, bf16 +0.07%, e5m2 +2.96%; at earlier commits +0.33 / +0.43 / +3.71% and
// +0.50 / +0.44 / +4.63% (this model's float-order noise; docs/PERFORMANCE.md).
TEST(ForwardGoldenRealModel, PerplexityWithEachKvCacheDtype) {
  const std::string path = DefaultModelPath();
  if (!std::filesystem::exists(path)) {
    if (std::getenv("TANDEM_ALLOW_MISSING_MODELS")) GTEST_SKIP() << path << " missing";
    FAIL() << path << " is missing: run scripts/setup.sh";
  }
  const nlohmann::json golden = ReadGolden("default");
  const nlohmann::json& ref = golden["perplexity"];
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::ifstream in(SourceDir() + "/tests/data/perplexity.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ThreadPool pool(2);
  auto ppl = [&](KvDtype dtype) {
    auto r = Perplexity(**model, &pool, text, ref["ctx"].get<int>(), ref["chunks"].get<int>(),
                        nullptr, dtype);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->ppl : 0.0;
  };
  const double f16 = ppl(KvDtype::kF16);
  for (auto [dtype, bound] : {std::pair{KvDtype::kFp8E4M3, 0.01}, std::pair{KvDtype::kBf16, 0.01},
                              std::pair{KvDtype::kFp8E5M2, 0.08}}) {
    const double p = ppl(dtype);
    std::printf("perplexity with a %s KV cache: %.4f (f16 cache %.4f, %+.2f%%)\n",
                KvDtypeName(dtype), p, f16, 100 * (p - f16) / f16);
    EXPECT_LE(std::fabs(p - f16) / f16, bound) << KvDtypeName(dtype);
  }
}

class ForwardGoldenFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(ForwardGoldenFixture, MatchesLlamaCpp) {
  const std::string arch = GetParam();
  ExpectAgreement(FixturePath(arch + ".gguf"), "fixture_" + arch, 0.25);
}

INSTANTIATE_TEST_SUITE_P(Archs, ForwardGoldenFixture,
                         ::testing::Values("gemma3", "llama", "qwen2", "qwen3"));

struct SparseFixture {
  const char* name;
  bool bit_level_first;  // see ExpectSparseAgreement
  // Top-1 agreement where llama.cpp agrees with itself: the 99% where Tandem
  // reaches it, else 95%. Tandem takes llama.cpp's token-by-token (decode) path's orders:
  // Q8_0 products, Q4_K as its repacked gemv, Q5_K / Q6_K as its vec_dots, the float types
  // as ggml_vec_dot_*, RMSNorm, and the MLA attention and softmax as ggml's (figures in
  // docs/PERFORMANCE.md, "Sparse fixtures in llama.cpp's decode-path order"). Below 99%:
  // the joint attn_kv_b file (llama.cpp runs it unabsorbed).
  double min_stable_agreement = 0.95;
};

class SparseGoldenFixture : public ::testing::TestWithParam<SparseFixture> {};

TEST_P(SparseGoldenFixture, MatchesLlamaCpp) {
  const std::string name = GetParam().name;
  ExpectSparseAgreement(FixturePath(name + ".gguf"), "fixture_" + name, GetParam().bit_level_first,
                        GetParam().min_stable_agreement);
}

// Its own suite, left out of the sanitizer runs (./test.sh's -E SparsePerplexity): 16
// windows per fixture, the same code as MatchesLlamaCpp.
class SparsePerplexity : public ::testing::TestWithParam<SparseFixture> {};

TEST_P(SparsePerplexity, WithinOnePercentOfLlamaCpp) {
  const std::string name = GetParam().name;
  ExpectPerplexityNear(FixturePath(name + ".gguf"), "fixture_" + name, 2);
}

constexpr SparseFixture kSparseFixtures[] = {
    {"qwen3moe-q4_k_m", true, 0.99},   {"qwen3moe-q8_0", true, 0.99},     {"glm4moe-q4_k_m", true, 0.99},
    {"glm4moe-q8_0", true, 0.99},      {"deepseek2-q4_k_m", true, 0.99},  {"deepseek2-q8_0", true, 0.99},
    {"deepseek2-kv_b-q8_0", false},    {"glm-dsa-q4_k_m", true, 0.99},    {"glm-dsa-q8_0", true, 0.99},
    {"deepseek32-q4_k_m", true, 0.99}, {"deepseek32-q8_0", true, 0.99}};

std::string FixtureTestName(const ::testing::TestParamInfo<SparseFixture>& info) {
  std::string s = info.param.name;
  for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Archs, SparsePerplexity, ::testing::ValuesIn(kSparseFixtures), FixtureTestName);

INSTANTIATE_TEST_SUITE_P(Archs, SparseGoldenFixture, ::testing::ValuesIn(kSparseFixtures), FixtureTestName);

// DeepSeek sparse attention's choices against llama.cpp's: tests/data/dsa_selection_*.json
// (tools/make_dsa_selection.py) holds, for the golden long prompt (256 tokens, one
// batch), the positions llama.cpp's indexer keeps at every query past its top_k, read
// from its top_k tensors. Layer 0's must be the same set at every position; later layers
// take inputs through MoE routing, where one rounding flip changes an expert and so the
// scores (see ExpectSparseAgreement), and are printed, not gated.
class SparseSelection : public ::testing::TestWithParam<const char*> {};

TEST_P(SparseSelection, FirstLayerKeepsLlamaCppsPositions) {
  const std::string name = GetParam();
  std::ifstream in(SourceDir() + "/tests/data/dsa_selection_fixture_" + name + ".json");
  ASSERT_TRUE(in) << "tests/data/dsa_selection_fixture_" << name << ".json missing";
  const nlohmann::json want = nlohmann::json::parse(in);
  auto model = Model::Load(FixturePath(name + ".gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  ASSERT_EQ(c.dsa.top_k, want["top_k"].get<int>());
  std::vector<int32_t> tokens = want["tokens"].get<std::vector<int32_t>>();
  ThreadPool pool(2);
  Forward forward(c, (*model)->weights(), &pool);
  std::vector<Forward::DsaChoice> trace;
  forward.set_dsa_trace(&trace);
  ContiguousKvStore kv(c.n_layers, static_cast<int64_t>(tokens.size()), c.kv_dim(), c.v_dim());
  std::vector<float> logits;
  forward.Run({ForwardSequence{tokens.data(), static_cast<int>(tokens.size()), 0, &kv, false}}, &logits);
  for (const auto& layer : want["layers"]) {
    const int il = layer["layer"].get<int>();
    const int64_t first = layer["first_pos"].get<int64_t>();
    int compared = 0, same = 0;
    int64_t first_diff = -1;
    for (const Forward::DsaChoice& ch : trace) {
      if (ch.layer != il) continue;
      const std::vector<int32_t> theirs = layer["kept"][static_cast<size_t>(ch.pos - first)];
      ++compared;
      if (ch.kept == theirs) {
        ++same;
      } else if (first_diff < 0) {
        first_diff = ch.pos;
      }
      if (ch.kept != theirs && il == 0) {
        std::vector<int32_t> only_ours, only_theirs;
        std::set_difference(ch.kept.begin(), ch.kept.end(), theirs.begin(), theirs.end(),
                            std::back_inserter(only_ours));
        std::set_difference(theirs.begin(), theirs.end(), ch.kept.begin(), ch.kept.end(),
                            std::back_inserter(only_theirs));
        ADD_FAILURE() << name << " layer 0, position " << ch.pos << ": tandem alone keeps "
                      << testing::PrintToString(only_ours) << ", llama.cpp alone "
                      << testing::PrintToString(only_theirs);
      }
    }
    std::printf("%s: layer %d keeps llama.cpp's positions at %d/%d sparse positions (first other choice at "
                "position %lld)\n",
                name.c_str(), il, same, compared, static_cast<long long>(first_diff));
    EXPECT_EQ(compared, static_cast<int>(layer["kept"].size())) << "layer " << il;
    if (il == 0) {
      EXPECT_EQ(same, compared);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, SparseSelection, ::testing::Values("deepseek32-q4_k_m", "deepseek32-q8_0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return s;
                         });

}  // namespace
}  // namespace tandem
