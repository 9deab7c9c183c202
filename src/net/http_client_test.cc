#include "net/http_client.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "net/http_server.h"
#include "net/sse.h"

namespace tandem::net {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A port with nothing listening: bind an ephemeral port, then release it.
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

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions o;
    o.host = "127.0.0.1";
    o.idle_timeout = 300ms;  // pooled connections go stale quickly
    server_ = std::make_unique<HttpServer>(o);
    server_->Route("GET", "/remote", [](HttpRequest r, std::shared_ptr<HttpResponseWriter> w) {
      w->SendResponse(200, {{"Content-Type", "text/plain"}}, r.remote_address);
    });
    server_->Route("GET", "/hang", [this](HttpRequest, std::shared_ptr<HttpResponseWriter> w) {
      std::lock_guard<std::mutex> lock(mu_);
      parked_.push_back(std::move(w));  // never answered
    });
    server_->Route("GET", "/sse", [](HttpRequest, std::shared_ptr<HttpResponseWriter> w) {
      w->StartStream(200, {});
      for (int i = 0; i < 3; ++i) w->Write(SseEvent("{\"i\":" + std::to_string(i) + "}"));
      w->Write(SseEvent("[DONE]"));
      w->End();
    });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      parked_.clear();
    }
    server_->Stop();
  }
  std::string Url(std::string_view target) const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + std::string(target);
  }

  std::unique_ptr<HttpServer> server_;
  std::mutex mu_;
  std::vector<std::shared_ptr<HttpResponseWriter>> parked_;
  HttpClient client_;
};

TEST_F(ClientTest, TimeoutIsDeadlineExceeded) {
  auto start = Clock::now();
  auto r = client_.Fetch("GET", Url("/hang"), {}, {}, 200ms);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST_F(ClientTest, IdleTimeoutIsDeadlineExceeded) {
  auto request = HttpClientRequest::FromUrl("GET", Url("/hang"));
  ASSERT_TRUE(request.ok());
  request->timeout = 0ms;
  request->idle_timeout = 200ms;
  EXPECT_EQ(client_.Fetch(*request).status().code(), StatusCode::kDeadlineExceeded);
}

TEST_F(ClientTest, ConnectionRefusedIsUnavailable) {
  uint16_t port = UnusedPort();
  auto r = client_.Fetch("GET", "http://127.0.0.1:" + std::to_string(port) + "/", {}, {}, 2s);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
}

TEST_F(ClientTest, OnSentRunsOnlyWhenTheServerMayHaveTheRequest) {
  auto run = [&](const std::string& url) {
    auto request = HttpClientRequest::FromUrl("GET", url);
    EXPECT_TRUE(request.ok());
    std::atomic<int> sent{0};
    std::promise<Status> done;
    HttpStreamCallbacks cb;
    cb.on_sent = [&] { sent.fetch_add(1); };
    cb.on_done = [&](Status s) { done.set_value(s); };
    auto stream = client_.Stream(*request, cb);
    const Status status = done.get_future().get();
    return std::make_pair(status.code(), sent.load());
  };
  // Refused: the server cannot have the request.
  EXPECT_EQ(run("http://127.0.0.1:" + std::to_string(UnusedPort()) + "/"),
            std::make_pair(StatusCode::kUnavailable, 0));
  EXPECT_EQ(run(Url("/remote")), std::make_pair(StatusCode::kOk, 1));
  // A pooled connection the server dropped: re-sent on a fresh one, reported once.
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(run(Url("/remote")), std::make_pair(StatusCode::kOk, 1));
  // The server is gone: the pooled connection is dead and the fresh one refused, so the
  // server never had the request.
  const std::string url = Url("/remote");
  server_->Stop();
  EXPECT_EQ(run(url), std::make_pair(StatusCode::kUnavailable, 0));
}

TEST_F(ClientTest, BadUrlIsInvalidArgument) {
  EXPECT_EQ(client_.Fetch("GET", "http://:1/").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, ReusesPooledConnectionsAndRecoversFromStaleOnes) {
  auto a = client_.Fetch("GET", Url("/remote"));
  auto b = client_.Fetch("GET", Url("/remote"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->body, b->body);  // same client port: the connection was reused
  // The server drops idle connections after 300 ms; the pooled one is then dead and
  // the client must notice (or retry) transparently.
  std::this_thread::sleep_for(600ms);
  auto c = client_.Fetch("GET", Url("/remote"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->status, 200);
  EXPECT_NE(c->body, a->body);
}

TEST_F(ClientTest, StreamsSseAndCancels) {
  auto request = HttpClientRequest::FromUrl("GET", Url("/sse"));
  ASSERT_TRUE(request.ok());
  std::promise<Status> done;
  SseParser parser;
  std::vector<std::string> events;
  int status = 0;
  HttpStreamCallbacks cb;
  cb.on_headers = [&](int s, const HttpHeaders& h) {
    status = s;
    EXPECT_EQ(h.GetOr("Content-Type", ""), "text/event-stream");
  };
  cb.on_data = [&](std::string_view bytes) { EXPECT_TRUE(parser.Feed(bytes, &events).ok()); };
  cb.on_done = [&](Status s) { done.set_value(s); };
  auto stream = client_.Stream(*request, cb);
  EXPECT_TRUE(done.get_future().get().ok());
  EXPECT_EQ(status, 200);
  EXPECT_EQ(events, (std::vector<std::string>{"{\"i\":0}", "{\"i\":1}", "{\"i\":2}", "[DONE]"}));
  stream->Cancel();  // after the end: a no-op

  // Cancel while the server never answers.
  auto hang = HttpClientRequest::FromUrl("GET", Url("/hang"));
  ASSERT_TRUE(hang.ok());
  std::promise<Status> cancelled;
  HttpStreamCallbacks cb2;
  cb2.on_done = [&](Status s) { cancelled.set_value(s); };
  auto s2 = client_.Stream(*hang, cb2);
  std::this_thread::sleep_for(50ms);
  s2->Cancel();
  auto f = cancelled.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get().code(), StatusCode::kCancelled);
}

TEST_F(ClientTest, FetchAsyncCanBeCancelled) {
  auto hang = HttpClientRequest::FromUrl("GET", Url("/hang"));
  ASSERT_TRUE(hang.ok());
  std::promise<Status> done;
  auto handle =
      client_.FetchAsync(*hang, [&](StatusOr<HttpResponse> r) { done.set_value(r.status()); });
  std::this_thread::sleep_for(50ms);
  handle->Cancel();
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get().code(), StatusCode::kCancelled);
}

TEST_F(ClientTest, BlockingFetchFromCallbackIsRefused) {
  auto request = HttpClientRequest::FromUrl("GET", Url("/remote"));
  ASSERT_TRUE(request.ok());
  std::promise<Status> inner;
  client_.FetchAsync(*request, [&](StatusOr<HttpResponse>) {
    inner.set_value(client_.Fetch("GET", Url("/remote")).status());
  });
  auto f = inner.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ClientTest, DestructorCancelsStreamsInFlight) {
  std::promise<Status> done;
  {
    HttpClient client;
    auto hang = HttpClientRequest::FromUrl("GET", Url("/hang"));
    ASSERT_TRUE(hang.ok());
    HttpStreamCallbacks cb;
    cb.on_done = [&](Status s) { done.set_value(s); };
    auto stream = client.Stream(*hang, cb);
    std::this_thread::sleep_for(50ms);
  }
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(f.get().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace tandem::net
