// Speculative decoding: the config, the ngram proposer, and the engine's verification —
// greedy and seeded outputs identical with and without drafts (alone, batched, under
// preemption), and the sampled distribution unchanged.
#include "engine/spec_decode.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <map>

#include "engine/engine_test_util.h"

namespace tandem {
namespace {

TEST(SpecConfigTest, ParsesVllmKeys) {
  std::string unsupported;
  auto o = ParseSpeculativeConfig(R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4})",
                                  &unsupported);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->method, SpeculativeOptions::Method::kNgram);
  EXPECT_EQ(o->num_speculative_tokens, 3);
  EXPECT_EQ(o->prompt_lookup_min, 4);  // one bound given: the other follows (vLLM)
  EXPECT_EQ(o->prompt_lookup_max, 4);
  o = ParseSpeculativeConfig(R"({"method":"ngram","num_speculative_tokens":2})", &unsupported);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->prompt_lookup_min, 5);
  EXPECT_EQ(o->prompt_lookup_max, 5);
  EXPECT_TRUE(unsupported.empty());
  o = ParseSpeculativeConfig("", &unsupported);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->method, SpeculativeOptions::Method::kNone);
  o = ParseSpeculativeConfig(R"({"model":"/dev/null","num_speculative_tokens":4})", &unsupported);
  ASSERT_TRUE(o.ok()) << o.status().ToString();  // vLLM: a model without a method is a draft model
  EXPECT_EQ(o->method, SpeculativeOptions::Method::kDraftModel);
  EXPECT_EQ(o->draft_model, "/dev/null");
  EXPECT_EQ(o->num_speculative_tokens, 4);
  // Keys without effect here are named for the log.
  unsupported.clear();
  o = ParseSpeculativeConfig(R"({"method":"ngram","num_speculative_tokens":2,"enforce_eager":true})", &unsupported);
  ASSERT_TRUE(o.ok());
  EXPECT_NE(unsupported.find("enforce_eager"), std::string::npos) << unsupported;
  // The seeds' MTP config.
  for (const char* method : {"deepseek_mtp", "mtp", "glm4_moe_mtp"}) {
    o = ParseSpeculativeConfig(std::string(R"({"num_speculative_tokens":3,"method":")") + method + "\"}", &unsupported);
    ASSERT_TRUE(o.ok()) << method;
    EXPECT_EQ(o->method, SpeculativeOptions::Method::kMtp);
    EXPECT_EQ(o->num_speculative_tokens, 3);
  }
}

TEST(SpecConfigTest, BadInputNamesTheKey) {
  std::string u;
  for (const auto& [json, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"method":"magic","num_speculative_tokens":3})", "magic"},
           {R"({"method":"ngram","num_speculative_tokens":0})", "num_speculative_tokens"},
           {R"({"method":"ngram","num_speculative_tokens":17})", "num_speculative_tokens"},
           {R"({"method":"ngram"})", "num_speculative_tokens"},
           {R"({"method":"ngram","num_speculative_tokens":"3"})", "num_speculative_tokens"},
           {R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":4,"prompt_lookup_max":2})",
            "prompt_lookup_min"},
           {R"({"method":"draft_model","model":"/nonexistent/draft.gguf","num_speculative_tokens":3})",
            "/nonexistent/draft.gguf"},
           {R"([1])", "object"},
       }) {
    auto o = ParseSpeculativeConfig(json, &u);
    ASSERT_FALSE(o.ok()) << json;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(key), std::string::npos) << o.status().message();
  }
}

