// ProxyServer end to end against fake prefill/decode engines (net::HttpServer) that
// speak the PD protocol and misbehave on demand.
#include "proxy/proxy_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "net/http_client.h"
#include "net/http_server.h"
#include "net/sse.h"

namespace tandem::proxy {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using WriterPtr = std::shared_ptr<net::HttpResponseWriter>;

uint16_t UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Polls `cond` for up to `timeout`.
template <typename F>
bool Eventually(F cond, std::chrono::milliseconds timeout = 3s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

// A fake engine: answers prefill requests (kv_transfer_params.do_remote_decode) with a
// 1-token completion carrying kv_transfer_params and cached_tokens 7, and decode
// requests with "Hello" (cached_tokens 40, which the proxy must replace).
class FakeEngine {
 public:
  enum class Mode {
    kNormal,
    kFail500,       // every completion answers 500
    kBadRequest,    // every completion answers 400
    kRecompute,     // the first decode ends with stop_reason "recomputed" after "Hel"
    kHangStream,    // a streamed decode sends one chunk and never ends
    kDieMidStream,  // a streamed decode sends one chunk and drops the connection
  };

  FakeEngine() {
    net::HttpServerOptions o;
    o.host = "127.0.0.1";
    server_ = std::make_unique<net::HttpServer>(o);
    for (const char* target : {"/v1/completions", "/v1/chat/completions"}) {
      server_->Route("POST", target, [this](net::HttpRequest r, WriterPtr w) {
        Completion(std::move(r), std::move(w));
      });
    }
    server_->Route("GET", "/health", [this](net::HttpRequest r, WriterPtr w) {
      Record(&health_authorizations_, r);
      w->SendResponse(healthy_ ? 200 : 503, {{"Content-Type", "text/plain"}}, "");
    });
    server_->Route("GET", "/metrics", [this](net::HttpRequest r, WriterPtr w) {
      Record(&metrics_authorizations_, r);
      w->SendResponse(200, {{"Content-Type", "text/plain"}},
                      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n");
    });
    server_->Route("GET", "/v1/models", [](net::HttpRequest, WriterPtr w) {
      net::SendJson(*w, 200, R"({"object":"list","data":[{"id":"fake"}]})");
    });
    server_->Route("POST", "/kv_transfer/abort", [this](net::HttpRequest r, WriterPtr w) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        aborts_.push_back(json::parse(r.body).value("remote_request_id", ""));
      }
      net::SendJson(*w, 200, R"({"aborted":true})");
    });
    EXPECT_TRUE(server_->Start().ok());
  }

  ~FakeEngine() { server_->Stop(); }

  uint16_t port() const { return server_->port(); }
  BackendAddress address() const { return {"127.0.0.1", port()}; }
  void set_mode(Mode m) { mode_ = m; }
  void set_healthy(bool h) { healthy_ = h; }

  std::vector<json> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<std::string> request_ids() {
    std::lock_guard<std::mutex> lock(mu_);
    return request_ids_;
  }
  std::vector<std::string> authorizations() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }
  // The Authorization headers of the /health and /metrics requests that reached it.
  std::vector<std::string> health_authorizations() {
    std::lock_guard<std::mutex> lock(mu_);
    return health_authorizations_;
  }
  std::vector<std::string> metrics_authorizations() {
    std::lock_guard<std::mutex> lock(mu_);
    return metrics_authorizations_;
  }
  std::vector<std::string> aborts() {
    std::lock_guard<std::mutex> lock(mu_);
    return aborts_;
  }
  std::vector<std::string> raw_bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return raw_bodies_;
  }
  int closed_streams() const { return closed_streams_; }

 private:
  void Record(std::vector<std::string>* list, const net::HttpRequest& r) {
    std::lock_guard<std::mutex> lock(mu_);
    list->push_back(std::string(r.headers.Get("Authorization").value_or("")));
  }

  void Completion(net::HttpRequest r, WriterPtr w) {
    json body = json::parse(r.body);
    int n = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      bodies_.push_back(body);
      raw_bodies_.push_back(r.body);
      request_ids_.push_back(std::string(r.headers.Get("X-Request-Id").value_or("")));
      authorizations_.push_back(std::string(r.headers.Get("Authorization").value_or("")));
      n = ++count_;
    }
    const Mode mode = mode_;
    if (mode == Mode::kFail500) {
      net::SendError(*w, 500, "boom");
      return;
    }
    if (mode == Mode::kBadRequest) {
      net::SendError(*w, 400, "max_tokens is too large", "BadRequestError", "max_tokens");
      return;
    }
    const bool chat = body.contains("messages");
    const json& kv = body.value("kv_transfer_params", json::object());
    if (kv.value("do_remote_decode", false)) {
      json answer = {{"id", "cmpl-p"},
                     {"choices", {{{"index", 0}, {"text", "x"}, {"finish_reason", "length"}}}},
                     {"usage",
                      {{"prompt_tokens", 40},
                       {"total_tokens", 41},
                       {"completion_tokens", 1},
                       {"prompt_tokens_details", {{"cached_tokens", 7}}}}},
                     {"kv_transfer_params",
                      {{"do_remote_prefill", true},
                       {"remote_request_id", "rid-" + std::to_string(n)},
                       {"remote_block_ids", {1, 2}},
                       {"remote_port", 7000}}}};
      net::SendJson(*w, 200, answer.dump());
      return;
    }
    const bool recompute = mode == Mode::kRecompute && !recomputed_.exchange(true);
    std::vector<std::string> pieces = recompute ? std::vector<std::string>{"Hel"}
                                      : mode == Mode::kRecompute
                                          ? std::vector<std::string>{"lo"}
                                          : std::vector<std::string>{"Hel", "lo"};
    auto choice = [&](const std::string& text, bool last) {
      json c = {{"index", 0}, {"logprobs", nullptr}};
      if (chat) {
        c["delta"] = {{"content", text}};
      } else {
        c["text"] = text;
      }
      c["finish_reason"] = last ? json("length") : json(nullptr);
      c["stop_reason"] = last && recompute ? json("recomputed") : json(nullptr);
      return c;
    };
    const int generated = static_cast<int>(pieces.size());
    const json usage = {{"prompt_tokens", 40},
                        {"total_tokens", 40 + generated},
                        {"completion_tokens", generated},
                        {"prompt_tokens_details", {{"cached_tokens", 40}}}};
    if (!body.value("stream", false)) {
      std::string text;
      for (const auto& p : pieces) text += p;
      json c = choice(text, true);
      if (chat) {
        c.erase("delta");
        c["message"] = {{"role", "assistant"}, {"content", text}};
      }
      net::SendJson(*w, 200, json{{"id", "cmpl-d"}, {"choices", {c}}, {"usage", usage}}.dump());
      return;
    }
    w->StartStream(200, {});
    if (chat) {
      w->Write(net::SseEvent(
          json{{"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}}}}}
              .dump()));
    }
    for (size_t i = 0; i < pieces.size(); ++i) {
      w->Write(
          net::SseEvent(json{{"choices", {choice(pieces[i], i + 1 == pieces.size())}}}.dump()));
      if (mode == Mode::kHangStream) {
        w->OnClose([this] { ++closed_streams_; });
        std::lock_guard<std::mutex> lock(mu_);
        parked_.push_back(w);
        return;
      }
      if (mode == Mode::kDieMidStream) return;  // dropping the writer aborts the connection
    }
    w->Write(net::SseEvent(json{{"choices", json::array()}, {"usage", usage}}.dump()));
    w->Write(net::SseEvent("[DONE]"));
    w->End();
  }

  std::unique_ptr<net::HttpServer> server_;
  std::atomic<Mode> mode_{Mode::kNormal};
  std::atomic<bool> healthy_{true};
  std::atomic<bool> recomputed_{false};
  std::atomic<int> closed_streams_{0};
  std::mutex mu_;
  int count_ = 0;
  std::vector<json> bodies_;
  std::vector<std::string> raw_bodies_;
  std::vector<std::string> request_ids_;
  std::vector<std::string> authorizations_;
  std::vector<std::string> aborts_;
  std::vector<WriterPtr> parked_;
  std::vector<std::string> health_authorizations_;   // guarded by mu_
  std::vector<std::string> metrics_authorizations_;  // guarded by mu_
};

