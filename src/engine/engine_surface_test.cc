// The engine's request surface (issue 21): priority scheduling, the /health watchdog,
// and parallel sampling (n > 1) on a fixture model.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace tandem
