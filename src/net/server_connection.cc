#include "net/server_connection.h"

#include <sys/socket.h>

#include <cerrno>
#include <utility>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>

#include "common/logging.h"
#include "net/openai_error.h"
#include "net/request_reader.h"
#include "net/response_state.h"

namespace tandem::net::internal {
namespace {

namespace http = boost::beast::http;
using boost::system::error_code;
constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);

// Lingering close: after answering an error we keep reading (and discarding) for a
// while, so a client still sending its body sees our answer instead of a TCP reset.
constexpr std::chrono::milliseconds kLingerTotal{3000};
constexpr std::chrono::milliseconds kLingerQuiet{1000};

std::string FormatEndpoint(const tcp::socket& socket) {
  error_code ec;
  tcp::endpoint ep = socket.remote_endpoint(ec);
  if (ec) return "unknown";
  std::string addr = ep.address().to_string();
  if (ep.address().is_v6()) addr = "[" + addr + "]";
  return addr + ":" + std::to_string(ep.port());
}

std::string ErrorResponseBytes(int status, std::string_view json_body) {
  std::string bytes = "HTTP/1.1 " + std::to_string(status) + " ";
  bytes += HttpReasonPhrase(status);
  bytes += "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ";
  bytes += std::to_string(json_body.size());
  bytes += "\r\n\r\n";
  bytes += json_body;
  return bytes;
}

// Writes `bytes`, half-closes, discards what the peer still sends (bounded), closes.
asio::awaitable<void> AnswerAndLinger(tcp::socket& socket, std::string bytes) {
  asio::steady_timer guard(socket.get_executor());
  guard.expires_after(kLingerTotal);
  guard.async_wait([&socket](error_code ec) {
    if (!ec) socket.close(ec);
  });
  auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(bytes), kAwait);
  if (!wec) {
    error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    asio::steady_timer quiet(socket.get_executor());
    char sink[16384];
    for (;;) {
      quiet.expires_after(kLingerQuiet);
      quiet.async_wait([&socket](error_code ec) {
        if (!ec) socket.cancel(ec);
      });
      auto [rec, rn] = co_await socket.async_read_some(asio::buffer(sink), kAwait);
      quiet.cancel();
      if (rec) break;
    }
  }
  error_code ec;
  socket.close(ec);
  guard.cancel();
}

// A small self-owning coroutine for connections refused at accept time.
asio::awaitable<void> RejectRun(tcp::socket socket, std::string bytes) {
  co_await AnswerAndLinger(socket, std::move(bytes));
}

}  // namespace

void RejectConnection(tcp::socket socket, std::string json_body) {
  auto ex = socket.get_executor();
  asio::co_spawn(ex, RejectRun(std::move(socket), ErrorResponseBytes(503, json_body)),
                 asio::detached);
}

ServerConnection::ServerConnection(tcp::socket socket, std::weak_ptr<asio::io_context> io,
                                   ConnectionHost* host)
    : socket_(std::move(socket)),
      io_(std::move(io)),
      host_(host),
      options_(host->options()),
      remote_address_(FormatEndpoint(socket_)),
      deadline_(socket_.get_executor()),
      wake_(socket_.get_executor()) {}

ServerConnection::~ServerConnection() {
  // Normally Run() already closed; this covers frames destroyed with the io_context.
  if (current_) current_->MarkClosed();
}

void ServerConnection::Start() {
  auto ex = socket_.get_executor();
  asio::co_spawn(ex, Run(shared_from_this()), [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      TANDEM_LOG(ERROR) << "HTTP connection failed: " << ex.what();
    } catch (...) {
      TANDEM_LOG(ERROR) << "HTTP connection failed with an unknown exception";
    }
  });
}

void ServerConnection::BeginDrain() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->draining_ = true;
    if (self->current_) self->current_->DisableKeepAlive();
    if (self->phase_ == Phase::kIdle) self->Close();
  });
}

void ServerConnection::ForceClose() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Close(); });
}

void ServerConnection::Close() {
  if (closed_) return;
  closed_ = true;
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  deadline_.cancel();
  wake_.cancel();
  if (current_) current_->MarkClosed();
}

void ServerConnection::ArmDeadline(std::chrono::milliseconds timeout) {
  deadline_.expires_after(timeout);
  deadline_.async_wait([self = shared_from_this()](error_code ec) {
    // A re-armed or disarmed timer may still deliver an earlier expiry: trust only
    // the current expiry time.
    if (ec || self->deadline_.expiry() > asio::steady_timer::clock_type::now()) return;
    self->timed_out_ = true;
    self->Close();
  });
}

void ServerConnection::DisarmDeadline() {
  deadline_.expires_at(asio::steady_timer::time_point::max());
}

asio::awaitable<void> ServerConnection::Run(std::shared_ptr<ServerConnection> self) {
  try {
    co_await Serve();
  } catch (const std::exception& e) {
    TANDEM_LOG(ERROR) << "HTTP connection " << remote_address_ << " failed: " << e.what();
  }
  Close();
  current_.reset();
  host_->ConnectionDone(this);
}