class ProxyServerTest : public ::testing::Test {
 protected:
  void StartProxy(std::vector<BackendAddress> prefillers, std::vector<BackendAddress> decoders,
                  std::string api_key = "", bool no_auth_health_metrics = false) {
    ProxyOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.prefillers = std::move(prefillers);
    o.decoders = std::move(decoders);
    o.retry_delay_s = 0.001;
    o.health_check_interval = 50ms;
    o.waiting_retry_interval_s = 0.05;
    o.max_waiting_retries = 2;
    o.api_key = std::move(api_key);
    o.no_auth_health_metrics = no_auth_health_metrics;
    auto proxy = ProxyServer::Create(o);
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    proxy_ = std::move(*proxy);
    port_ = 0;
    ASSERT_TRUE(proxy_->Start().ok());
    port_ = proxy_->port();
  }

  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  net::HttpResponse Post(const std::string& path, const std::string& body,
                         net::HttpHeaders headers = {}) {
    headers.Set("Content-Type", "application/json");
    auto r = client_.Fetch("POST", Url(path), headers, body, 10s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : net::HttpResponse{};
  }

  net::HttpResponse Get(const std::string& path, net::HttpHeaders headers = {}) {
    auto r = client_.Fetch("GET", Url(path), headers, "", 10s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : net::HttpResponse{};
  }

  Backend::State StateOf(const BackendAddress& address) {
    for (const BackendInfo& info : proxy_->registry().Snapshot()) {
      if (info.address == address) return info.state;
    }
    return Backend::State::kPending;
  }

  std::string Metrics() { return Get("/metrics").body; }

  FakeEngine p1_, p2_, d1_, d2_;
  std::unique_ptr<ProxyServer> proxy_;
  uint16_t port_ = 0;
  net::HttpClient client_;
};

TEST_F(ProxyServerTest, CompletionGoesThroughPrefillThenDecode) {
  StartProxy({p1_.address()}, {d1_.address()});
  const std::string request =
      R"({"model":"m","prompt":"Hello world","max_tokens":5,"stream_options":{"include_usage":true},"temperature":0})";
  net::HttpResponse r = Post("/v1/completions", request);
  ASSERT_EQ(r.status, 200) << r.body;
  json out = json::parse(r.body);
  EXPECT_EQ(out["choices"][0]["text"], "Hello");
  EXPECT_EQ(out["usage"]["prompt_tokens_details"]["cached_tokens"], 7);  // P's figure
  EXPECT_EQ(out["usage"]["prompt_tokens"], 40);

  ASSERT_EQ(p1_.bodies().size(), 1u);
  json prefill = p1_.bodies()[0];
  EXPECT_EQ(prefill["max_tokens"], 1);
  EXPECT_EQ(prefill["stream"], false);
  EXPECT_FALSE(prefill.contains("stream_options"));
  EXPECT_EQ(prefill["kv_transfer_params"]["do_remote_decode"], true);
  ASSERT_EQ(d1_.bodies().size(), 1u);
  json decode = d1_.bodies()[0];
  EXPECT_EQ(decode["max_tokens"], 5);
  EXPECT_EQ(decode["kv_transfer_params"]["remote_request_id"], "rid-1");
  EXPECT_EQ(decode["kv_transfer_params"]["remote_block_ids"], json({1, 2}));
  // The client's bytes, plus the spliced field.
  EXPECT_EQ(d1_.raw_bodies()[0].rfind(request.substr(0, request.size() - 1), 0), 0u);
  // One request id for both phases, also returned to the client.
  ASSERT_EQ(p1_.request_ids().size(), 1u);
  EXPECT_FALSE(p1_.request_ids()[0].empty());
  EXPECT_EQ(p1_.request_ids()[0], d1_.request_ids()[0]);
  EXPECT_EQ(r.headers.GetOr("X-Request-Id", ""), p1_.request_ids()[0]);
  EXPECT_TRUE(p1_.aborts().empty());

  // A client's own X-Request-Id is kept.
  Post("/v1/completions", request, {{"X-Request-Id", "client-id-1"}});
  EXPECT_EQ(p1_.request_ids().back(), "client-id-1");
  EXPECT_EQ(d1_.request_ids().back(), "client-id-1");
  EXPECT_NE(Metrics().find("tandem_proxy_requests_total{outcome=\"success\"} 2.0"),
            std::string::npos);
}

TEST_F(ProxyServerTest, StreamingChatRewritesOnlyTheUsageChunk) {
  StartProxy({p1_.address()}, {d1_.address()});
  net::HttpResponse r = Post(
      "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.GetOr("Content-Type", ""), "text/event-stream");
  net::SseParser parser;
  std::vector<std::string> events;
  ASSERT_TRUE(parser.Feed(r.body, &events).ok());
  ASSERT_EQ(events.size(), 5u) << r.body;  // role, Hel, lo, usage, [DONE]
  EXPECT_EQ(json::parse(events[1])["choices"][0]["delta"]["content"], "Hel");
  EXPECT_EQ(json::parse(events[3])["usage"]["prompt_tokens_details"]["cached_tokens"], 7);
  EXPECT_EQ(events[4], "[DONE]");
  EXPECT_EQ(d1_.bodies()[0]["stream_options"]["include_usage"], true);
}

TEST_F(ProxyServerTest, AnUnreachablePrefillerIsRetriedOnAnother) {
  const BackendAddress dead{"127.0.0.1", UnusedPort()};
  StartProxy({dead, p1_.address()}, {d1_.address()});
  for (int i = 0; i < 3; ++i) {
    net::HttpResponse r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2})");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(p1_.bodies().size(), 3u);
  EXPECT_EQ(StateOf(dead), Backend::State::kDown);
  EXPECT_NE(Metrics().find("tandem_proxy_retries_total{role=\"prefill\"} 1.0"), std::string::npos);
}

TEST_F(ProxyServerTest, ADecoder5xxIsRetriedOnAnotherAndProbedBack) {
  d1_.set_mode(FakeEngine::Mode::kFail500);
  d1_.set_healthy(false);
  StartProxy({p1_.address()}, {d1_.address(), d2_.address()});
  for (int i = 0; i < 2; ++i) {
    net::HttpResponse r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2})");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(d1_.bodies().size(), 1u);  // once, then down
  EXPECT_EQ(d2_.bodies().size(), 2u);
  EXPECT_EQ(StateOf(d1_.address()), Backend::State::kDown);
  EXPECT_NE(Metrics().find("tandem_proxy_backend_up{instance=\"" + d1_.address().Key() +
                           "\",role=\"decode\"} 0.0"),
            std::string::npos);
  d1_.set_mode(FakeEngine::Mode::kNormal);
  d1_.set_healthy(true);
  EXPECT_TRUE(Eventually([&] { return StateOf(d1_.address()) == Backend::State::kUp; }));
}

TEST_F(ProxyServerTest, WithoutRetrySentRequestsOnlyUnsentOnesAreRetried) {
  // The data-parallel front end's setting: a worker that refuses the connection is
  // skipped, a worker that got the request and failed it is not replayed elsewhere.
  const BackendAddress dead{"127.0.0.1", UnusedPort()};
  ProxyOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.workers = {dead, d1_.address()};
  o.retry_sent_requests = false;
  o.retry_delay_s = 0.001;
  o.health_check_interval = 50ms;
  auto proxy = ProxyServer::Create(o);
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  proxy_ = std::move(*proxy);
  ASSERT_TRUE(proxy_->Start().ok());
  port_ = proxy_->port();
  for (int i = 0; i < 2; ++i) {
    net::HttpResponse r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2})");
    ASSERT_EQ(r.status, 200) << r.body;  // the dead one first (registration order), then d1
  }
  EXPECT_EQ(StateOf(dead), Backend::State::kDown);
  d1_.set_mode(FakeEngine::Mode::kFail500);
  net::HttpResponse r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2})");
  EXPECT_EQ(r.status, 502) << r.body;  // sent to d1 and failed there: not retried
  EXPECT_EQ(d1_.bodies().size(), 3u);
}

