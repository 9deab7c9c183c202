// HttpServer: the asynchronous HTTP/1.x server behind `tandem serve` and `tandem proxy`.
//
// One io_context run by `io_threads` threads; each connection lives on its own strand,
// so a connection's state is only touched by one thread at a time and thousands of
// mostly idle streaming connections cost no threads. Requests are routed by exact path
// and method; handlers answer through an HttpResponseWriter (see that header), now or
// later, from any thread.
//
// Protocol behaviour:
//   * HTTP/1.1 keep-alive and HTTP/1.0 (keep-alive only if asked); "Connection: close"
//     is honoured. One request at a time per connection: a pipelined request is read
//     only after the previous response is complete.
//   * "Expect: 100-continue" is answered before the body is read.
//   * Errors are OpenAI-style JSON (openai_error.h): 400 malformed request, 404 unknown
//     path, 405 known path with another method (with an Allow header), 413 body over
//     max_body_bytes, 431 headers over max_header_bytes, 503 over max_connections,
//     500 when a handler throws or drops its writer. After a 400/413/431 the connection
//     is closed (the rest of the request cannot be trusted).
//   * Timeouts: idle_timeout between requests on a kept-alive connection,
//     read_timeout for reading one request (headers and body), write_timeout for one
//     socket write while answering (a stalled reader). No timeout applies while a
//     handler takes its time to answer: the engine bounds its own work.
//
// Thread safety: Route() must be called before Start(). Start(), Stop() and the
// destructor are called from one controlling thread. port() is safe after Start().
// Handlers run on I/O threads and must not block (hand long work to another thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/http_request.h"
#include "net/http_response_writer.h"

namespace tandem::net {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // bind address (IPv4 or IPv6 literal, or a hostname)
  uint16_t port = 0;              // 0 = an ephemeral port; see HttpServer::port()
  int io_threads = 1;             // threads running the io_context (>= 1)
  size_t max_body_bytes = 32u << 20;    // larger request bodies get 413
  size_t max_header_bytes = 64u << 10;  // request line + headers; larger get 431
  size_t max_connections = 10000;       // concurrent connections; more get 503
  size_t max_queued_bytes = 8u << 20;   // per connection; see HttpResponseWriter
  std::chrono::milliseconds idle_timeout{60'000};   // keep-alive wait for the next request
  std::chrono::milliseconds read_timeout{30'000};   // reading one request
  std::chrono::milliseconds write_timeout{30'000};  // one socket write making no progress
  std::chrono::milliseconds stop_grace{5'000};      // Stop(): wait for in-flight responses
};

// Called on an I/O thread (the connection's strand) with the request (moved in) and the
// writer. Must not block. May throw: the client then gets a 500 if nothing was sent.
using HttpHandler =
    std::function<void(HttpRequest request, std::shared_ptr<HttpResponseWriter> writer)>;

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // Stop()s if running.
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes requests whose path (target without query) equals `path` exactly and whose
  // method equals `method` to `handler`. A later Route for the same pair replaces the
  // earlier one. Precondition: not started.
  void Route(std::string method, std::string path, HttpHandler handler);

  // Binds, listens and starts the I/O threads. Returns Unavailable when the address
  // cannot be bound (e.g. in use), InvalidArgument for a bad host,
  // FailedPrecondition when already started.
  Status Start();

  // Graceful stop: stops accepting, closes idle connections at once, lets in-flight
  // responses finish for up to options.stop_grace, then closes the rest (their OnClose
  // callbacks fire) and joins the I/O threads. Idempotent; returns within about
  // stop_grace + 1 s. Writers that outlive the server stay safe to call (they return
  // false).
  void Stop();

  // The bound port (the ephemeral one when options.port was 0). Precondition: Start() ok.
  uint16_t port() const;

  // Open connections right now (for metrics and tests).
  size_t num_connections() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::net
