// Prefill/decode disaggregation inside the engine: a producer engine keeps a request's
// KV blocks, a consumer engine pulls them over the real transfer server (TCP or the
// same-host memfd path) and continues; outputs must equal one colocated engine's.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/metrics.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "kv_connector/kv_connector_factory.h"
#include "model/model.h"

namespace tandem {
namespace {

GenerationParams Greedy(int max_tokens) {
  GenerationParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

EngineOptions Base() {
  EngineOptions o;
  o.kv_connector_factory = CreateKvConnector;
  o.num_kv_blocks = 256;
  o.block_size = 16;
  o.threads = 1;
  return o;
}

EngineOptions Producer(bool shm, double lease_s = 30) {
  EngineOptions o = Base();
  o.kv_transfer.producer = true;
  o.kv_transfer.engine_id = "p0";
  o.kv_transfer.bind_host = "127.0.0.1";
  o.kv_transfer.port = 0;
  o.kv_transfer.same_host_shm = shm;
  o.kv_transfer.lease_s = lease_s;
  return o;
}

EngineOptions Consumer(bool shm, bool recompute = true) {
  EngineOptions o = Base();
  o.kv_transfer.consumer = true;
  o.kv_transfer.same_host_shm = shm;
  o.kv_transfer.recompute_on_failure = recompute;
  return o;
}

// Token counts around the block size: shorter than a block, exact multiples, and more.
std::vector<std::vector<int32_t>> PdPrompts(const Model& m) {
  std::vector<std::vector<int32_t>> out;
  for (int len : {5, 16, 17, 32, 45, 64, 100}) {
    std::vector<int32_t> p = m.tokenizer().Encode(
        std::to_string(len) + " the quick brown fox jumps over the lazy dog and then", true, false);
    while (static_cast<int>(p.size()) < len) p.push_back(static_cast<int32_t>(100 + (p.size() * 37) % 400));
    p.resize(static_cast<size_t>(len));
    out.push_back(p);
  }
  return out;
}

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

double MetricValue(MetricsRegistry& m, const std::string& series_prefix) {
  const std::string text = m.RenderPrometheus();
  size_t at = text.find(series_prefix);
  if (at == std::string::npos) return -1;
  size_t sp = text.find(' ', text.find('}', at));
  return std::stod(text.substr(sp + 1, text.find('\n', sp) - sp - 1));
}

// Runs `prompt` through P (1 token, kept) and returns P's kv_transfer_params.
KvTransferParams Prefill(Harness& p, const std::string& id, const std::vector<int32_t>& prompt,
                         GenerationParams params = Greedy(1)) {
  params.max_tokens = 1;
  p.Submit(id, prompt, params, [](EngineRequest& r) { r.kv_transfer.do_remote_decode = true; });
  auto out = p.Wait();
  const RequestOutput& last = out[id].last;
  EXPECT_TRUE(last.kv_transfer_params.has_value()) << id;
  return last.kv_transfer_params.value_or(KvTransferParams{});
}

class PdTest : public ::testing::TestWithParam<bool> {};

TEST_P(PdTest, DecodeAfterPullEqualsColocated) {
  const bool shm = GetParam();
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  Harness colocated(*model, Base());
  Harness p(*model, Producer(shm));
  Harness d(*model, Consumer(shm));
  ASSERT_GT(p.engine().kv_transfer_port(), 0);
  EXPECT_EQ(d.engine().kv_transfer_port(), 0);
  const auto prompts = PdPrompts(*model);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = "r" + std::to_string(i);
    colocated.Submit(id, prompts[i], Greedy(12));
    KvTransferParams params = Prefill(p, id, prompts[i]);
    EXPECT_EQ(params.remote_request_id, id);
    EXPECT_EQ(params.remote_engine_id, "p0");
    EXPECT_EQ(params.remote_host, "127.0.0.1");
    EXPECT_EQ(params.remote_port, p.engine().kv_transfer_port());
    EXPECT_EQ(params.remote_block_size, 16);
    EXPECT_EQ(params.num_prompt_blocks, static_cast<int>((prompts[i].size() + 15) / 16));
    EXPECT_EQ(params.remote_block_ids.size(), static_cast<size_t>(params.num_prompt_blocks));
    EXPECT_EQ(p.engine().Snapshot().num_kept, 1);
    d.Submit(id, prompts[i], Greedy(12), [&](EngineRequest& r) { r.kv_transfer.remote_prefill = params; });
    auto got = d.Wait();
    auto want = colocated.Wait();
    EXPECT_EQ(got[id].tokens, want[id].tokens) << "prompt of " << prompts[i].size() << " tokens";
    EXPECT_EQ(got[id].last.finish_reason, "length");
    EXPECT_EQ(got[id].last.cached_tokens, 0) << "pulled tokens are not prefix-cache hits";
    EXPECT_EQ(params.last_token_id, want[id].tokens[0]);
    // DONE freed the producer's blocks.
    EXPECT_TRUE(WaitFor([&] { return p.engine().Snapshot().num_kept == 0; }, std::chrono::seconds(5)));
  }
  EXPECT_TRUE(WaitFor([&] { return p.engine().Snapshot().kv_cache_usage == 0; }, std::chrono::seconds(5)));
  EXPECT_EQ(MetricValue(d.metrics(), "tandem_kv_transfer_pulls_total{engine=\"0\",model_name=\"tandem\",result=\"ok\"}"),
            static_cast<double>(prompts.size()));
  // The same-host path was really taken (or really not).
  EXPECT_EQ(MetricValue(d.metrics(), "tandem_kv_transfer_shm_pulls_total"), shm ? static_cast<double>(prompts.size()) : 0);
}

INSTANTIATE_TEST_SUITE_P(Paths, PdTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "SharedMemory" : "Tcp"; });

TEST(PdEngineTest, SeededSamplingContinuesTheSameRandomStream) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  Harness colocated(*model, Base());
  Harness p(*model, Producer(true));
  Harness d(*model, Consumer(true));
  GenerationParams sampled = Greedy(10);
  sampled.sampling.temperature = 0.9f;
  sampled.has_seed = true;
  sampled.sampling.seed = 1234;
  const auto prompt = PdPrompts(*model)[3];
  colocated.Submit("s", prompt, sampled);
  KvTransferParams params = Prefill(p, "s", prompt, sampled);
  d.Submit("s", prompt, sampled, [&](EngineRequest& r) { r.kv_transfer.remote_prefill = params; });
  EXPECT_EQ(d.Wait()["s"].tokens, colocated.Wait()["s"].tokens);
}

