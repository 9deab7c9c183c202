// Test-only: a harness that submits requests to a real Engine and waits for them, and
// fixture loading, shared by the engine's tests.
// Thread safety: Submit/Wait from the test thread; callbacks come from the engine thread.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/test_paths.h"

namespace tandem {

struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  RequestOutput last;
  int callbacks = 0;
};

// Submits requests and waits for all of them to finish.
class Harness {
 public:
  Harness(const Model& model, EngineOptions options) : model_(model) {
    auto engine = Engine::Create(model, options, &metrics_);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
  }

  // `customize` (may be empty) edits the request before it is queued (e.g. PD fields).
  void Submit(const std::string& id, std::vector<int32_t> prompt, GenerationParams params,
              const std::function<void(EngineRequest&)>& customize = {}) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      results_[id];
      ++pending_;
    }
    EngineRequest r;
    r.request_id = id;
    r.prompt_tokens = std::move(prompt);
    r.params = params;
    r.on_output = [this, id](const RequestOutput& out) {
      std::lock_guard<std::mutex> lock(mu_);
      Collected& c = results_[id];
      c.tokens.insert(c.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      c.text += out.new_text;
      c.last = out;
      ++c.callbacks;
      if (out.finished && --pending_ == 0) cv_.notify_all();
    };
    if (customize) customize(r);
    Status s = engine_->AddRequest(std::move(r));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::map<std::string, Collected> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(120), [&] { return pending_ == 0; })) << "timed out";
    return results_;
  }

  Engine& engine() { return *engine_; }
  MetricsRegistry& metrics() { return metrics_; }

 private:
  const Model& model_;
  MetricsRegistry metrics_;
  std::unique_ptr<Engine> engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Collected> results_;
  int pending_ = 0;
};

inline std::unique_ptr<Model> LoadFixture(const std::string& name) {
  auto model = Model::Load(FixturePath(name));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(model).value() : nullptr;
}

}  // namespace tandem
