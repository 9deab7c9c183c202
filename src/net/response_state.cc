#include "net/response_state.h"

#include <cstdio>
#include <utility>

#include <boost/asio/post.hpp>

#include "common/logging.h"
#include "net/openai_error.h"

namespace tandem::net::internal {
namespace {

// Header names and values must not smuggle line breaks into the response.
bool IsSafeHeaderText(std::string_view s) {
  return s.find_first_of("\r\n") == std::string_view::npos;
}

// Headers the server computes itself; handler-supplied copies are dropped.
bool IsFramingHeader(std::string_view name) {
  return EqualsIgnoreCase(name, "Content-Length") || EqualsIgnoreCase(name, "Transfer-Encoding") ||
         EqualsIgnoreCase(name, "Connection");
}

std::string ChunkPrefix(size_t size) {
  char buf[24];
  int n = std::snprintf(buf, sizeof(buf), "%zx\r\n", size);
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

ResponseState::ResponseState(std::shared_ptr<asio::io_context> io, asio::any_io_executor strand,
                             std::weak_ptr<ServerConnection> connection, uint64_t response_id,
                             int http_version, bool keep_alive, size_t max_queued_bytes)
    : io_(std::move(io)),
      strand_(std::move(strand)),
      connection_(std::move(connection)),
      response_id_(response_id),
      http_version_(http_version),
      max_queued_bytes_(max_queued_bytes),
      keep_alive_(keep_alive) {}

std::string ResponseState::FormatHead(int status, const HttpHeaders& headers,
                                      bool streamed) const {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " ";
  head += HttpReasonPhrase(status);
  head += "\r\n";
  for (const auto& [name, value] : headers) {
    if (IsFramingHeader(name)) continue;
    if (!IsSafeHeaderText(name) || !IsSafeHeaderText(value)) {
      TANDEM_LOG(WARNING) << "dropping response header with a line break: " << name;
      continue;
    }
    head += name;
    head += ": ";
    head += value;
    head += "\r\n";
  }
  if (streamed && http_version_ >= 11) head += "Transfer-Encoding: chunked\r\n";
  if (!keep_alive_) {
    head += "Connection: close\r\n";
  } else if (http_version_ < 11) {
    head += "Connection: keep-alive\r\n";
  }
  return head;  // the caller ends it with Content-Length (if any) and the blank line
}

void ResponseState::PostLocked(std::string bytes, ServerConnection::Delivery kind) {
  queued_bytes_ += bytes.size();
  asio::post(strand_, [connection = connection_, id = response_id_, bytes = std::move(bytes),
                       kind]() mutable {
    if (auto c = connection.lock()) c->Deliver(id, std::move(bytes), kind);
  });
}

bool ResponseState::SendResponse(int status, const HttpHeaders& headers, std::string body) {
  std::function<void()> released;
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || started_) return false;
  started_ = finished_ = true;
  HttpHeaders with_type = headers;
  if (!with_type.Has("Content-Type")) with_type.Add("Content-Type", "application/json");
  std::string bytes = FormatHead(status, with_type, /*streamed=*/false);
  bytes += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  bytes += body;
  PostLocked(std::move(bytes), ServerConnection::Delivery::kLast);
  released = std::move(on_close_);  // never fires now; drop captured references
  return true;
}

bool ResponseState::StartStream(int status, const HttpHeaders& headers) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || started_) return false;
  started_ = streaming_ = true;
  // HTTP/1.0 has no chunked encoding: the body ends when the connection closes.
  if (http_version_ < 11) keep_alive_ = false;
  HttpHeaders with_defaults = headers;
  if (!with_defaults.Has("Content-Type")) with_defaults.Add("Content-Type", "text/event-stream");
  if (!with_defaults.Has("Cache-Control")) with_defaults.Add("Cache-Control", "no-cache");
  std::string bytes = FormatHead(status, with_defaults, /*streamed=*/true);
  bytes += "\r\n";
  PostLocked(std::move(bytes), ServerConnection::Delivery::kData);
  return true;
}

bool ResponseState::Write(std::string chunk) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || !streaming_ || finished_) return false;
  if (chunk.empty()) return true;  // an empty chunk would end a chunked body
  std::string bytes;
  if (http_version_ >= 11) {
    bytes = ChunkPrefix(chunk.size());
    bytes.reserve(bytes.size() + chunk.size() + 2);
    bytes += chunk;
    bytes += "\r\n";
  } else {
    bytes = std::move(chunk);
  }
  if (queued_bytes_ + bytes.size() > max_queued_bytes_) {
    TANDEM_LOG(WARNING) << "dropping a slow HTTP client: " << queued_bytes_
                        << " bytes queued, limit " << max_queued_bytes_;
    PostLocked(std::string(), ServerConnection::Delivery::kAbort);
    closed_ = true;  // OnClose fires when the connection processes the abort
    return false;
  }
  PostLocked(std::move(bytes), ServerConnection::Delivery::kData);
  return true;
}

bool ResponseState::End() {
  std::function<void()> released;
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || !streaming_ || finished_) return false;
  finished_ = true;
  PostLocked(http_version_ >= 11 ? std::string("0\r\n\r\n") : std::string(),
             ServerConnection::Delivery::kLast);
  released = std::move(on_close_);
  return true;
}

void ResponseState::OnClose(std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (!close_notified_) {
      on_close_ = std::move(callback);
      return;
    }
  }
  if (callback) callback();  // already closed with the response incomplete
}

bool ResponseState::IsClosed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

size_t ResponseState::QueuedBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_bytes_;
}

void ResponseState::WriterDropped() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || finished_) return;
  if (!started_) {
    TANDEM_LOG(ERROR) << "HTTP handler dropped its response writer without answering";
    started_ = finished_ = true;
    std::string body = OpenAiErrorJson(500, "the server dropped the request without an answer");
    std::string bytes = FormatHead(500, {{"Content-Type", "application/json"}}, false);
    bytes += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    PostLocked(std::move(bytes), ServerConnection::Delivery::kLast);
    return;
  }
  // A stream that was never ended: deliver what was written, then close without the
  // terminating chunk, so the client cannot mistake it for complete.
  PostLocked(std::string(), ServerConnection::Delivery::kTruncate);
  closed_ = true;
}

void ResponseState::MarkClosed() {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    if (close_notified_) return;
    close_notified_ = true;
    if (!finished_) callback = std::move(on_close_);
    on_close_ = nullptr;
  }
  if (callback) callback();
}

void ResponseState::BytesWritten(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  queued_bytes_ -= std::min(n, queued_bytes_);
}

void ResponseState::DisableKeepAlive() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) keep_alive_ = false;
}

bool ResponseState::KeepAliveSent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keep_alive_;
}

}  // namespace tandem::net::internal
