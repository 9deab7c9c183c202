// ServerConnection: one accepted TCP connection of HttpServer (internal to tandem_net;
// Boost.Asio/Beast may only be included by tandem_net's own .cc files and this header).
//
// A connection runs one coroutine on its own strand: wait for a request (idle_timeout),
// read it (read_timeout), hand it to the host's router, then write whatever the
// handler's HttpResponseWriter queues (write_timeout per write) until the response is
// complete; repeat while keep-alive holds. While a response is outstanding a readiness
// wait stays pending on the socket to notice a client disconnect (see
// http_response_writer.h).
//
// Thread safety: Start(), BeginDrain() and ForceClose() may be called from any thread;
// everything else runs on the connection's strand.
//
// Lifetime: owned by its own coroutine (shared_from_this) and by handlers posted to its
// strand. Writers hold only a weak reference, so a connection is always destroyed on an
// I/O thread or while its io_context is destroyed. The host must outlive the coroutine:
// HttpServer::Stop waits for every connection's Done callback before returning.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "net/http_request.h"
#include "net/http_response_writer.h"
#include "net/http_server.h"

namespace tandem::net::internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class ResponseState;

// What a connection needs from its server.
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  virtual const HttpServerOptions& options() const = 0;
  // Routes one request; runs on the connection's strand.
  virtual void Dispatch(HttpRequest request, std::shared_ptr<HttpResponseWriter> writer) = 0;
  // The connection's coroutine has finished; `connection` must not be used afterwards.
  virtual void ConnectionDone(const void* connection) = 0;
};

class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  // `socket` must be bound to a strand executor (all handlers then run on it).
  // `io` is handed to response writers, which keep it alive if they outlive the server
  // (held weakly here: queued handlers own connections, so a strong reference would
  // be a cycle).
  ServerConnection(tcp::socket socket, std::weak_ptr<asio::io_context> io,
                   ConnectionHost* host);
  ~ServerConnection();

  void Start();
  // Closes the connection if it waits for a request; otherwise closes it after the
  // current response (and answers that response with "Connection: close" if not sent).
  void BeginDrain();
  // Closes the connection now; an outstanding response's OnClose fires.
  void ForceClose();

  // Strand only. Called by ResponseState's posted work for response `response_id`.
  //   kData      more bytes of the response
  //   kLast      the final bytes; the response is complete
  //   kAbort     close now, dropping queued bytes (a slow reader over the queue bound)
  //   kTruncate  write what is queued, then close (a stream dropped before End)
  enum class Delivery { kData, kLast, kAbort, kTruncate };
  void Deliver(uint64_t response_id, std::string bytes, Delivery kind);
  // Strand only: closes the socket; an outstanding response's OnClose fires.
  void Close();

 private:
  // `self` keeps the connection alive for as long as the coroutine runs.
  asio::awaitable<void> Run(std::shared_ptr<ServerConnection> self);
  asio::awaitable<void> Serve();
  // Reads one request. On failure returns false and sets *error_status to the HTTP
  // status to answer with, or 0 to close silently.
  asio::awaitable<bool> ReadRequest(HttpRequest* request, bool* keep_alive, int* error_status,
                                    std::string* error_message);
  // Dispatches the request and writes the response. Returns whether to keep going.
  asio::awaitable<bool> Respond(HttpRequest request, bool keep_alive);
  asio::awaitable<bool> WriteQueued();
  // Answers a protocol error, then drains the peer for a bounded time so that the
  // answer is not lost to a TCP reset, and closes.
  asio::awaitable<void> SendErrorAndClose(int status, std::string message);

  void ArmDeadline(std::chrono::milliseconds timeout);
  void DisarmDeadline();
  void StartWatch();
  void StopWatch();
  void OnWatchReady(uint64_t generation, boost::system::error_code ec);

  tcp::socket socket_;
  std::weak_ptr<asio::io_context> io_;
  ConnectionHost* host_;  // not owned; outlives Run()
  const HttpServerOptions& options_;
  std::string remote_address_;
  boost::beast::flat_buffer buffer_;  // bytes read past the previous request
  asio::steady_timer deadline_;       // closes the socket when it expires
  asio::steady_timer wake_;           // cancelled to wake WriteQueued()
  enum class Phase { kIdle, kReading, kResponding };
  Phase phase_ = Phase::kIdle;
  bool closed_ = false;
  bool draining_ = false;
  bool timed_out_ = false;

  // The response in progress.
  uint64_t response_id_ = 0;
  std::shared_ptr<ResponseState> current_;
  std::deque<std::string> out_;  // bytes waiting for the socket
  bool response_complete_ = false;
  bool truncate_ = false;  // close once out_ is flushed
  uint64_t watch_generation_ = 0;
  bool watch_pending_ = false;
};

// Rejects a connection over the limit with a 503 and closes it (bounded time).
void RejectConnection(tcp::socket socket, std::string json_body);

}  // namespace tandem::net::internal