TEST_F(ProxyServerTest, EveryFailureIsATerminalOpenAiError) {
  const BackendAddress dead{"127.0.0.1", UnusedPort()};
  StartProxy({p1_.address()}, {dead});
  net::HttpResponse r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2})");
  EXPECT_EQ(r.status, 502);
  json err = json::parse(r.body);
  EXPECT_TRUE(err["error"]["message"].get<std::string>().find("decode") != std::string::npos);
  // The prefiller pinned blocks for a decoder that never came: they are freed.
  EXPECT_TRUE(Eventually([&] { return p1_.aborts() == std::vector<std::string>{"rid-1"}; }));
  // Streaming: still a JSON error before any byte was sent.
  r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2,"stream":true})");
  EXPECT_EQ(r.status, 502);
  EXPECT_TRUE(json::parse(r.body).contains("error"));
}

TEST_F(ProxyServerTest, ABackend4xxReachesTheClientAsIs) {
  d1_.set_mode(FakeEngine::Mode::kBadRequest);
  StartProxy({p1_.address()}, {d1_.address()});
  net::HttpResponse r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "max_tokens");
  EXPECT_EQ(StateOf(d1_.address()), Backend::State::kUp);  // the client's fault
  EXPECT_TRUE(Eventually([&] { return p1_.aborts().size() == 1; }));
  p1_.set_mode(FakeEngine::Mode::kBadRequest);
  r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(d1_.bodies().size(), 1u);  // never reached
}

