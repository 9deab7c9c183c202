#include "net/http_server.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/logging.h"
#include "net/openai_error.h"
#include "net/server_connection.h"

namespace tandem::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

class HttpServer::Impl final : public internal::ConnectionHost {
 public:
  explicit Impl(HttpServerOptions options) : options_(std::move(options)) {
    if (options_.io_threads < 1) options_.io_threads = 1;
  }
  ~Impl() override { Stop(); }

  void Route(std::string method, std::string path, HttpHandler handler) {
    TANDEM_CHECK(!started_) << "HttpServer::Route after Start";
    routes_[std::move(path)][std::move(method)] = std::move(handler);
  }

  Status Start();
  void Stop();
  uint16_t port() const { return port_; }
  size_t num_connections() const {
    std::lock_guard<std::mutex> lock(mu_);
    return connections_.size();
  }

  // ConnectionHost:
  const HttpServerOptions& options() const override { return options_; }
  void Dispatch(HttpRequest request, std::shared_ptr<HttpResponseWriter> writer) override;
  void ConnectionDone(const void* connection) override {
    std::lock_guard<std::mutex> lock(mu_);
    connections_.erase(connection);
    cv_.notify_all();
  }

 private:
  asio::awaitable<void> AcceptLoop();
  std::vector<std::shared_ptr<internal::ServerConnection>> SnapshotConnections();
  // Waits until no connection is left or `timeout` passed; returns whether none is left.
  bool WaitForConnections(std::chrono::milliseconds timeout);

  HttpServerOptions options_;
  // path -> method -> handler; immutable once started.
  std::unordered_map<std::string, std::map<std::string, HttpHandler>> routes_;

  // Declared first so that it outlives the I/O objects below.
  std::shared_ptr<asio::io_context> io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::optional<asio::strand<asio::io_context::executor_type>> accept_strand_;
  std::optional<tcp::acceptor> acceptor_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool started_ = false;
  bool stopped_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool accept_loop_done_ = false;  // guarded by mu_
  std::unordered_map<const void*, std::weak_ptr<internal::ServerConnection>> connections_;
};

Status HttpServer::Impl::Start() {
  if (started_) return FailedPreconditionError("HttpServer already started");
  io_ = std::make_shared<asio::io_context>(options_.io_threads);
  error_code ec;
  tcp::resolver resolver(*io_);
  auto results = resolver.resolve(options_.host, std::to_string(options_.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return InvalidArgumentError("cannot resolve bind address '" + options_.host +
                                "': " + ec.message());
  }
  tcp::endpoint endpoint = results.begin()->endpoint();
  acceptor_.emplace(*io_);
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor_.reset();
    return UnavailableError("cannot listen on " + options_.host + ":" +
                            std::to_string(options_.port) + ": " + ec.message());
  }
  port_ = acceptor_->local_endpoint().port();
  started_ = true;
  work_.emplace(io_->get_executor());
  accept_strand_.emplace(io_->get_executor());
  asio::co_spawn(*accept_strand_, AcceptLoop(), [this](std::exception_ptr e) {
    if (e) TANDEM_LOG(ERROR) << "HTTP accept loop ended with an exception";
    std::lock_guard<std::mutex> lock(mu_);
    accept_loop_done_ = true;
    cv_.notify_all();
  });
  for (int i = 0; i < options_.io_threads; ++i) {
    threads_.emplace_back([io = io_] {
      for (;;) {
        try {
          io->run();
          return;
        } catch (const std::exception& e) {
          TANDEM_LOG(ERROR) << "exception escaped an HTTP I/O handler: " << e.what();
        }
      }
    });
  }
  TANDEM_LOG(INFO) << "HTTP server listening on " << options_.host << ":" << port_ << " ("
                   << options_.io_threads << " I/O threads)";
  return Status::Ok();
}

