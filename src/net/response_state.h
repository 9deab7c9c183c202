// ResponseState: the state of one response shared by the handler's HttpResponseWriter
// (producer side, any thread) and its ServerConnection (I/O side, the strand). Internal
// to tandem_net.
//
// The producer side formats bytes (status line, headers, chunk framing) under `mu_` and
// posts them to the connection's strand in call order; the I/O side writes them and
// reports written bytes back, which bounds the bytes in flight (max_queued_bytes).
//
// Thread safety: all public methods are thread-safe; MarkClosed, BytesWritten and
// DisableKeepAlive are called on the strand.
//
// Lifetime: holds the io_context (shared) so that its strand executor stays valid
// for as long as any writer exists, even after the server is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>

#include "net/http_headers.h"
#include "net/http_response_writer.h"
#include "net/server_connection.h"

namespace tandem::net::internal {

class ResponseState {
 public:
  // Members are declared in this order so that `strand_` dies before `io_`.
  ResponseState(std::shared_ptr<asio::io_context> io, asio::any_io_executor strand,
                std::weak_ptr<ServerConnection> connection, uint64_t response_id,
                int http_version, bool keep_alive, size_t max_queued_bytes);

  // Producer side; see HttpResponseWriter.
  bool SendResponse(int status, const HttpHeaders& headers, std::string body);
  bool StartStream(int status, const HttpHeaders& headers);
  bool Write(std::string chunk);
  bool End();
  void OnClose(std::function<void()> callback);
  bool IsClosed() const;
  size_t QueuedBytes() const;
  // The last writer reference is gone.
  void WriterDropped();

  // I/O side (strand).
  // The connection is gone: later producer calls fail; fires OnClose if incomplete.
  void MarkClosed();
  void BytesWritten(size_t n);
  // Answer "Connection: close" if the head is not formatted yet.
  void DisableKeepAlive();
  // Whether the head that was sent allowed the connection to be reused.
  bool KeepAliveSent() const;

 private:
  std::string FormatHead(int status, const HttpHeaders& headers, bool streamed) const;
  // Preconditions: mu_ held; !closed_.
  void PostLocked(std::string bytes, ServerConnection::Delivery kind);

  std::shared_ptr<asio::io_context> io_;
  asio::any_io_executor strand_;
  std::weak_ptr<ServerConnection> connection_;
  const uint64_t response_id_;
  const int http_version_;
  const size_t max_queued_bytes_;

  mutable std::mutex mu_;
  bool keep_alive_;           // guarded by mu_
  bool started_ = false;      // a head was queued
  bool streaming_ = false;    // StartStream succeeded
  bool finished_ = false;     // the last byte of the response was queued
  bool closed_ = false;       // the connection is gone (or is being dropped)
  bool close_notified_ = false;
  size_t queued_bytes_ = 0;   // posted and not yet written
  std::function<void()> on_close_;
};

// The HttpResponseWriter handed to handlers: forwards to a ResponseState and tells it
// when the last reference is dropped.
class ServerResponseWriter final : public HttpResponseWriter {
 public:
  explicit ServerResponseWriter(std::shared_ptr<ResponseState> state) : state_(std::move(state)) {}
  ~ServerResponseWriter() override { state_->WriterDropped(); }

  bool SendResponse(int status, const HttpHeaders& headers, std::string body) override {
    return state_->SendResponse(status, headers, std::move(body));
  }
  bool StartStream(int status, const HttpHeaders& headers) override {
    return state_->StartStream(status, headers);
  }
  bool Write(std::string chunk) override { return state_->Write(std::move(chunk)); }
  bool End() override { return state_->End(); }
  void OnClose(std::function<void()> callback) override { state_->OnClose(std::move(callback)); }
  bool IsClosed() const override { return state_->IsClosed(); }
  size_t QueuedBytes() const override { return state_->QueuedBytes(); }

 private:
  std::shared_ptr<ResponseState> state_;
};

}  // namespace tandem::net::internal