TEST(NgramProposerTest, ProposesWhatFollowedTheEarliestLongestMatch) {
  NgramProposer p(2, 3);
  // ... 7 8 9 [1] ... 7 8 9 [2] ... 7 8 9 -> the earliest "7 8 9" is followed by 1 5.
  std::vector<int32_t> t = {7, 8, 9, 1, 5, 7, 8, 9, 2, 3, 4, 7, 8, 9};
  EXPECT_EQ(p.Propose(t, 3), (std::vector<int32_t>{1, 5, 7}));
  EXPECT_EQ(p.Propose(t, 1), (std::vector<int32_t>{1}));
  // The longest suffix wins over an earlier shorter one: "5 6" occurs first before 0, but
  // "4 5 6" only before 9.
  EXPECT_EQ(p.Propose(std::vector<int32_t>{5, 6, 0, 4, 5, 6, 9, 9, 4, 5, 6}, 2), (std::vector<int32_t>{9, 9}));
  // No suffix of 2..3 tokens occurs earlier.
  EXPECT_TRUE(p.Propose(std::vector<int32_t>{1, 2, 3, 4, 5}, 3).empty());
  // A match near the end proposes only what exists.
  EXPECT_EQ(p.Propose(std::vector<int32_t>{4, 4, 4}, 5), (std::vector<int32_t>{4}));
  EXPECT_TRUE(p.Propose(std::vector<int32_t>{4}, 5).empty());
  // A repetition loop: the earliest "4 4 4" leaves k tokens after it (the latest, one).
  EXPECT_EQ(p.Propose(std::vector<int32_t>{4, 4, 4, 4, 4, 4, 4, 4}, 4), (std::vector<int32_t>{4, 4, 4, 4}));
}

TEST(SpecAdaptivityTest, CoolsOffWhenDraftsAreRejected) {
  SpecAdaptivity a;
  EXPECT_TRUE(a.ShouldPropose());
  a.Record(SpecAdaptivity::kWindowTokens, 0);
  int off = 0;
  while (!a.ShouldPropose()) ++off;
  EXPECT_EQ(off, SpecAdaptivity::kCoolOffSteps);
  a.Record(SpecAdaptivity::kWindowTokens, SpecAdaptivity::kWindowTokens);
  EXPECT_TRUE(a.ShouldPropose());
}

TEST(SpecControllerTest, DraftsOnlyWhileTheyPay) {
  SpecController c;
  auto period = [&](double with_s, double without_s) {
    int drafting = 0;
    for (int i = 0; i < SpecController::kOffSteps; ++i) {
      const bool d = c.ShouldDraft();
      drafting += d;
      c.OnDecodeStep(d, d ? 3 : 1, d ? 3 * with_s : without_s);
    }
    return drafting;
  };
  // On at first, with a few baseline steps at the end of the period.
  EXPECT_EQ(period(0.02, 0.01), SpecController::kOffSteps - SpecController::kProbeSteps);
  // Drafting cost 0.02 s per token against 0.01: off, probing a few steps per period.
  EXPECT_EQ(period(0.02, 0.01), SpecController::kProbeSteps);
  // Drafts get cheaper than plain steps: back on.
  EXPECT_EQ(period(0.001, 0.01), SpecController::kProbeSteps);
  EXPECT_EQ(period(0.001, 0.01), SpecController::kOffSteps - SpecController::kProbeSteps);
}

TEST(SpecControllerTest, LogsEachTurnWithTheFiguresThatDecidedIt) {
  SpecController c;
  auto period = [&](double with_s, double without_s) {
    testing::internal::CaptureStderr();
    for (int i = 0; i < SpecController::kOffSteps; ++i) {
      const bool d = c.ShouldDraft();
      if (d) c.OnVerified(4, 2);
      c.OnDecodeStep(d, d ? 3 : 1, d ? 3 * with_s : without_s);
    }
    return testing::internal::GetCapturedStderr();
  };
  // On from the start: the first period keeps it on, no line.
  EXPECT_EQ(period(0.001, 0.01), "");
  const std::string off = period(0.02, 0.01);
  EXPECT_NE(off.find("speculative decoding: drafting off: "), std::string::npos) << off;
  EXPECT_NE(off.find(" ms without (moving averages of decode-only steps); 50.0% of "), std::string::npos) << off;
  EXPECT_NE(off.find("draft tokens accepted in the last 64 steps; drafts cost more than they save"),
            std::string::npos)
      << off;
  EXPECT_EQ(period(0.02, 0.01), "");  // still off: said once
  const std::string on = period(0.001, 0.01);
  EXPECT_NE(on.find("speculative decoding: drafting on: "), std::string::npos) << on;
  EXPECT_NE(on.find("% of 16 draft tokens accepted"), std::string::npos) << on;  // the 4 probe steps' drafts
}