asio::awaitable<void> HttpServer::Impl::AcceptLoop() {
  for (;;) {
    tcp::socket socket(asio::make_strand(*io_));
    auto [ec] = co_await acceptor_->async_accept(socket, asio::as_tuple(asio::use_awaitable));
    if (!acceptor_->is_open()) co_return;
    if (ec) {
      // Out of descriptors (EMFILE/ENFILE) and the like: back off instead of spinning.
      TANDEM_LOG(WARNING) << "HTTP accept failed: " << ec.message();
      asio::steady_timer pause(*accept_strand_, std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    std::shared_ptr<internal::ServerConnection> connection;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (connections_.size() < options_.max_connections) {
        connection = std::make_shared<internal::ServerConnection>(std::move(socket), io_, this);
        connections_.emplace(connection.get(), connection);
      }
    }
    if (!connection) {
      TANDEM_LOG(WARNING) << "HTTP connection limit " << options_.max_connections
                          << " reached; answering 503";
      internal::RejectConnection(
          std::move(socket), OpenAiErrorJson(503, "too many connections; retry later"));
      continue;
    }
    connection->Start();
  }
}

void HttpServer::Impl::Dispatch(HttpRequest request, std::shared_ptr<HttpResponseWriter> writer) {
  auto path_it = routes_.find(std::string(request.path()));
  if (path_it == routes_.end()) {
    SendError(*writer, 404, "no route for " + std::string(request.path()));
    return;
  }
  auto method_it = path_it->second.find(request.method);
  if (method_it == path_it->second.end()) {
    std::string allow;
    for (const auto& [method, handler] : path_it->second) {
      if (!allow.empty()) allow += ", ";
      allow += method;
    }
    std::string message = "method " + request.method + " not allowed for " +
                           std::string(request.path()) + "; allowed: " + allow;
    writer->SendResponse(405, {{"Content-Type", "application/json"}, {"Allow", allow}},
                         OpenAiErrorJson(405, message));
    return;
  }
  try {
    method_it->second(std::move(request), writer);
  } catch (const std::exception& e) {
    TANDEM_LOG(ERROR) << "HTTP handler threw: " << e.what();
    SendError(*writer, 500, std::string("internal error: ") + e.what());
  } catch (...) {
    TANDEM_LOG(ERROR) << "HTTP handler threw an unknown exception";
    SendError(*writer, 500, "internal error");
  }
}

std::vector<std::shared_ptr<internal::ServerConnection>>
HttpServer::Impl::SnapshotConnections() {
  std::vector<std::shared_ptr<internal::ServerConnection>> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, weak] : connections_) {
    if (auto c = weak.lock()) out.push_back(std::move(c));
  }
  return out;
}

bool HttpServer::Impl::WaitForConnections(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return connections_.empty() && accept_loop_done_; });
}

void HttpServer::Impl::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  asio::post(*accept_strand_, [this] {
    error_code ec;
    acceptor_->close(ec);
  });
  for (auto& c : SnapshotConnections()) c->BeginDrain();
  if (!WaitForConnections(options_.stop_grace)) {
    auto remaining = SnapshotConnections();
    TANDEM_LOG(INFO) << "HTTP server stop: closing " << remaining.size()
                     << " connections still busy after the grace period";
    for (auto& c : remaining) c->ForceClose();
    remaining.clear();
    if (!WaitForConnections(std::chrono::milliseconds(1000))) {
      TANDEM_LOG(WARNING) << "HTTP server stop: connections did not finish closing";
    }
  }
  work_.reset();
  io_->stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  acceptor_.reset();
  accept_strand_.reset();
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpServer::~HttpServer() = default;

void HttpServer::Route(std::string method, std::string path, HttpHandler handler) {
  impl_->Route(std::move(method), std::move(path), std::move(handler));
}
Status HttpServer::Start() { return impl_->Start(); }
void HttpServer::Stop() { impl_->Stop(); }
uint16_t HttpServer::port() const { return impl_->port(); }
size_t HttpServer::num_connections() const { return impl_->num_connections(); }

}  // namespace tandem::net
