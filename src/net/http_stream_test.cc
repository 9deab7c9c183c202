// Streamed responses: chunk-by-chunk delivery from another thread, disconnect
// detection, many concurrent streams on one I/O thread, backpressure and Stop().
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "net/http_client.h"
#include "net/http_server.h"
#include "net/net_test_util.h"
#include "net/sse.h"

namespace tandem::net {
namespace {

using namespace std::chrono_literals;
using testing::RawConnection;
using testing::StatusOf;
using Clock = std::chrono::steady_clock;

// Collects writers handed over by a handler, as the engine's step loop would.
class WriterInbox {
 public:
  void Put(std::shared_ptr<HttpResponseWriter> w) {
    std::lock_guard<std::mutex> lock(mu_);
    writers_.push_back(std::move(w));
    cv_.notify_all();
  }
  // Waits until `n` writers arrived; returns them (and keeps them).
  std::vector<std::shared_ptr<HttpResponseWriter>> WaitFor(size_t n, std::chrono::seconds t = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, t, [&] { return writers_.size() >= n; });
    return writers_;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    writers_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<HttpResponseWriter>> writers_;
};

class StreamTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions o = {}) {
    o.host = "127.0.0.1";
    server_ = std::make_unique<HttpServer>(o);
    // Starts an SSE stream and hands the writer to the test's "producer".
    server_->Route("POST", "/stream", [this](HttpRequest, std::shared_ptr<HttpResponseWriter> w) {
      w->StartStream(200, {});
      inbox_.Put(std::move(w));
    });
    server_->Route("GET", "/health", [](HttpRequest, std::shared_ptr<HttpResponseWriter> w) {
      w->SendResponse(200, {}, "{}");
    });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    inbox_.Clear();
    if (server_) server_->Stop();
  }
  HttpClientRequest StreamRequest() {
    HttpClientRequest r;
    r.method = "POST";
    r.host = "127.0.0.1";
    r.port = server_->port();
    r.target = "/stream";
    r.body = "{}";
    r.timeout = 0ms;
    return r;
  }

  std::unique_ptr<HttpServer> server_;
  WriterInbox inbox_;
};

TEST_F(StreamTest, ChunksArriveOneByOneFromAnotherThread) {
  StartServer();
  HttpClient client;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> events;
  SseParser parser;
  std::promise<Status> done;
  HttpStreamCallbacks cb;
  cb.on_data = [&](std::string_view bytes) {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_TRUE(parser.Feed(bytes, &events).ok());
    cv.notify_all();
  };
  cb.on_done = [&](Status s) { done.set_value(s); };
  auto stream = client.Stream(StreamRequest(), cb);

  auto writer = inbox_.WaitFor(1).at(0);
  // The producer sends event i+1 only after the client has received event i: this can
  // only finish if every chunk is delivered on its own, not buffered to the end.
  std::thread producer([&] {
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(writer->Write(SseEvent("token" + std::to_string(i))));
      std::unique_lock<std::mutex> lock(mu);
      ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return events.size() == size_t(i + 1); }))
          << "event " << i << " not delivered on its own";
    }
    ASSERT_TRUE(writer->Write(SseEvent("[DONE]")));
    ASSERT_TRUE(writer->End());
    EXPECT_FALSE(writer->Write("late"));
  });
  producer.join();
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());
  EXPECT_EQ(events.size(), 6u);
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST_F(StreamTest, OnCloseFiresPromptlyWhenClientDisconnects) {
  StartServer();
  HttpClient client;
  std::promise<void> first_event;
  std::atomic<bool> got_first{false};
  HttpStreamCallbacks cb;
  cb.on_data = [&](std::string_view) {
    if (!got_first.exchange(true)) first_event.set_value();
  };
  auto stream = client.Stream(StreamRequest(), cb);
  auto writer = inbox_.WaitFor(1).at(0);
  std::promise<Clock::time_point> closed;
  writer->OnClose([&] { closed.set_value(Clock::now()); });
  ASSERT_TRUE(writer->Write(SseEvent("hello")));
  ASSERT_EQ(first_event.get_future().wait_for(5s), std::future_status::ready);

  // The server has nothing to write now; it must still notice the disconnect.
  auto disconnected_at = Clock::now();
  stream->Cancel();
  auto f = closed.get_future();
  ASSERT_EQ(f.wait_for(1s), std::future_status::ready) << "OnClose did not fire within 1 s";
  EXPECT_LT(f.get() - disconnected_at, 1s);
  EXPECT_TRUE(writer->IsClosed());
  EXPECT_FALSE(writer->Write(SseEvent("nobody listens")));
  EXPECT_FALSE(writer->End());
  // A callback registered after the close runs at once.
  bool late = false;
  writer->OnClose([&] { late = true; });
  EXPECT_TRUE(late);
}