TEST(PdEngineTest, FailedPullRecomputesAndFailPolicyErrors) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  Harness colocated(*model, Base());
  Harness p(*model, Producer(false));
  Harness d(*model, Consumer(false));
  Harness strict(*model, Consumer(false, /*recompute=*/false));
  const auto prompt = PdPrompts(*model)[4];
  colocated.Submit("x", prompt, Greedy(8));
  KvTransferParams params = Prefill(p, "x", prompt);
  // The proxy's abort ends the lease: the pull finds nothing and D recomputes.
  EXPECT_TRUE(p.engine().ReleaseKvBlocks("x"));
  EXPECT_FALSE(p.engine().ReleaseKvBlocks("x"));
  EXPECT_TRUE(WaitFor([&] { return p.engine().Snapshot().kv_cache_usage == 0; }, std::chrono::seconds(5)));
  d.Submit("x", prompt, Greedy(8), [&](EngineRequest& r) { r.kv_transfer.remote_prefill = params; });
  EXPECT_EQ(d.Wait()["x"].tokens, colocated.Wait()["x"].tokens);
  EXPECT_EQ(MetricValue(d.metrics(), "tandem_kv_transfer_pulls_total{engine=\"0\",model_name=\"tandem\",result=\"failed\"}"), 1);

  strict.Submit("y", prompt, Greedy(8), [&](EngineRequest& r) { r.kv_transfer.remote_prefill = params; });
  auto out = strict.Wait();
  EXPECT_EQ(out["y"].last.finish_reason, "error");
  EXPECT_NE(out["y"].last.error.message().find("prefill instance"), std::string::npos) << out["y"].last.error.message();
  EXPECT_TRUE(WaitFor([&] { return strict.engine().Snapshot().kv_cache_usage == 0; }, std::chrono::seconds(5)));

  // A producer nobody listens on (its port after it stopped) fails the same way.
  const int dead_port = p.engine().kv_transfer_port();
  p.engine().Shutdown();
  params.remote_port = dead_port;
  d.Submit("z", prompt, Greedy(8), [&](EngineRequest& r) { r.kv_transfer.remote_prefill = params; });
  EXPECT_EQ(d.Wait()["z"].tokens, colocated.Wait()["x"].tokens);
}

TEST(PdEngineTest, UnpulledBlocksAreFreedWhenTheLeaseExpires) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  Harness p(*model, Producer(true, /*lease_s=*/0.3));
  Prefill(p, "lonely", PdPrompts(*model)[6]);
  EXPECT_GT(p.engine().Snapshot().kv_cache_usage, 0);
  EXPECT_TRUE(WaitFor([&] { return p.engine().Snapshot().kv_cache_usage == 0; }, std::chrono::seconds(3)));
  EXPECT_EQ(p.engine().Snapshot().num_kept, 0);
  // The id is free again once the lease is gone.
  Prefill(p, "lonely", PdPrompts(*model)[0]);
}