// Prompts that repeat themselves, so prompt lookup finds drafts (and the random-weight
// fixtures' greedy outputs tend to loop, which it finds too).
std::vector<std::vector<int32_t>> RepetitivePrompts() {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> p;
    for (int k = 0; k < 12 + 7 * i; ++k) p.push_back(static_cast<int32_t>(200 + (k % (3 + i)) * 11 + i));
    out.push_back(p);
  }
  return out;
}

EngineOptions SpecOptions(int k, int lookup_min = 1, int lookup_max = 3) {
  EngineOptions o;
  o.threads = 1;
  o.speculative.method = SpeculativeOptions::Method::kNgram;
  o.speculative.num_speculative_tokens = k;
  o.speculative.prompt_lookup_min = lookup_min;
  o.speculative.prompt_lookup_max = lookup_max;
  return o;
}

double Counter(MetricsRegistry& m, const std::string& name) {
  const std::string text = m.RenderPrometheus();
  const size_t at = text.find(name + "{");
  if (at == std::string::npos) return 0;
  const size_t sp = text.find(' ', text.find('}', at));
  return std::stod(text.substr(sp + 1, text.find('\n', sp) - sp - 1));
}

GenerationParams Params(int max_tokens, float temperature = 0, uint64_t seed = 0) {
  GenerationParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.sampling.temperature = temperature;
  if (temperature > 0) {
    p.has_seed = true;
    p.sampling.seed = seed;
    p.sampling.top_k = 8;
  }
  return p;
}

class SpecEngineTest : public ::testing::TestWithParam<const char*> {};

