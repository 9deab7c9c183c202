// HttpResponseWriter: how a handler answers one request, now or later, from any thread.
//
// The server calls a handler with the request and a shared_ptr<HttpResponseWriter>. The
// handler either answers at once or hands the writer to another thread (the engine's step
// loop) that answers when it can. There is no thread per connection: every call below
// only queues bytes and posts them to the connection's strand.
//
// A response is exactly one of:
//   SendResponse(status, headers, body)            a complete response, or
//   StartStream(status, headers), Write()*, End()  a streamed one (chunked on HTTP/1.1,
//                                                  close-delimited on HTTP/1.0).
//
// Client disconnects: OnClose(cb) registers a callback that fires once when the
// connection is gone before the response was completely handed over (client closed or
// reset the socket, a write failed or timed out, the queue bound was exceeded, or the
// server stopped). The server keeps a readiness wait pending on the socket while a
// response is outstanding, so a disconnect is noticed as soon as the peer's FIN/RST
// arrives, even when nothing is being written. (If the client sends further bytes while
// its response is outstanding, e.g. a pipelined request, watching stops for the rest of
// that response: those bytes belong to the next request and are left unread.)
//
// Backpressure: bytes queued but not yet written to the socket are bounded per
// connection (HttpServerOptions::max_queued_bytes). A Write that would exceed the bound
// does not block the producer and does not grow memory: the server drops the slow client
// (closes the connection), OnClose fires, and Write returns false. A producer that wants
// to pace itself can poll QueuedBytes().
//
// Dropping the last reference without answering sends a 500 (nothing sent yet) or
// aborts the connection (stream started but not ended: the client sees a truncated
// chunked body rather than a falsely complete one).
//
// Thread safety: every method may be called from any thread, concurrently. Callbacks
// registered with OnClose run on an I/O thread (or on the caller's thread when the
// connection is already closed); they must not block.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "net/http_headers.h"

namespace tandem::net {

class HttpResponseWriter {
 public:
  virtual ~HttpResponseWriter() = default;

  // Sends a complete response. Adds Content-Length; adds "Content-Type:
  // application/json" when `headers` has no Content-Type. Returns false (and sends
  // nothing) if a response was already started or the connection is closed.
  virtual bool SendResponse(int status, const HttpHeaders& headers, std::string body) = 0;

  // Starts a streamed response. Adds "Content-Type: text/event-stream" and
  // "Cache-Control: no-cache" unless given. Returns false if a response was already
  // started or the connection is closed.
  virtual bool StartStream(int status, const HttpHeaders& headers) = 0;

  // Queues `chunk` (sent as one HTTP chunk; empty chunks are ignored and return true).
  // Returns false once the client is gone or the stream was not started / already
  // ended; false means "stop producing for this request".
  virtual bool Write(std::string chunk) = 0;

  // Ends a streamed response (sends the terminating chunk). Returns false if no stream
  // is open or the connection is closed. The connection is reused afterwards if the
  // client asked for keep-alive.
  virtual bool End() = 0;

  // Registers the disconnect callback (replaces an earlier one). If the connection is
  // already closed and the response incomplete, `callback` runs now on this thread.
  // It never runs after the response was completely queued (SendResponse or End).
  virtual void OnClose(std::function<void()> callback) = 0;

  // True once the connection is gone (further writes are discarded).
  virtual bool IsClosed() const = 0;

  // Bytes queued for this connection and not yet written to the socket.
  virtual size_t QueuedBytes() const = 0;
};

// Sends `json` with Content-Type application/json.
bool SendJson(HttpResponseWriter& writer, int status, std::string json);

// Sends an OpenAI-style error (see openai_error.h) with the given HTTP status.
bool SendError(HttpResponseWriter& writer, int status, std::string_view message,
               std::string_view type = {}, std::string_view param = {});

}  // namespace tandem::net
