// The engine's request surface (issue 21): priority scheduling, the /health watchdog,
// and parallel sampling (n > 1) on a fixture model.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace tandem {
namespace {

GenerationParams Tokens(int max_tokens, int priority = 0) {
  GenerationParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.priority = priority;
  return p;
}

TEST(EngineSurfaceTest, FcfsRefusesAPriority) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  Harness h(*model, EngineOptions{});
  EngineRequest r;
  r.request_id = "p";
  r.prompt_tokens = {1, 2, 3};
  r.params = Tokens(2, 3);
  r.on_output = [](const RequestOutput&) {};
  Status s = h.engine().AddRequest(std::move(r));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Got priority 3 but Priority scheduling is not enabled.");
}

// One sequence at a time: a high-priority request sent after a queue of low-priority ones
// runs as soon as the running one is done, before all of them.
TEST(EngineSurfaceTest, HighPriorityOvertakesTheQueue) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  EngineOptions opts;
  opts.max_num_seqs = 1;
  opts.scheduling_policy = EngineOptions::SchedulingPolicy::kPriority;
  Harness h(*model, opts);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> finished;
  bool started = false;
  auto record = [&](EngineRequest& r) {
    r.on_output = [&, inner = r.on_output, id = r.request_id](const RequestOutput& out) {
      {
        std::lock_guard<std::mutex> lock(mu);
        started = true;
        if (out.finished) finished.push_back(id);
      }
      cv.notify_all();
      inner(out);
    };
  };
  const std::vector<int32_t> prompt = model->tokenizer().Encode("the quick brown fox", true, false);
  h.Submit("running", prompt, Tokens(48, 0), record);
  {
    std::unique_lock<std::mutex> lock(mu);  // "running" holds the only seat
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return started; }));
  }
  for (int i = 0; i < 3; ++i) h.Submit("low" + std::to_string(i), prompt, Tokens(4, 10), record);
  h.Submit("high", prompt, Tokens(4, -5), record);
  h.Wait();
  EXPECT_EQ(finished, (std::vector<std::string>{"running", "high", "low0", "low1", "low2"}));
}

// Health(): healthy while idle; unhealthy while work waits and no step completes within the
// watchdog (steps are slowed by the fault hook); healthy again once idle; unhealthy once
// the loop has stopped.
TEST(EngineSurfaceTest, HealthWatchdog) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  EngineOptions opts;
  opts.health_watchdog_s = 0.2;
  opts.fault_step_delay_ms = 700;
  Harness h(*model, opts);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // idle beyond the watchdog
  EXPECT_TRUE(h.engine().Health().healthy);
  h.Submit("slow", {1, 2, 3}, Tokens(3));
  EXPECT_TRUE(h.engine().Health().healthy) << "work arriving at an idle engine restarts the clock";
  bool seen_unhealthy = false;
  for (int i = 0; i < 40 && !seen_unhealthy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EngineHealth health = h.engine().Health();
    if (!health.healthy) {
      seen_unhealthy = true;
      EXPECT_NE(health.reason.find("has not completed a step"), std::string::npos) << health.reason;
    }
  }
  EXPECT_TRUE(seen_unhealthy);
  h.Wait();
  EXPECT_TRUE(h.engine().Health().healthy);
  h.engine().Shutdown();
  EngineHealth after = h.engine().Health();
  EXPECT_FALSE(after.healthy);
  EXPECT_EQ(after.reason, "the engine loop has stopped");
}

// Runs requests straight on an Engine and gathers each choice (RequestOutput::index) of
// each request until every choice finished.
class Choices {
 public:
  Choices(const Model& model, EngineOptions options) {
    auto engine = Engine::Create(model, options, &metrics_);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
  }

