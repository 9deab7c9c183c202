// OpenAiServer end to end over real sockets, with a scripted fake engine (the real one
// is exercised by tests/test_serve.py) and the llama fixture model's tokenizer.
#include "server/openai_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/metrics.h"
#include "model/model.h"
#include "model/test_paths.h"
#include "net/http_client.h"
#include "net/sse.h"

namespace tandem::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Emits "w0 w1 ..." (one word per output, max_tokens of them) on its own thread;
// `hold` keeps requests open until aborted; `reject` fails AddRequest as a full queue.
class FakeEngine : public Engine {
 public:
  ~FakeEngine() override { Shutdown(); }
  Status AddRequest(EngineRequest request) override {
    if (reject) return ResourceExhaustedError("queue full");
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([this, r = std::move(request)] { Run(r); });
    return Status();
  }
  void AbortRequest(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.push_back(id);
    cv_.notify_all();
  }
  bool ReleaseKvBlocks(const std::string&) override { return false; }
  void ResetPrefixCache() override { ++resets; }
  int kv_transfer_port() const override { return 0; }
  EngineSnapshot Snapshot() const override { return EngineSnapshot{1, 2, 0.25, 100, 1600}; }
  EngineHealth Health() const override {
    EngineHealth h;
    if (stuck) {
      h.healthy = false;
      h.reason = "the engine loop has not completed a step";
    }
    return h;
  }
  const EngineOptions& options() const override { return options_; }
  void Shutdown() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_all();
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }
  std::vector<std::string> aborted() {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_;
  }
  std::atomic<bool> reject{false};
  std::atomic<bool> hold{false};
  std::atomic<int> resets{0};
  std::atomic<bool> stuck{false};
  GenerationParams last_params;

 private:
  bool IsAborted(const std::string& id) {
    return stopping_ || std::find(aborted_.begin(), aborted_.end(), id) != aborted_.end();
  }
  void Run(const EngineRequest& r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_params = r.params;
    }
    RequestOutput out;
    out.request_id = r.request_id;
    out.prompt_tokens = static_cast<int>(r.prompt_tokens.size());
    out.cached_tokens = 1;
    for (int i = 0; i < r.params.max_tokens; ++i) {
      out.new_tokens = {i};
      out.new_text = "w" + std::to_string(i) + " ";
      out.completion_tokens = i + 1;
      if (i + 1 == r.params.max_tokens && !hold) {
        out.finished = true;
        out.finish_reason = "length";
      }
      r.on_output(out);
    }
    if (!hold) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return IsAborted(r.request_id); });
    lock.unlock();
    RequestOutput end;
    end.finished = true;
    end.finish_reason = "abort";
    r.on_output(end);
  }

  EngineOptions options_ = [] {
    EngineOptions o;
    o.model_name = "served";
    return o;
  }();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
  std::vector<std::string> aborted_;
  bool stopping_ = false;
};

class OpenAiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = Model::Load(FixturePath("llama.gguf"));
    ASSERT_TRUE(model.ok()) << model.status().message();
    model_ = std::move(*model);
    ServerOptions options;
    options.http.host = "127.0.0.1";
    options.served_model_names = {"served", "alias"};
    options.model_path = "/models/x.gguf";
    options.max_model_len = 200;
    options.api_key = api_key_;
    options.no_auth_health_metrics = no_auth_health_metrics_;
    options.enable_prompt_tokens_details = true;
    auto server = OpenAiServer::Create(options, *model_, engine_, &metrics_);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
    engine_.Shutdown();
  }
  net::HttpResponse Call(const std::string& method, const std::string& path,
                         const std::string& body = "", net::HttpHeaders headers = {}) {
    auto r = client_.Fetch(method, "http://127.0.0.1:" + std::to_string(server_->port()) + path,
                           headers, body);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : net::HttpResponse{};
  }

  std::string api_key_;
  bool no_auth_health_metrics_ = false;
  std::unique_ptr<Model> model_;
  FakeEngine engine_;
  MetricsRegistry metrics_;
  std::unique_ptr<OpenAiServer> server_;
  net::HttpClient client_;
};