TEST_F(ProxyServerTest, ADecoderDyingMidStreamEndsTheStreamWithAnError) {
  d1_.set_mode(FakeEngine::Mode::kDieMidStream);
  StartProxy({p1_.address()}, {d1_.address(), d2_.address()});
  net::HttpResponse r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2,"stream":true})");
  ASSERT_EQ(r.status, 200);
  net::SseParser parser;
  std::vector<std::string> events;
  ASSERT_TRUE(parser.Feed(r.body, &events).ok());
  ASSERT_EQ(events.size(), 3u) << r.body;  // Hel, error, [DONE]
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], "Hel");
  EXPECT_TRUE(json::parse(events[1]).contains("error"));
  EXPECT_EQ(events[2], "[DONE]");
  EXPECT_EQ(StateOf(d1_.address()), Backend::State::kDown);
  EXPECT_TRUE(Eventually([&] { return p1_.aborts().size() == 1; }));
  // The next request goes to the other decoder.
  r = Post("/v1/completions", R"({"prompt":"x","max_tokens":2,"stream":true})");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(d2_.bodies().size(), 1u);
  EXPECT_NE(Metrics().find("tandem_proxy_requests_total{outcome=\"failed\"} 1.0"),
            std::string::npos);
}

TEST_F(ProxyServerTest, RecomputedRequestsAreReRouted) {
  d1_.set_mode(FakeEngine::Mode::kRecompute);
  StartProxy({p1_.address()}, {d1_.address()});
  net::HttpResponse r = Post("/v1/completions", R"({"prompt":"Say","max_tokens":5})");
  ASSERT_EQ(r.status, 200) << r.body;
  json out = json::parse(r.body);
  EXPECT_EQ(out["choices"][0]["text"], "Hello");
  EXPECT_EQ(out["choices"][0]["finish_reason"], "length");
  ASSERT_EQ(p1_.bodies().size(), 2u);
  EXPECT_EQ(p1_.bodies()[1]["prompt"], "SayHel");
  ASSERT_EQ(d1_.bodies().size(), 2u);
  EXPECT_EQ(d1_.bodies()[1]["max_tokens"], 4);
  EXPECT_EQ(d1_.bodies()[1]["kv_transfer_params"]["remote_request_id"], "rid-2");
  EXPECT_NE(Metrics().find("tandem_proxy_recomputes_total 1.0"), std::string::npos);
}