TEST_F(StreamTest, OnCloseFiresWhenRawClientResets) {
  StartServer();
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.Send("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_EQ(StatusOf(raw.ReadUntil("\r\n\r\n")), 200);
  auto writer = inbox_.WaitFor(1).at(0);
  std::promise<void> closed;
  writer->OnClose([&] { closed.set_value(); });
  raw.Close();
  EXPECT_EQ(closed.get_future().wait_for(1s), std::future_status::ready);
}

TEST_F(StreamTest, ManyConcurrentStreamsOnOneIoThread) {
  constexpr int kStreams = 300;
  ASSERT_GE(testing::RaiseFdLimit(4 * kStreams + 64), 2 * kStreams + 64);
  HttpServerOptions o;
  o.io_threads = 1;
  StartServer(o);
  HttpClient client;  // one I/O thread too
  std::atomic<int> first_events{0};
  std::atomic<int> ok_done{0};
  std::atomic<int> failed_done{0};
  std::vector<std::shared_ptr<HttpClientStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    auto parser = std::make_shared<SseParser>();
    auto count = std::make_shared<int>(0);
    HttpStreamCallbacks cb;
    cb.on_data = [&, parser, count](std::string_view bytes) {
      std::vector<std::string> events;
      ASSERT_TRUE(parser->Feed(bytes, &events).ok());
      for (size_t e = 0; e < events.size(); ++e) {
        if ((*count)++ == 0) first_events++;
      }
    };
    cb.on_done = [&](Status s) { (s.ok() ? ok_done : failed_done)++; };
    streams.push_back(client.Stream(StreamRequest(), cb));
  }
  auto writers = inbox_.WaitFor(kStreams, 20s);
  ASSERT_EQ(writers.size(), size_t(kStreams));
  for (auto& w : writers) ASSERT_TRUE(w->Write(SseEvent("first")));
  auto deadline = Clock::now() + 20s;
  while (first_events < kStreams && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(first_events.load(), kStreams);
  EXPECT_EQ(server_->num_connections(), size_t(kStreams));  // all held open at once
  std::thread producer([&] {
    for (auto& w : writers) {
      EXPECT_TRUE(w->Write(SseEvent("[DONE]")));
      EXPECT_TRUE(w->End());
    }
  });
  producer.join();
  while (ok_done + failed_done < kStreams && Clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(ok_done.load(), kStreams);
  EXPECT_EQ(failed_done.load(), 0);
}

TEST_F(StreamTest, SlowReaderIsDroppedInsteadOfGrowingMemory) {
  HttpServerOptions o;
  o.max_queued_bytes = 256 << 10;
  StartServer(o);
  RawConnection raw(server_->port());  // never reads the body
  ASSERT_TRUE(raw.Send("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  auto writer = inbox_.WaitFor(1).at(0);
  std::promise<void> closed;
  writer->OnClose([&] { closed.set_value(); });
  const std::string chunk(64 << 10, 'x');
  size_t sent = 0;
  bool refused = false;
  // Kernel socket buffers absorb some megabytes; past them the queue bound must trip.
  while (sent < (512u << 20)) {
    if (!writer->Write(chunk)) {
      refused = true;
      break;
    }
    sent += chunk.size();
    EXPECT_LE(writer->QueuedBytes(), o.max_queued_bytes);
  }
  EXPECT_TRUE(refused) << "wrote " << sent << " bytes without backpressure";
  EXPECT_EQ(closed.get_future().wait_for(2s), std::future_status::ready);
}

TEST_F(StreamTest, StopWithOpenConnectionsReturnsPromptly) {
  HttpServerOptions o;
  o.stop_grace = 300ms;
  StartServer(o);
  std::vector<RawConnection> idle;
  for (int i = 0; i < 10; ++i) {
    idle.emplace_back(server_->port());
    ASSERT_TRUE(idle.back().Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_EQ(StatusOf(idle.back().ReadResponse()), 200);
  }
  RawConnection streaming(server_->port());
  ASSERT_TRUE(streaming.Send("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  auto writer = inbox_.WaitFor(1).at(0);
  std::promise<void> closed;
  writer->OnClose([&] { closed.set_value(); });
  ASSERT_TRUE(writer->Write(SseEvent("x")));

  auto start = Clock::now();
  server_->Stop();
  auto took = Clock::now() - start;
  EXPECT_LT(took, 1500ms);
  EXPECT_EQ(closed.get_future().wait_for(0s), std::future_status::ready);
  for (auto& c : idle) EXPECT_TRUE(c.WaitClosed(1s));
  EXPECT_TRUE(streaming.WaitClosed(1s));
  // The writer outlives the server safely.
  EXPECT_FALSE(writer->Write("after stop"));
  server_.reset();
  EXPECT_FALSE(writer->Write("after destruction"));
  writer.reset();
  inbox_.Clear();
}

TEST_F(StreamTest, StopLetsInFlightStreamsFinishWithinGrace) {
  HttpServerOptions o;
  o.stop_grace = 5s;
  StartServer(o);
  RawConnection streaming(server_->port());
  ASSERT_TRUE(streaming.Send("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  auto writer = inbox_.WaitFor(1).at(0);
  std::thread producer([&] {
    std::this_thread::sleep_for(200ms);
    writer->Write(SseEvent("last"));
    writer->End();
  });
  auto start = Clock::now();
  server_->Stop();
  EXPECT_LT(Clock::now() - start, 2s);
  producer.join();
  std::string body = streaming.ReadUntil("0\r\n\r\n", 2s);
  EXPECT_NE(body.find("data: last"), std::string::npos) << body;
  EXPECT_NE(body.find("0\r\n\r\n"), std::string::npos) << body;
}

TEST_F(StreamTest, Http10StreamIsCloseDelimited) {
  StartServer();
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.Send("POST /stream HTTP/1.0\r\nContent-Length: 0\r\n\r\n"));
  auto writer = inbox_.WaitFor(1).at(0);
  writer->Write(SseEvent("a"));
  writer->End();
  std::string response = raw.ReadResponse();
  EXPECT_EQ(response.find("chunked"), std::string::npos) << response;
  EXPECT_NE(response.find("\r\n\r\ndata: a\n\n"), std::string::npos) << response;
}

TEST_F(StreamTest, DroppedUnfinishedStreamAbortsTheConnection) {
  StartServer();
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.Send("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  auto writer = inbox_.WaitFor(1).at(0);
  writer->Write(SseEvent("partial"));
  writer.reset();
  inbox_.Clear();
  std::string got = raw.ReadUntil("never", 2s);
  EXPECT_NE(got.find("data: partial"), std::string::npos);
  EXPECT_EQ(got.find("0\r\n\r\n"), std::string::npos) << "a dropped stream must not look complete";
}

}  // namespace
}  // namespace tandem::net