TEST(PdEngineTest, ConsumerPullsOnlyWhatItsPrefixCacheLacks) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  Harness colocated(*model, Base());
  Harness p(*model, Producer(false));
  Harness d(*model, Consumer(false));
  const auto prompt = PdPrompts(*model)[6];  // 100 tokens: 6 full blocks + 4
  d.Submit("warm", prompt, Greedy(1));        // D computes it once locally
  d.Wait();
  colocated.Submit("c", prompt, Greedy(6));
  KvTransferParams params = Prefill(p, "c", prompt);
  d.Submit("c", prompt, Greedy(6), [&](EngineRequest& r) { r.kv_transfer.remote_prefill = params; });
  auto out = d.Wait();
  EXPECT_EQ(out["c"].tokens, colocated.Wait()["c"].tokens);
  EXPECT_EQ(out["c"].last.cached_tokens, 96);
  const uint64_t block_bytes = 2ull * model->config().n_layers * 16 * (model->config().kv_dim() + model->config().v_dim());
  EXPECT_EQ(MetricValue(d.metrics(), "tandem_kv_transfer_pull_bytes_total"), static_cast<double>(block_bytes))
      << "only the last, partial block travels";
}

TEST(PdEngineTest, RemotePrefillOnANonConsumerOrWithWrongGeometryComputesLocally) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  Harness colocated(*model, Base());
  Harness d(*model, Consumer(false));
  const auto prompt = PdPrompts(*model)[2];
  colocated.Submit("g", prompt, Greedy(5));
  KvTransferParams bogus;
  bogus.remote_host = "127.0.0.1";
  bogus.remote_port = 1;
  bogus.remote_request_id = "nope";
  bogus.remote_block_size = 32;  // differs from ours
  bogus.num_prompt_blocks = 1;
  bogus.remote_block_ids = {0};
  colocated.Submit("g2", prompt, Greedy(5));
  d.Submit("g", prompt, Greedy(5), [&](EngineRequest& r) { r.kv_transfer.remote_prefill = bogus; });
  Harness plain(*model, Base());
  plain.Submit("g2", prompt, Greedy(5), [&](EngineRequest& r) { r.kv_transfer.remote_prefill = bogus; });
  auto want = colocated.Wait();
  EXPECT_EQ(d.Wait()["g"].tokens, want["g"].tokens);
  EXPECT_EQ(plain.Wait()["g2"].tokens, want["g2"].tokens);
}

// vLLM-Ascend's recompute scheduler: a decode instance out of blocks hands a preempted
// request back (stop_reason "recomputed", the tokens so far a prefix of the full
// answer) instead of recomputing it; without the option it recomputes it here.
TEST(PdEngineTest, RecomputeSchedulerHandsPreemptedRequestsBack) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p;
    for (int k = 0; k < 20 + 3 * i; ++k) p.push_back(static_cast<int32_t>(100 + (k * 31 + i * 7) % 400));
    prompts.push_back(p);
  }
  for (bool hand_back : {true, false}) {
    EngineOptions o = Consumer(false);
    o.block_size = 4;
    o.num_kv_blocks = 24;  // 96 tokens for six requests of ~60 tokens each
    o.recompute_scheduler = hand_back;
    Harness d(*model, o);
    Harness full(*model, Base());
    for (size_t i = 0; i < prompts.size(); ++i) {
      d.Submit("r" + std::to_string(i), prompts[i], Greedy(40));
      full.Submit("r" + std::to_string(i), prompts[i], Greedy(40));
    }
    auto got = d.Wait();
    auto want = full.Wait();
    int handed_back = 0;
    for (auto& [id, c] : got) {
      const std::vector<int32_t>& all = want[id].tokens;
      if (c.last.stop_reason == "recomputed") {
        ++handed_back;
        EXPECT_EQ(c.last.finish_reason, "stop");
        ASSERT_LE(c.tokens.size(), all.size());
        EXPECT_EQ(c.tokens, std::vector<int32_t>(all.begin(), all.begin() + c.tokens.size())) << id;
      } else {
        EXPECT_EQ(c.tokens, all) << id;
      }
    }
    if (hand_back) {
      EXPECT_GT(handed_back, 0) << "expected preemptions with 24 blocks";
    } else {
      EXPECT_EQ(handed_back, 0);
    }
    EXPECT_TRUE(WaitFor([&] { return d.engine().Snapshot().kv_cache_usage == 0; }, std::chrono::seconds(5)));
  }
}

}  // namespace
}  // namespace tandem