// Greedy and seeded sampling, each request alone and all at once: the same tokens with
// drafts (k = 1, 4) as without; and drafts were really accepted (not a vacuous test).
TEST_P(SpecEngineTest, OutputsEqualDecodingWithoutDrafts) {
  auto model = LoadFixture(GetParam());
  ASSERT_NE(model, nullptr);
  const auto prompts = RepetitivePrompts();
  EngineOptions plain_options;
  plain_options.threads = 1;
  for (float temperature : {0.0f, 0.9f}) {
    Harness plain(*model, plain_options);
    // Different lengths, so requests finish in steps where others verify drafts.
    auto len = [](size_t i) { return 40 - 5 * static_cast<int>(i); };
    for (size_t i = 0; i < prompts.size(); ++i) plain.Submit("r" + std::to_string(i), prompts[i], Params(len(i), temperature, 7 + i));
    auto want = plain.Wait();
    for (int k : {1, 4}) {
      Harness batched(*model, SpecOptions(k));
      for (size_t i = 0; i < prompts.size(); ++i) {
        batched.Submit("r" + std::to_string(i), prompts[i], Params(len(i), temperature, 7 + i));
      }
      auto got = batched.Wait();
      int outputs = 0;
      int tokens = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        const std::string id = "r" + std::to_string(i);
        outputs += got[id].callbacks;
        tokens += static_cast<int>(got[id].tokens.size());
        EXPECT_EQ(got[id].tokens, want[id].tokens) << id << " k=" << k << " T=" << temperature;
        EXPECT_EQ(got[id].text, want[id].text) << id;
        EXPECT_EQ(got[id].last.finish_reason, "length");
      }
      Harness alone(*model, SpecOptions(k));
      alone.Submit("r0", prompts[0], Params(40, temperature, 7));
      EXPECT_EQ(alone.Wait()["r0"].tokens, want["r0"].tokens);
      const double drafted = Counter(batched.metrics(), "vllm:spec_decode_num_draft_tokens_total");
      const double accepted = Counter(batched.metrics(), "vllm:spec_decode_num_accepted_tokens_total");
      if (std::string(GetParam()) == "gemma3.gguf") {
        EXPECT_GT(accepted, 0) << "no draft was accepted: the test would prove nothing (drafted " << drafted << ")";
      }
      // A verification's tokens go out as one output (as vLLM's): at most one output per
      // step and request, plus each request's last.
      EXPECT_LE(outputs, tokens - static_cast<int>(accepted) + static_cast<int>(prompts.size()))
          << "accepted " << accepted << " of " << tokens << " tokens";
      EXPECT_LE(accepted, drafted);
      EXPECT_EQ(batched.engine().Snapshot().kv_cache_usage, 0.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpecEngineTest, ::testing::Values("llama.gguf", "gemma3.gguf"),
                         [](const auto& info) { return std::string(info.param).substr(0, 5); });

TEST(SpecEngineTest2, LogprobsAndPreemptionStillHold) {
  auto model = LoadFixture("gemma3.gguf");
  ASSERT_NE(model, nullptr);
  const auto prompts = RepetitivePrompts();
  GenerationParams p = Params(30);
  p.logprobs = 2;
  EngineOptions tiny = SpecOptions(3);
  tiny.block_size = 4;
  tiny.num_kv_blocks = 24;  // preemptions with five requests of ~70 tokens
  EngineOptions plain;
  plain.threads = 1;
  Harness a(*model, plain);
  Harness b(*model, tiny);
  for (size_t i = 0; i < prompts.size(); ++i) {
    a.Submit("r" + std::to_string(i), prompts[i], p);
    b.Submit("r" + std::to_string(i), prompts[i], p);
  }
  auto want = a.Wait();
  auto got = b.Wait();
  for (auto& [id, c] : want) {
    EXPECT_EQ(got[id].tokens, c.tokens) << id;
    ASSERT_EQ(got[id].last.completion_tokens, c.last.completion_tokens);
  }
  EXPECT_GT(Counter(b.metrics(), "vllm:num_preemptions_total"), 0);
  EXPECT_GT(Counter(b.metrics(), "vllm:spec_decode_num_accepted_tokens_total"), 0);
  EXPECT_EQ(b.engine().Snapshot().kv_cache_usage, 0.0);
}

// Unseeded sampling (temperature 2, top_k 4): the distribution of the seventh output
// token, drawn after drafts were verified at earlier positions, is the same with and
// without drafts. Two-sample chi-square test over its values (one per request, so the
// counts are independent; values seen fewer than 10 times in both runs together share
// one bin), with the 0.999 quantile of chi-square for that many degrees of freedom
// (Wilson-Hilferty): a correct engine fails this test with probability about 0.1%.
// (Checked: an engine that keeps every draft instead of the token it drew fails it.)
TEST(SpecEngineTest2, SampledDistributionIsUnchanged) {
  auto model = LoadFixture("gemma3.gguf");
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> prompt = RepetitivePrompts()[1];
  constexpr int kRequests = 400;
  constexpr int kPosition = 6;
  auto run = [&](const EngineOptions& o) {
    Harness h(*model, o);
    GenerationParams p = Params(kPosition + 1);
    p.sampling.temperature = 2.0f;
    p.sampling.top_k = 4;
    for (int i = 0; i < kRequests; ++i) h.Submit("s" + std::to_string(i), prompt, p);
    std::map<int32_t, int> counts;
    for (auto& [id, c] : h.Wait()) ++counts[c.tokens[kPosition]];
    return std::make_pair(counts, Counter(h.metrics(), "vllm:spec_decode_num_accepted_tokens_total"));
  };
  EngineOptions plain;
  plain.threads = 1;
  auto [a, none] = run(plain);
  auto [b, accepted] = run(SpecOptions(3));
  EXPECT_GT(accepted, kRequests) << "too few accepted drafts to test anything";
  std::map<int32_t, std::pair<int, int>> cells;
  for (auto& [t, n] : a) cells[t].first = n;
  for (auto& [t, n] : b) cells[t].second = n;
  std::vector<std::pair<int, int>> bins;
  std::pair<int, int> rare{0, 0};
  for (auto& [t, n] : cells) {
    if (n.first + n.second < 10) {
      rare.first += n.first;
      rare.second += n.second;
    } else {
      bins.push_back(n);
    }
  }
  if (rare.first + rare.second > 0) bins.push_back(rare);
  ASSERT_GE(bins.size(), 2u) << "a single outcome: the test would prove nothing";
  double chi2 = 0;
  for (auto& [x, y] : bins) chi2 += static_cast<double>(x - y) * (x - y) / (x + y);  // equal sample sizes
  const double k = static_cast<double>(bins.size() - 1);
  const double z = 3.0902;  // the 0.999 normal quantile
  const double quantile = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
  EXPECT_LT(chi2, quantile) << "chi-square " << chi2 << " with " << k << " degrees of freedom";
}

EngineOptions DraftOptions(const std::string& draft_fixture, int k) {
  EngineOptions o;
  o.threads = 1;
  o.speculative.method = SpeculativeOptions::Method::kDraftModel;
  o.speculative.num_speculative_tokens = k;
  o.speculative.draft_model = FixturePath(draft_fixture);
  return o;
}

// draft_model: a MoE target (qwen3moe) with a dense draft of the same vocabulary
// (qwen3: different weights, so most drafts are rejected and rolled back) and with
// itself as the draft (greedy drafts are then accepted): greedy and seeded outputs equal
// decoding without drafts, batched (requests finishing at different steps) and alone;
// a small cache (preemptions; the draft's cache runs out too) changes nothing.
TEST(DraftModelTest, OutputsEqualDecodingWithoutDrafts) {
  auto model = LoadFixture("qwen3moe-q8_0.gguf");
  ASSERT_NE(model, nullptr);
  const auto prompts = RepetitivePrompts();
  EngineOptions plain_options;
  plain_options.threads = 1;
  auto len = [](size_t i) { return 30 - 4 * static_cast<int>(i); };
  for (float temperature : {0.0f, 0.9f}) {
    Harness plain(*model, plain_options);
    for (size_t i = 0; i < prompts.size(); ++i) plain.Submit("r" + std::to_string(i), prompts[i], Params(len(i), temperature, 3 + i));
    auto want = plain.Wait();
    for (const char* draft : {"qwen3.gguf", "qwen3moe-q8_0.gguf"}) {
      for (int k : {1, 3}) {
        EngineOptions options = DraftOptions(draft, k);
        if (k == 3 && temperature == 0) {
          options.block_size = 4;
          options.num_kv_blocks = 30;  // preemptions with five requests of ~50 tokens
        }
        Harness spec(*model, options);
        for (size_t i = 0; i < prompts.size(); ++i) spec.Submit("r" + std::to_string(i), prompts[i], Params(len(i), temperature, 3 + i));
        auto got = spec.Wait();
        for (size_t i = 0; i < prompts.size(); ++i) {
          const std::string id = "r" + std::to_string(i);
          EXPECT_EQ(got[id].tokens, want[id].tokens) << id << " draft=" << draft << " k=" << k << " T=" << temperature;
          EXPECT_EQ(got[id].last.finish_reason, "length");
        }
        const double drafted = Counter(spec.metrics(), "vllm:spec_decode_num_draft_tokens_total");
        const double accepted = Counter(spec.metrics(), "vllm:spec_decode_num_accepted_tokens_total");
        EXPECT_GT(drafted, 0) << draft;
        if (std::string(draft) == "qwen3moe-q8_0.gguf" && temperature == 0) {
          // The target drafting for itself: every greedy draft is what it then draws.
          EXPECT_EQ(accepted, drafted) << "k=" << k;
        }
        EXPECT_LE(accepted, drafted);
        EXPECT_EQ(spec.engine().Snapshot().kv_cache_usage, 0.0);
      }
    }
    Harness alone(*model, DraftOptions("qwen3.gguf", 4));
    alone.Submit("r0", prompts[0], Params(len(0), temperature, 3));
    EXPECT_EQ(alone.Wait()["r0"].tokens, want["r0"].tokens);
  }
}

EngineOptions MtpOptions(int k) {
  EngineOptions o;
  o.threads = 1;
  o.speculative.method = SpeculativeOptions::Method::kMtp;
  o.speculative.num_speculative_tokens = k;
  return o;
}

class MtpEngineTest : public ::testing::TestWithParam<const char*> {};

// MTP with the fixtures' NextN block (glm4moe: GQA; deepseek2: MLA): greedy and seeded
// outputs equal decoding without drafts, batched and alone, k = 1 and 3, and with a
// small cache (preemptions recompute the NextN rows too); the NextN layer's rows leave
// no block behind.
TEST_P(MtpEngineTest, OutputsEqualDecodingWithoutDrafts) {
  auto model = LoadFixture(GetParam());
  ASSERT_NE(model, nullptr);
  const auto prompts = RepetitivePrompts();
  EngineOptions plain_options;
  plain_options.threads = 1;
  auto len = [](size_t i) { return 30 - 4 * static_cast<int>(i); };
  for (float temperature : {0.0f, 0.9f}) {
    Harness plain(*model, plain_options);
    for (size_t i = 0; i < prompts.size(); ++i) plain.Submit("r" + std::to_string(i), prompts[i], Params(len(i), temperature, 5 + i));
    auto want = plain.Wait();
    for (int k : {1, 3}) {
      EngineOptions options = MtpOptions(k);
      if (k == 3) {
        options.block_size = 4;
        options.num_kv_blocks = 30;  // preemptions with five requests of ~50 tokens
      }
      Harness spec(*model, options);
      for (size_t i = 0; i < prompts.size(); ++i) spec.Submit("r" + std::to_string(i), prompts[i], Params(len(i), temperature, 5 + i));
      auto got = spec.Wait();
      for (size_t i = 0; i < prompts.size(); ++i) {
        const std::string id = "r" + std::to_string(i);
        EXPECT_EQ(got[id].tokens, want[id].tokens) << id << " k=" << k << " T=" << temperature;
        EXPECT_EQ(got[id].last.finish_reason, "length");
      }
      const double drafted = Counter(spec.metrics(), "vllm:spec_decode_num_draft_tokens_total");
      EXPECT_GT(drafted, 0);
      EXPECT_LE(Counter(spec.metrics(), "vllm:spec_decode_num_accepted_tokens_total"), drafted);
      EXPECT_EQ(spec.engine().Snapshot().kv_cache_usage, 0.0);
    }
    Harness alone(*model, MtpOptions(2));
    alone.Submit("r0", prompts[0], Params(len(0), temperature, 5));
    EXPECT_EQ(alone.Wait()["r0"].tokens, want["r0"].tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MtpEngineTest,
                         ::testing::Values("glm4moe-q4_k_m.gguf", "deepseek2-q4_k_m.gguf", "glm-dsa-q4_k_m.gguf"),
                         [](const auto& info) {
                           std::string name = std::string(info.param).substr(0, 9);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(MtpEngineTest2, RefusesAModelWithoutNextnLayers) {
  auto model = LoadFixture("qwen3moe-q8_0.gguf");
  ASSERT_NE(model, nullptr);
  MetricsRegistry metrics;
  auto engine = Engine::Create(*model, MtpOptions(3), &metrics);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("NextN"), std::string::npos) << engine.status().message();
}

TEST(DraftModelTest, RefusesAnotherVocabulary) {
  auto model = LoadFixture("qwen3.gguf");
  ASSERT_NE(model, nullptr);
  MetricsRegistry metrics;
  auto engine = Engine::Create(*model, DraftOptions("llama.gguf", 2), &metrics);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("model"), std::string::npos) << engine.status().message();
  EXPECT_NE(engine.status().message().find("vocabulary"), std::string::npos) << engine.status().message();
}

}  // namespace
}  // namespace tandem