  Status Submit(const std::string& id, std::vector<int32_t> prompt, GenerationParams params) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ += params.n;
      results_[id] =
          std::vector<Collected>(static_cast<size_t>(params.n));  // a reused id starts afresh
    }
    EngineRequest r;
    r.request_id = id;
    r.prompt_tokens = std::move(prompt);
    r.params = params;
    r.on_output = [this, id](const RequestOutput& out) {
      std::lock_guard<std::mutex> lock(mu_);
      Collected& c = results_[id].at(static_cast<size_t>(out.index));
      EXPECT_EQ(c.last.finished, false) << "output after the end of choice " << out.index;
      c.tokens.insert(c.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      c.last = out;
      ++c.callbacks;
      if (out.finished && --pending_ == 0) cv_.notify_all();
    };
    Status s = engine_->AddRequest(std::move(r));
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ -= params.n;
      results_.erase(id);
    }
    return s;
  }

  std::map<std::string, std::vector<Collected>> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(120), [&] { return pending_ == 0; }))
        << "timed out";
    return results_;
  }

  // vllm:prompt_tokens: prompt tokens the model has run.
  double prompt_tokens_run() {
    return metrics_
        .GetCounter("vllm:prompt_tokens", "", {{"model_name", "tandem"}, {"engine", "0"}})
        ->value();
  }
  Engine& engine() { return *engine_; }

 private:
  MetricsRegistry metrics_;
  std::unique_ptr<Engine> engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<Collected>> results_;
  int pending_ = 0;
};

// Greedy n = 3 with 4-token blocks (the 10-token prompt ends in a partial block that is
// copied): the prompt runs once, and every choice equals a lone n = 1 run.
TEST(EngineSurfaceTest, ParallelSamplingForksThePromptOnce) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  EngineOptions opts;
  opts.block_size = 4;
  opts.enable_prefix_caching = false;  // the fork alone shares the prompt
  Choices engine(*model, opts);
  std::vector<int32_t> prompt =
      model->tokenizer().Encode("once upon a time there was a fox", true, false);
  prompt.resize(10, prompt.back());
  ASSERT_EQ(prompt.size(), 10u);
  ASSERT_TRUE(engine.Submit("alone", prompt, Tokens(12)).ok());
  const std::vector<int32_t> alone = engine.Wait()["alone"][0].tokens;
  ASSERT_EQ(alone.size(), 12u);
  const double before = engine.prompt_tokens_run();
  GenerationParams p = Tokens(12);
  p.n = 3;
  ASSERT_TRUE(engine.Submit("three", prompt, p).ok());
  auto results = engine.Wait();
  EXPECT_EQ(engine.prompt_tokens_run() - before, 10)
      << "the prompt is prefilled once for all choices";
  ASSERT_EQ(results["three"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const Collected& c = results["three"][static_cast<size_t>(i)];
    EXPECT_EQ(c.tokens, alone) << "choice " << i;
    EXPECT_TRUE(c.last.finished);
    EXPECT_EQ(c.last.finish_reason, "length");
    EXPECT_EQ(c.last.index, i);
    EXPECT_EQ(c.last.completion_tokens, 12);
    EXPECT_EQ(c.last.prompt_tokens, 10);
  }
  EXPECT_EQ(engine.engine().Snapshot().kv_cache_usage, 0) << "every block is free again";
}

// With ngram speculative decoding the forked choices verify drafts on their own and still
// give the tokens of a lone greedy run.
TEST(EngineSurfaceTest, ParallelSamplingWithSpeculativeDecoding) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  EngineOptions opts;
  opts.block_size = 4;
  opts.speculative.method = SpeculativeOptions::Method::kNgram;
  opts.speculative.num_speculative_tokens = 3;
  opts.speculative.prompt_lookup_min = 1;
  opts.speculative.prompt_lookup_max = 2;
  Choices engine(*model, opts);
  const std::vector<int32_t> prompt = {1, 5, 9, 5, 9, 5, 9, 5, 9, 13, 17};
  ASSERT_TRUE(engine.Submit("alone", prompt, Tokens(16)).ok());
  const std::vector<int32_t> alone = engine.Wait()["alone"][0].tokens;
  GenerationParams p = Tokens(16);
  p.n = 3;
  ASSERT_TRUE(engine.Submit("three", prompt, p).ok());
  auto results = engine.Wait();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(results["three"][static_cast<size_t>(i)].tokens, alone) << "choice " << i;
}