TEST_F(OpenAiServerTest, CompletionAndHeaders) {
  auto r = Call("POST", "/v1/completions", R"({"model":"alias","prompt":"hello","max_tokens":3})",
                {{"X-Request-Id", "abc"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["id"], "cmpl-abc");
  EXPECT_EQ(j["model"], "served");
  EXPECT_EQ(j["choices"][0]["text"], "w0 w1 w2 ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
  EXPECT_EQ(engine_.last_params.max_tokens, 3);
}

TEST_F(OpenAiServerTest, ChatStreamsSse) {
  auto r = Call("POST", "/v1/chat/completions",
                R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true,
                    "stream_options":{"include_usage":true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.headers.GetOr("Content-Type", "").find("text/event-stream"), std::string::npos);
  net::SseParser parser;
  std::vector<std::string> events;
  ASSERT_TRUE(parser.Feed(r.body, &events).ok());
  ASSERT_EQ(events.size(), 5u) << r.body;  // role, w0, w1 + finish, usage, [DONE]
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(json::parse(events[2])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(events[3])["usage"]["completion_tokens"], 2);
  EXPECT_EQ(events[4], "[DONE]");
}

TEST_F(OpenAiServerTest, Errors) {
  EXPECT_EQ(Call("POST", "/v1/completions", "{bad").status, 400);
  EXPECT_EQ(Call("POST", "/v1/completions", R"({"prompt":"x","temperature":-1})").status, 400);
  auto missing = Call("POST", "/v1/completions", R"({"model":"nope","prompt":"x"})");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body)["error"]["message"], "The model `nope` does not exist.");
  EXPECT_EQ(json::parse(missing.body)["error"]["code"], 404);
  auto too_long = Call("POST", "/v1/completions", R"({"prompt":"x","max_tokens":500})");
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(too_long.body.find("maximum context length is 200"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v1/nothing").status, 404);
  engine_.reject = true;
  EXPECT_EQ(Call("POST", "/v1/completions", R"({"prompt":"x"})").status, 503);
}

TEST_F(OpenAiServerTest, InfoRoutes) {
  auto health = Call("GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_TRUE(health.body.empty());
  engine_.stuck = true;  // the engine's watchdog fired: 503 with the reason
  health = Call("GET", "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_NE(health.body.find("has not completed a step"), std::string::npos) << health.body;
  engine_.stuck = false;
  EXPECT_EQ(Call("GET", "/health").status, 200);
  json models = json::parse(Call("GET", "/v1/models").body);
  EXPECT_EQ(models["data"].size(), 2u);
  EXPECT_EQ(models["data"][0]["id"], "served");
  EXPECT_EQ(models["data"][0]["root"], "/models/x.gguf");
  EXPECT_EQ(models["data"][0]["max_model_len"], 200);
  json tok = json::parse(Call("POST", "/tokenize", R"({"prompt":"hello world"})").body);
  EXPECT_EQ(tok["count"], tok["tokens"].size());
  EXPECT_EQ(tok["max_model_len"], 200);
  json detok =
      json::parse(Call("POST", "/detokenize", json{{"tokens", tok["tokens"]}}.dump()).body);
  EXPECT_NE(detok["prompt"].get<std::string>().find("hello world"), std::string::npos);
  // /metrics renders the registry; the engine is the gauges' one writer (the fake engine
  // writes none, so the route adds none of its own from the snapshot).
  std::string metrics = Call("GET", "/metrics").body;
  EXPECT_EQ(metrics.find("vllm:num_requests_waiting"), std::string::npos) << metrics;
  metrics_.GetGauge("vllm:kv_cache_usage_perc", "KV-cache usage.", {{"model_name", "served"}, {"engine", "0"}})
      ->Set(0.25);
  metrics = Call("GET", "/metrics").body;
  EXPECT_NE(metrics.find("vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"served\"} 0.25"),
            std::string::npos)
      << metrics;
  EXPECT_NE(Call("GET", "/version").body.find("version"), std::string::npos);
}

TEST_F(OpenAiServerTest, DisconnectAbortsTheRequest) {
  engine_.hold = true;
  net::HttpClientRequest request;
  request.method = "POST";
  request.host = "127.0.0.1";
  request.port = server_->port();
  request.target = "/v1/completions";
  request.body = R"({"prompt":"x","max_tokens":2,"stream":true})";
  request.timeout = 0ms;
  std::atomic<int> bytes{0};
  std::atomic<bool> done{false};
  net::HttpStreamCallbacks callbacks;
  callbacks.on_data = [&](std::string_view b) { bytes += static_cast<int>(b.size()); };
  callbacks.on_done = [&](Status) { done = true; };
  auto stream = client_.Stream(std::move(request), std::move(callbacks));
  for (int i = 0; i < 500 && bytes == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GT(bytes.load(), 0);
  stream->Cancel();
  for (int i = 0; i < 500 && engine_.aborted().empty(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(engine_.aborted().size(), 1u);
  EXPECT_EQ(engine_.aborted()[0].rfind("cmpl-", 0), 0u);
}

class OpenAiServerAuthTest : public OpenAiServerTest {
 protected:
  void SetUp() override {
    api_key_ = "sekret";
    OpenAiServerTest::SetUp();
  }
};

TEST_F(OpenAiServerAuthTest, ApiKey) {
  EXPECT_EQ(Call("GET", "/v1/models").status, 401);
  EXPECT_EQ(Call("GET", "/v1/models", "", {{"Authorization", "Bearer wrong!"}}).status, 401);
  EXPECT_EQ(Call("GET", "/v1/models", "", {{"Authorization", "Bearer sekret"}}).status, 200);
  // Health, metrics and version need the key too unless the operator opens them.
  for (const char* path : {"/health", "/metrics", "/version"}) {
    net::HttpResponse r = Call("GET", path);
    EXPECT_EQ(r.status, 401) << path;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], 401) << path;
    EXPECT_EQ(Call("GET", path, "", {{"Authorization", "Bearer sekret"}}).status, 200) << path;
  }
}

class OpenAiServerOpenHealthTest : public OpenAiServerTest {
 protected:
  void SetUp() override {
    api_key_ = "sekret";
    no_auth_health_metrics_ = true;
    OpenAiServerTest::SetUp();
  }
};

TEST_F(OpenAiServerOpenHealthTest, HealthAndMetricsAreOpenTheRestIsNot) {
  for (const char* path : {"/health", "/metrics", "/version"})
    EXPECT_EQ(Call("GET", path).status, 200) << path;
  EXPECT_EQ(Call("GET", "/v1/models").status, 401);
  EXPECT_EQ(Call("POST", "/tokenize", R"({"prompt":"x"})").status, 401);
  EXPECT_EQ(Call("POST", "/kv_transfer/abort", R"({"remote_request_id":"x"})").status, 401);
  EXPECT_EQ(Call("POST", "/reset_prefix_cache").status, 401);
  EXPECT_EQ(engine_.resets.load(), 0);
  EXPECT_EQ(Call("POST", "/reset_prefix_cache", "", {{"Authorization", "Bearer sekret"}}).status,
            200);
  EXPECT_EQ(engine_.resets.load(), 1);
}

}  // namespace
}  // namespace tandem::server