asio::awaitable<void> ServerConnection::Serve() {
  while (!closed_) {
    if (buffer_.size() == 0) {
      phase_ = Phase::kIdle;
      if (draining_) co_return;
      ArmDeadline(options_.idle_timeout);
      auto [ec] = co_await socket_.async_wait(tcp::socket::wait_read, kAwait);
      if (ec || closed_) co_return;
    }
    phase_ = Phase::kReading;
    HttpRequest request;
    bool keep_alive = false;
    int error_status = 0;
    std::string error_message;
    ArmDeadline(options_.read_timeout);
    bool ok = co_await ReadRequest(&request, &keep_alive, &error_status, &error_message);
    DisarmDeadline();
    if (closed_) co_return;
    if (!ok) {
      if (error_status != 0) co_await SendErrorAndClose(error_status, std::move(error_message));
      co_return;
    }
    if (!co_await Respond(std::move(request), keep_alive && !draining_)) co_return;
  }
}

asio::awaitable<bool> ServerConnection::ReadRequest(HttpRequest* request, bool* keep_alive,
                                                    int* error_status,
                                                    std::string* error_message) {
  RequestParser parser;
  ApplyRequestLimits(options_, &parser);
  auto [ec, n] = co_await http::async_read_header(socket_, buffer_, parser, kAwait);
  if (!ec && !parser.is_done()) {
    if (WantsContinue(parser)) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      auto [wec, wn] = co_await asio::async_write(socket_, asio::buffer(kContinue), kAwait);
      ec = wec;
    }
    if (!ec) std::tie(ec, n) = co_await http::async_read(socket_, buffer_, parser, kAwait);
  }
  if (ec) {
    ReadFailure failure = ClassifyReadError(ec, options_);
    *error_status = failure.status;
    *error_message = std::move(failure.message);
    co_return false;
  }
  *request = TakeRequest(parser, keep_alive);
  request->remote_address = remote_address_;
  co_return true;
}

asio::awaitable<bool> ServerConnection::Respond(HttpRequest request, bool keep_alive) {
  phase_ = Phase::kResponding;
  ++response_id_;
  out_.clear();
  response_complete_ = false;
  truncate_ = false;
  current_ = std::make_shared<ResponseState>(io_.lock(), socket_.get_executor(), weak_from_this(),
                                             response_id_, request.version, keep_alive,
                                             options_.max_queued_bytes);
  StartWatch();
  host_->Dispatch(std::move(request), std::make_shared<ServerResponseWriter>(current_));
  bool ok = co_await WriteQueued();
  StopWatch();
  bool keep_going = ok && !closed_ && !draining_ && current_->KeepAliveSent();
  current_.reset();
  co_return keep_going;
}

void ServerConnection::Deliver(uint64_t response_id, std::string bytes, Delivery kind) {
  if (response_id != response_id_ || !current_ || closed_) return;
  if (kind == Delivery::kAbort) {
    Close();
    return;
  }
  if (!bytes.empty()) out_.push_back(std::move(bytes));
  if (kind == Delivery::kLast) response_complete_ = true;
  if (kind == Delivery::kTruncate) truncate_ = true;
  wake_.cancel();
}

asio::awaitable<bool> ServerConnection::WriteQueued() {
  std::vector<std::string> batch;
  std::vector<asio::const_buffer> buffers;
  for (;;) {
    if (closed_) co_return false;
    if (!out_.empty()) {
      batch.assign(std::make_move_iterator(out_.begin()), std::make_move_iterator(out_.end()));
      out_.clear();
      buffers.clear();
      size_t total = 0;
      for (const std::string& b : batch) {
        buffers.emplace_back(asio::buffer(b));
        total += b.size();
      }
      ArmDeadline(options_.write_timeout);
      auto [ec, n] = co_await asio::async_write(socket_, buffers, kAwait);
      DisarmDeadline();
      if (current_) current_->BytesWritten(total);
      if (ec) {
        Close();
        co_return false;
      }
      continue;
    }
    if (response_complete_) co_return true;
    if (truncate_) {
      Close();
      co_return false;
    }
    wake_.expires_at(asio::steady_timer::time_point::max());
    co_await wake_.async_wait(kAwait);
  }
}

void ServerConnection::StartWatch() {
  if (watch_pending_ || closed_) return;
  watch_pending_ = true;
  socket_.async_wait(tcp::socket::wait_read,
                     [self = shared_from_this(), generation = watch_generation_](error_code ec) {
                       self->OnWatchReady(generation, ec);
                     });
}

void ServerConnection::StopWatch() {
  ++watch_generation_;
  if (watch_pending_ && !closed_) {
    error_code ec;
    socket_.cancel(ec);  // nothing else is pending on the socket between responses
  }
}

void ServerConnection::OnWatchReady(uint64_t generation, error_code ec) {
  if (generation != watch_generation_) return;  // a watch of an earlier response
  watch_pending_ = false;
  if (closed_ || ec == asio::error::operation_aborted) return;
  if (ec) {
    Close();
    return;
  }
  char byte;
  ssize_t n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    Close();  // the client closed or reset the connection
    return;
  }
  if (n < 0) {
    StartWatch();  // spurious readiness
    return;
  }
  // n > 0: the client already sent the next request; it stays unread for the parser.
}

asio::awaitable<void> ServerConnection::SendErrorAndClose(int status, std::string message) {
  TANDEM_LOG(WARNING) << "HTTP " << status << " to " << remote_address_ << ": " << message;
  phase_ = Phase::kResponding;
  co_await AnswerAndLinger(socket_, ErrorResponseBytes(status, OpenAiErrorJson(status, message)));
  Close();
}

}  // namespace tandem::net::internal