// Seeded sampling: choice i draws as an n = 1 request with seed + i (vLLM's rule), its
// first token included (drawn from the shared prompt logits).
TEST(EngineSurfaceTest, ParallelSamplingSeedsAreSeedPlusIndex) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  EngineOptions opts;
  opts.block_size = 4;
  Choices engine(*model, opts);
  const std::vector<int32_t> prompt = model->tokenizer().Encode("the quick brown fox", true, false);
  GenerationParams p = Tokens(10);
  p.sampling.temperature = 1.0f;
  p.has_seed = true;
  p.sampling.seed = 1234;
  for (int i = 0; i < 3; ++i) {
    GenerationParams one = p;
    one.sampling.seed = p.sampling.seed + static_cast<uint64_t>(i);
    ASSERT_TRUE(engine.Submit("seed" + std::to_string(i), prompt, one).ok());
  }
  p.n = 3;
  ASSERT_TRUE(engine.Submit("three", prompt, p).ok());
  auto results = engine.Wait();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(results["three"][static_cast<size_t>(i)].tokens,
              results["seed" + std::to_string(i)][0].tokens)
        << "choice " << i;
  }
  EXPECT_NE(results["three"][0].tokens, results["three"][1].tokens);
}

// No free block for the copy of the partial block: the second choice is queued, computes
// its prompt itself once choice 0 is done, and still gives the same greedy tokens.
TEST(EngineSurfaceTest, ParallelSamplingWithoutABlockForTheCopy) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  EngineOptions opts;
  opts.block_size = 4;
  opts.num_kv_blocks = 3;  // the 10-token prompt takes them all
  Choices engine(*model, opts);
  const std::vector<int32_t> prompt = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37};
  ASSERT_TRUE(engine.Submit("alone", prompt, Tokens(2)).ok());
  const std::vector<int32_t> alone = engine.Wait()["alone"][0].tokens;
  GenerationParams p = Tokens(2);
  p.n = 2;
  const double before = engine.prompt_tokens_run();
  ASSERT_TRUE(engine.Submit("two", prompt, p).ok());
  auto results = engine.Wait();
  // Both choices hit the 2 cached full blocks and ran the 2 tokens after them: choice 1
  // was not forked (there was no block for the copy) but computed them itself.
  EXPECT_EQ(engine.prompt_tokens_run() - before, 4);
  EXPECT_EQ(results["two"][0].tokens, alone);
  EXPECT_EQ(results["two"][1].tokens, alone);
}

// Aborting the request id ends every choice, forked or not; n is bounded by the seats.
TEST(EngineSurfaceTest, ParallelSamplingAbortAndLimits) {
  auto model = LoadFixture("llama.gguf");
  ASSERT_NE(model, nullptr);
  EngineOptions opts;
  opts.max_num_seqs = 4;
  opts.fault_step_delay_ms = 20;  // slow enough to abort mid-way
  Choices engine(*model, opts);
  GenerationParams p = Tokens(400);
  p.n = 4;
  ASSERT_TRUE(engine.Submit("many", {1, 2, 3, 4, 5}, p).ok());
  engine.engine().AbortRequest("many");
  auto results = engine.Wait();
  for (const Collected& c : results["many"]) EXPECT_EQ(c.last.finish_reason, "abort");
  p.n = 5;
  Status s = engine.Submit("too_many", {1, 2, 3}, p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "n must be at most 4 (--max-num-seqs), got 5.");
  // The id is free again once all its choices are done (the engine lets it go just
  // after the last callback).
  p = Tokens(2);
  p.n = 2;
  Status again = engine.Submit("many", {1, 2, 3}, p);
  for (int i = 0; i < 100 && again.code() == StatusCode::kAlreadyExists; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    again = engine.Submit("many", {1, 2, 3}, p);
  }
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_EQ(engine.Wait()["many"].size(), 2u);
}

}  // namespace
}  // namespace tandem
