#include "net/http_server.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "net/http_client.h"
#include "net/net_test_util.h"
#include "net/sse.h"

namespace tandem::net {
namespace {

using namespace std::chrono_literals;
using testing::BodyOf;
using testing::RawConnection;
using testing::StatusOf;
using Clock = std::chrono::steady_clock;

HttpServerOptions LocalOptions() {
  HttpServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  return o;
}

void EchoHandler(HttpRequest request, std::shared_ptr<HttpResponseWriter> writer) {
  nlohmann::json j = {{"method", request.method},     {"path", request.path()},
                      {"query", request.query()},     {"body", request.body},
                      {"remote", request.remote_address},
                      {"x_test", request.headers.GetOr("x-test", "")}};
  SendJson(*writer, 200, j.dump());
}

// A server with /echo (GET, POST) and /health (GET) started on an ephemeral port.
class ServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = LocalOptions()) {
    server_ = std::make_unique<HttpServer>(options);
    server_->Route("GET", "/echo", EchoHandler);
    server_->Route("POST", "/echo", EchoHandler);
    server_->Route("GET", "/health", [](HttpRequest, std::shared_ptr<HttpResponseWriter> w) {
      w->SendResponse(200, {{"Content-Type", "text/plain"}}, "ok");
    });
    AddRoutes();
    ASSERT_TRUE(server_->Start().ok());
  }
  virtual void AddRoutes() {}
  std::string Url(std::string_view target) const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + std::string(target);
  }

  std::unique_ptr<HttpServer> server_;
  HttpClient client_;
};

TEST_F(ServerTest, RoutesByExactPathAndMethod) {
  StartServer();
  auto r = client_.Fetch("POST", Url("/echo?a=b"), {{"X-Test", "yes"}}, "hello");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers.GetOr("content-type", ""), "application/json");
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["method"], "POST");
  EXPECT_EQ(j["path"], "/echo");
  EXPECT_EQ(j["query"], "a=b");
  EXPECT_EQ(j["body"], "hello");
  EXPECT_EQ(j["x_test"], "yes");
  EXPECT_EQ(j["remote"].get<std::string>().rfind("127.0.0.1:", 0), 0u);

  r = client_.Fetch("GET", Url("/echo/more"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["error"]["type"], "NotFoundError");
  EXPECT_EQ(j["error"]["code"], 404);
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());

  r = client_.Fetch("DELETE", Url("/health"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->headers.GetOr("Allow", ""), "GET");
  EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["code"], 405);
}