TEST_F(ProxyServerTest, RecomputedStreamsContinueSeamlessly) {
  d1_.set_mode(FakeEngine::Mode::kRecompute);
  StartProxy({p1_.address()}, {d1_.address()});
  net::HttpResponse r = Post("/v1/chat/completions",
                             R"({"messages":[{"role":"user","content":"hi"}],"stream":true})");
  ASSERT_EQ(r.status, 200);
  net::SseParser parser;
  std::vector<std::string> events;
  ASSERT_TRUE(parser.Feed(r.body, &events).ok());
  std::string text;
  int role_chunks = 0;
  for (const std::string& e : events) {
    if (e == "[DONE]") continue;
    json j = json::parse(e);
    if (j["choices"].empty()) continue;
    const json& delta = j["choices"][0]["delta"];
    if (delta.contains("role")) ++role_chunks;
    text += delta.value("content", "");
    if (j["choices"][0].contains("stop_reason")) {
      EXPECT_NE(j["choices"][0]["stop_reason"], "recomputed");
    }
  }
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(role_chunks, 1);
  EXPECT_EQ(events.back(), "[DONE]");
  ASSERT_EQ(d1_.bodies().size(), 2u);
  json continued = d1_.bodies()[1];
  EXPECT_EQ(continued["messages"].back(), json({{"role", "assistant"}, {"content", "Hel"}}));
  EXPECT_EQ(continued["continue_final_message"], true);
}

