// HttpClient: an asynchronous HTTP/1.1 client for the proxy, health probes and tests.
//
// One io_context run by `io_threads` threads serves every request of a client; each
// request runs as a coroutine on its own strand, so thousands of concurrent streams
// cost no threads. Connections are kept alive and pooled per host:port (an idle
// connection is reused at most idle_connection_ttl after its last response; a request
// that fails on a reused connection before any response byte arrives is retried once
// on a fresh connection).
//
// Errors (Status): connection failures (resolve, connect, reset, a malformed response)
// are Unavailable; a request over its timeout is DeadlineExceeded; Cancel() gives
// Cancelled; a Fetch body over max_response_body_bytes is ResourceExhausted. An HTTP
// error status (4xx, 5xx) is not a Status error: it is a response.
//
// Thread safety: all methods may be called from any thread, except that Fetch() and the
// destructor must not be called from a callback running on this client's I/O threads.
// Stream callbacks of one request run one at a time, on an I/O thread; they must not
// block.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "net/http_headers.h"

namespace tandem::net {

struct HttpClientRequest {
  std::string method = "GET";
  std::string host;  // name or IP literal (IPv6 without brackets)
  uint16_t port = 80;
  std::string target = "/";  // path plus optional "?query"
  HttpHeaders headers;       // Host and Content-Length are added unless present
  std::string body;
  // Whole exchange from connect to the last body byte; 0 = no limit (streams).
  std::chrono::milliseconds timeout{30'000};
  // Longest silence from the server while waiting for or reading the response;
  // 0 = no limit. Useful for streams, whose total length is unknown.
  std::chrono::milliseconds idle_timeout{0};

  // method + "http://host:port/target" (see url.h).
  static StatusOr<HttpClientRequest> FromUrl(std::string method, std::string_view url);
};

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;
  std::string body;
};

// Callbacks of one streamed request; any may be empty. They run on an I/O thread, in
// order: on_sent, on_headers once, on_data zero or more times, on_done exactly once (also
// after an error or Cancel; the others may not have run).
struct HttpStreamCallbacks {
  // The server may have the request: its response head arrived, or the request was
  // written and the exchange then failed (at most once, before on_headers). It never
  // runs when connecting fails, nor for a pooled connection found dead before any
  // response byte (the client re-sends on a fresh one): then the server cannot have
  // seen the request.
  std::function<void()> on_sent;
  std::function<void(int status, const HttpHeaders& headers)> on_headers;
  std::function<void(std::string_view body_bytes)> on_data;  // de-chunked body bytes
  std::function<void(Status status)> on_done;
};

// Handle of one streamed request.
class HttpClientStream {
 public:
  virtual ~HttpClientStream() = default;
  // Aborts the request (closes its connection). on_done(Cancelled) follows unless the
  // request already finished. Thread-safe, idempotent; never blocks.
  virtual void Cancel() = 0;
};

struct HttpClientOptions {
  int io_threads = 1;
  size_t max_response_header_bytes = 64u << 10;
  size_t max_response_body_bytes = 256u << 20;  // Fetch only; streams are unbounded
  size_t max_idle_connections_per_host = 32;
  std::chrono::milliseconds idle_connection_ttl{30'000};
};

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options = {});
  // Cancels requests in flight (their on_done(Cancelled) runs before this returns),
  // closes pooled connections and joins the I/O threads.
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` and waits for the whole response. Returns FailedPrecondition when
  // called on this client's own I/O thread (it would deadlock).
  StatusOr<HttpResponse> Fetch(HttpClientRequest request);
  // Convenience: `url` as in ParseHttpUrl.
  StatusOr<HttpResponse> Fetch(std::string method, std::string_view url, HttpHeaders headers = {},
                               std::string body = {},
                               std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Sends `request` without waiting; `done` runs on an I/O thread with the response.
  // The returned handle may be dropped; its Cancel() aborts the request (`done` then
  // gets Cancelled unless the response was already complete).
  std::shared_ptr<HttpClientStream> FetchAsync(
      HttpClientRequest request, std::function<void(StatusOr<HttpResponse> response)> done);

  // Sends `request` and delivers the response through `callbacks` as it arrives.
  std::shared_ptr<HttpClientStream> Stream(HttpClientRequest request,
                                           HttpStreamCallbacks callbacks);

 private:
  class Core;
  std::shared_ptr<Core> core_;
};

}  // namespace tandem::net