TEST_F(ServerTest, OversizedBodyGets413AndServerKeepsServing) {
  HttpServerOptions o = LocalOptions();
  o.max_body_bytes = 1024;
  StartServer(o);
  // Declared too large up front: rejected before the body is read.
  auto r = client_.Fetch("POST", Url("/echo"), {}, std::string(4096, 'x'));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["code"], 413);
  // Chunked upload that only turns out too large while reading.
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.ok());
  std::string chunked = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; ++i) chunked += "200\r\n" + std::string(512, 'y') + "\r\n";
  chunked += "0\r\n\r\n";
  ASSERT_TRUE(raw.Send(chunked));
  EXPECT_EQ(StatusOf(raw.ReadResponse()), 413);
  // Exactly at the limit is fine, and the server still answers.
  r = client_.Fetch("POST", Url("/echo"), {}, std::string(1024, 'z'));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, HugeHeadersGet431) {
  HttpServerOptions o = LocalOptions();
  o.max_header_bytes = 8192;
  StartServer(o);
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.Send("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') +
                       "\r\n\r\n"));
  std::string response = raw.ReadResponse();
  EXPECT_EQ(StatusOf(response), 431);
  EXPECT_EQ(nlohmann::json::parse(BodyOf(response))["error"]["code"], 431);
  auto r = client_.Fetch("GET", Url("/health"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, MalformedRequestsGet400WithoutCrashing) {
  StartServer();
  const std::vector<std::string> bad = {
      "GARBAGE\r\n\r\n",
      "GET / HTTP/9.9\r\n\r\n",
      "GET /health HTTP/1.1\r\nBad Header\r\n\r\n",
      "POST /echo HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
      "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15),  // TLS-ish
  };
  for (const std::string& request : bad) {
    RawConnection raw(server_->port());
    ASSERT_TRUE(raw.Send(request));
    std::string response = raw.ReadResponse();
    EXPECT_EQ(StatusOf(response), 400) << "request: " << request << "\nresponse: " << response;
    EXPECT_TRUE(raw.WaitClosed(2s));
  }
  auto r = client_.Fetch("GET", Url("/health"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, KeepAliveReusesTheConnection) {
  StartServer();
  RawConnection raw(server_->port());
  std::string remotes[3];
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(raw.Send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string response = raw.ReadResponse();
    ASSERT_EQ(StatusOf(response), 200) << response;
    remotes[i] = nlohmann::json::parse(BodyOf(response))["remote"];
  }
  EXPECT_EQ(remotes[0], remotes[1]);
  EXPECT_EQ(remotes[1], remotes[2]);
  // Two pipelined requests are answered in order.
  ASSERT_TRUE(raw.Send("GET /echo?n=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?n=2 HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(nlohmann::json::parse(BodyOf(raw.ReadResponse()))["query"], "n=1");
  EXPECT_EQ(nlohmann::json::parse(BodyOf(raw.ReadResponse()))["query"], "n=2");
  // Connection: close is honoured.
  ASSERT_TRUE(raw.Send("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"));
  std::string response = raw.ReadResponse();
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_NE(response.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(raw.WaitClosed(2s));
}

TEST_F(ServerTest, Http10ClosesUnlessKeepAliveAsked) {
  StartServer();
  RawConnection a(server_->port());
  ASSERT_TRUE(a.Send("GET /health HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(BodyOf(a.ReadResponse()), "ok");
  EXPECT_TRUE(a.WaitClosed(2s));
  RawConnection b(server_->port());
  ASSERT_TRUE(b.Send("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  std::string response = b.ReadResponse();
  EXPECT_NE(response.find("Connection: keep-alive"), std::string::npos) << response;
  ASSERT_TRUE(b.Send("GET /health HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(BodyOf(b.ReadResponse()), "ok");
}

TEST_F(ServerTest, ExpectContinue) {
  StartServer();
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_NE(raw.ReadUntil("\r\n\r\n").find("100 Continue"), std::string::npos);
  ASSERT_TRUE(raw.Send("hello"));
  std::string response = raw.ReadResponse();
  EXPECT_EQ(nlohmann::json::parse(BodyOf(response))["body"], "hello");
}

TEST_F(ServerTest, ReadTimeoutClosesSlowRequests) {
  HttpServerOptions o = LocalOptions();
  o.read_timeout = 200ms;
  o.idle_timeout = 300ms;
  StartServer(o);
  RawConnection slow(server_->port());
  ASSERT_TRUE(slow.Send("GET /health HTTP/1.1\r\nHost"));
  EXPECT_TRUE(slow.WaitClosed(2s));
  RawConnection idle(server_->port());
  EXPECT_TRUE(idle.WaitClosed(2s));
}

TEST_F(ServerTest, ConnectionLimitGets503) {
  HttpServerOptions o = LocalOptions();
  o.max_connections = 2;
  StartServer(o);
  RawConnection a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.Send("GET /health HTTP/1.1\r\n\r\n"));
  ASSERT_EQ(StatusOf(a.ReadResponse()), 200);
  ASSERT_TRUE(b.Send("GET /health HTTP/1.1\r\n\r\n"));
  ASSERT_EQ(StatusOf(b.ReadResponse()), 200);
  RawConnection c(server_->port());
  ASSERT_TRUE(c.Send("GET /health HTTP/1.1\r\n\r\n"));
  std::string response = c.ReadResponse();
  EXPECT_EQ(StatusOf(response), 503) << response;
  EXPECT_EQ(nlohmann::json::parse(BodyOf(response))["error"]["code"], 503);
  a.Close();
  // Once a slot frees up, new connections are served again.
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    auto r = client_.Fetch("GET", Url("/health"));
    served = r.ok() && r->status == 200;
    if (!served) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(served);
}

TEST_F(ServerTest, HandlerFailuresBecome500) {
  StartServer();
  server_.reset();
  server_ = std::make_unique<HttpServer>(LocalOptions());
  server_->Route("GET", "/throw", [](HttpRequest, std::shared_ptr<HttpResponseWriter>) {
    throw std::runtime_error("boom");
  });
  server_->Route("GET", "/drop", [](HttpRequest, std::shared_ptr<HttpResponseWriter>) {});
  ASSERT_TRUE(server_->Start().ok());
  for (const char* path : {"/throw", "/drop"}) {
    auto r = client_.Fetch("GET", Url(path));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 500) << path;
    EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["code"], 500);
  }
}

TEST_F(ServerTest, ManyIoThreadsServeConcurrentClients) {
  HttpServerOptions o = LocalOptions();
  o.io_threads = 4;
  StartServer(o);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client;
      for (int i = 0; i < 25; ++i) {
        std::string body = "t" + std::to_string(t) + "i" + std::to_string(i);
        auto r = client.Fetch("POST", Url("/echo"), {}, body);
        if (r.ok() && r->status == 200 && nlohmann::json::parse(r->body)["body"] == body) good++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 200);
}

}  // namespace
}  // namespace tandem::net