TEST_F(ProxyServerTest, ClientDisconnectReleasesTheDecoderAndAbortsThePrefill) {
  d1_.set_mode(FakeEngine::Mode::kHangStream);
  StartProxy({p1_.address()}, {d1_.address()});
  auto request = net::HttpClientRequest::FromUrl("POST", Url("/v1/completions"));
  ASSERT_TRUE(request.ok());
  request->body = R"({"prompt":"x","max_tokens":100,"stream":true})";
  request->timeout = 0ms;
  std::promise<void> first_data;
  std::atomic<bool> got{false};
  net::HttpStreamCallbacks cb;
  cb.on_data = [&](std::string_view) {
    if (!got.exchange(true)) first_data.set_value();
  };
  auto stream = client_.Stream(*request, cb);
  ASSERT_EQ(first_data.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_NE(Get("/health").body.find("\"request_num\":1"), std::string::npos);
  stream->Cancel();
  EXPECT_TRUE(Eventually([&] { return d1_.closed_streams() == 1; }));
  EXPECT_TRUE(Eventually([&] { return p1_.aborts() == std::vector<std::string>{"rid-1"}; }));
  EXPECT_TRUE(Eventually(
      [&] { return Get("/health").body.find("\"request_num\":0") != std::string::npos; }));
  EXPECT_NE(Metrics().find("tandem_proxy_requests_total{outcome=\"cancelled\"} 1.0"),
            std::string::npos);
}

TEST_F(ProxyServerTest, ApiKeyIsRequiredAndForwarded) {
  StartProxy({p1_.address()}, {d1_.address()}, "sekret");
  net::HttpResponse r = Post("/v1/completions", R"({"prompt":"x"})");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], 401);
  r = Post("/v1/completions", R"({"prompt":"x"})", {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(r.status, 401);
  EXPECT_TRUE(p1_.bodies().empty());
  r = Post("/v1/completions", R"({"prompt":"x"})", {{"Authorization", "Bearer sekret"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(p1_.authorizations()[0], "Bearer sekret");
  EXPECT_EQ(d1_.authorizations()[0], "Bearer sekret");
  EXPECT_EQ(Get("/v1/models").status, 401);
  // Health and metrics need the key as well (no --no-auth-health-metrics here).
  for (const char* path : {"/health", "/healthcheck", "/metrics"}) {
    r = Get(path);
    EXPECT_EQ(r.status, 401) << path;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], 401) << path;
    EXPECT_EQ(Get(path, {{"Authorization", "Bearer sekret"}}).status, 200) << path;
  }
  // The /metrics merge scraped the backends with the key.
  std::string merged = Get("/metrics", {{"Authorization", "Bearer sekret"}}).body;
  EXPECT_NE(merged.find("vllm:num_requests_running{engine=\"decode@" + d1_.address().Key()),
            std::string::npos)
      << merged;
  for (FakeEngine* e : {&p1_, &d1_}) {
    ASSERT_FALSE(e->metrics_authorizations().empty());
    for (const std::string& a : e->metrics_authorizations()) EXPECT_EQ(a, "Bearer sekret");
  }
}

TEST_F(ProxyServerTest, NoAuthHealthMetricsOpensOnlyThose) {
  StartProxy({p1_.address()}, {d1_.address()}, "sekret", /*no_auth_health_metrics=*/true);
  for (const char* path : {"/health", "/healthcheck", "/metrics"})
    EXPECT_EQ(Get(path).status, 200) << path;
  EXPECT_EQ(Get("/v1/models").status, 401);
  EXPECT_EQ(Post("/v1/completions", R"({"prompt":"x"})").status, 401);
  EXPECT_EQ(Post("/instances/add", R"({"type":"prefill","instances":["127.0.0.1:1"]})").status,
            401);
  // An unauthenticated scrape still reaches keyed backends with the proxy's key.
  EXPECT_NE(Get("/metrics").body.find("engine=\"prefill@"), std::string::npos);
  for (const std::string& a : p1_.metrics_authorizations()) EXPECT_EQ(a, "Bearer sekret");
}

TEST_F(ProxyServerTest, HealthProbesOfADownBackendCarryTheKey) {
  StartProxy({p1_.address()}, {d1_.address(), d2_.address()}, "sekret");
  d1_.set_mode(FakeEngine::Mode::kFail500);
  net::HttpHeaders auth{{"Authorization", "Bearer sekret"}};
  for (int i = 0; i < 4; ++i) Post("/v1/completions", R"({"prompt":"x"})", auth);
  ASSERT_TRUE(Eventually([&] { return !d1_.health_authorizations().empty(); }));
  for (const std::string& a : d1_.health_authorizations()) EXPECT_EQ(a, "Bearer sekret");
}

TEST_F(ProxyServerTest, BadRequestsGetOpenAiErrors) {
  StartProxy({p1_.address()}, {d1_.address()});
  for (const char* body : {"{not json", "[1,2]", ""}) {
    net::HttpResponse r = Post("/v1/completions", body);
    EXPECT_EQ(r.status, 400) << body;
    json err = json::parse(r.body);
    EXPECT_EQ(err["error"]["type"], "BadRequestError");
  }
  EXPECT_TRUE(p1_.bodies().empty());
}

TEST_F(ProxyServerTest, ModelsHealthAndInstances) {
  StartProxy({p1_.address()}, {d1_.address()});
  net::HttpResponse r = Get("/v1/models");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["data"][0]["id"], "fake");
  EXPECT_EQ(json::parse(Get("/health").body), json({{"status", "ok"},
                                                    {"prefill_instances", 1},
                                                    {"decode_instances", 1},
                                                    {"request_num", 0}}));
  EXPECT_EQ(Get("/healthcheck").status, 200);

  // Add a live prefiller: routable at once.
  r = Post("/instances/add",
           json{{"type", "prefill"}, {"instances", {p2_.address().Key()}}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json added = json::parse(r.body);
  EXPECT_EQ(added["added"], json({p2_.address().Key()}));
  EXPECT_EQ(added["current_prefill_instances"].size(), 2u);
  // A dead one waits, then is given up.
  const std::string dead = "127.0.0.1:" + std::to_string(UnusedPort());
  r = Post("/instances/add", json{{"type", "decode"}, {"instances", dead}}.dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["waiting"], json({dead}));
  EXPECT_EQ(json::parse(Get("/health").body)["decode_instances"], 1);
  EXPECT_TRUE(Eventually([&] { return proxy_->registry().Snapshot().size() == 3; }));
  // Duplicates and bad bodies.
  r = Post("/instances/add", json{{"type", "prefill"}, {"instance", p2_.address().Key()}}.dump());
  EXPECT_NE(json::parse(r.body)["message"].get<std::string>().find("already"), std::string::npos);
  EXPECT_EQ(Post("/instances/add", R"({"type":"both","instances":["a:1"]})").status, 400);
  EXPECT_EQ(Post("/instances/add", R"({"type":"decode","instances":["nohost"]})").status, 400);
  // Remove the original prefiller: the traffic moves to the new one.
  r = Post("/instances/remove",
           json{{"type", "prefill"}, {"instances", p1_.address().Key()}}.dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["removed"], json({p1_.address().Key()}));
  EXPECT_EQ(Post("/v1/completions", R"({"prompt":"x","max_tokens":2})").status, 200);
  EXPECT_EQ(p2_.bodies().size(), 1u);
  EXPECT_EQ(p1_.bodies().size(), 0u);
  EXPECT_EQ(json::parse(Get("/health").body)["prefill_instances"], 1);
}

TEST_F(ProxyServerTest, NoInstanceIsA503) {
  StartProxy({}, {d1_.address()});
  net::HttpResponse r = Post("/v1/completions", R"({"prompt":"x"})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], 503);
}

}  // namespace
}  // namespace tandem::proxy
