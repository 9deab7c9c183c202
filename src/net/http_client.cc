#include "net/http_client.h"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include "common/logging.h"
#include "net/url.h"

namespace tandem::net {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);
// The client whose I/O thread this is (to refuse a blocking Fetch that would deadlock).
thread_local const void* tls_client_core = nullptr;
using Strand = asio::strand<asio::io_context::executor_type>;

bool HasLineBreak(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

StatusOr<std::string> FormatRequest(const HttpClientRequest& r) {
  if (r.method.empty() || r.method.find_first_of(" \r\n") != std::string::npos ||
      r.target.empty() || r.target.find_first_of(" \r\n") != std::string::npos) {
    return InvalidArgumentError("bad HTTP method or target: '" + r.method + " " + r.target + "'");
  }
  std::string out = r.method + " " + r.target + " HTTP/1.1\r\n";
  if (!r.headers.Has("Host")) {
    std::string host = r.host.find(':') != std::string::npos ? "[" + r.host + "]" : r.host;
    out += "Host: " + host + ":" + std::to_string(r.port) + "\r\n";
  }
  for (const auto& [name, value] : r.headers) {
    if (HasLineBreak(name) || HasLineBreak(value)) {
      return InvalidArgumentError("HTTP header with a line break: " + name);
    }
    if (EqualsIgnoreCase(name, "Content-Length") || EqualsIgnoreCase(name, "Transfer-Encoding")) {
      continue;  // framing is ours
    }
    out += name + ": " + value + "\r\n";
  }
  if (!r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH") {
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  }
  out += "\r\n";
  out += r.body;
  return out;
}

// Whether a pooled socket still looks usable: no EOF, no error, no unexpected bytes.
bool IdleSocketAlive(tcp::socket& socket) {
  char byte;
  ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

StatusOr<HttpClientRequest> HttpClientRequest::FromUrl(std::string method, std::string_view url) {
  TANDEM_ASSIGN_OR_RETURN(HttpUrl parsed, ParseHttpUrl(url));
  HttpClientRequest r;
  r.method = std::move(method);
  r.host = std::move(parsed.host);
  r.port = parsed.port;
  r.target = std::move(parsed.target);
  return r;
}

// The shared part of a client: io_context, threads, connection pool and the registry of
// exchanges in flight. Exchanges hold it (shared) so that their I/O objects never
// outlive the io_context, whatever the order in which handles are dropped.
class HttpClient::Core : public std::enable_shared_from_this<HttpClient::Core> {
 public:
  class Exchange;

  explicit Core(HttpClientOptions options);
  void StartThreads();
  // Cancels every exchange, waits (bounded) for them, stops and joins the threads.
  void Shutdown();

  std::shared_ptr<Exchange> Launch(HttpClientRequest request, HttpStreamCallbacks callbacks,
                                   size_t max_body_bytes);

  // Pool.
  std::optional<tcp::socket> TakeIdle(const std::string& key, const Strand& strand);
  void ReturnIdle(const std::string& key, tcp::socket socket);

  void ExchangeDone(const void* exchange);
  const HttpClientOptions& options() const { return options_; }
  asio::io_context& io() { return io_; }

 private:
  struct IdleConnection {
    tcp::socket socket;
    Clock::time_point since;
  };

  HttpClientOptions options_;
  asio::io_context io_;  // declared before every I/O object of the core
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool shut_down_ = false;
  std::unordered_map<const void*, std::weak_ptr<Exchange>> exchanges_;
  std::unordered_map<std::string, std::vector<IdleConnection>> idle_;
};

// One request/response on its own strand.
class HttpClient::Core::Exchange final : public HttpClientStream,
                                         public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<Core> core, HttpClientRequest request, HttpStreamCallbacks callbacks,
           size_t max_body_bytes)
      : core_(std::move(core)),
        strand_(asio::make_strand(core_->io())),
        request_(std::move(request)),
        callbacks_(std::move(callbacks)),
        max_body_bytes_(max_body_bytes),
        key_(request_.host + ":" + std::to_string(request_.port)),
        socket_(strand_),
        resolver_(strand_),
        timer_(strand_) {}

  void Start() {
    asio::co_spawn(strand_, Run(shared_from_this()), [](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        TANDEM_LOG(ERROR) << "HTTP client exchange ended with an exception: " << ex.what();
      } catch (...) {
        TANDEM_LOG(ERROR) << "HTTP client exchange ended with an unknown exception";
      }
    });
  }

  void Cancel() override {
    // After the end (maybe after the client is gone) there is nothing to cancel, and the
    // io_context may no longer run handlers.
    if (finished_.load(std::memory_order_acquire)) return;
    asio::post(strand_, [self = shared_from_this()] {
      if (self->done_) return;
      self->cancelled_ = true;
      self->AbortIo();
    });
  }

 private:
  // `self` keeps the exchange alive for as long as the coroutine runs.
  asio::awaitable<void> Run(std::shared_ptr<Exchange> self) {
    Status status;
    try {
      status = co_await Perform();
    } catch (const std::exception& e) {
      status = InternalError(std::string("HTTP client: ") + e.what());
    }
    if (!status.ok()) AbortIo();
    timer_.cancel();
    done_ = true;
    HttpStreamCallbacks callbacks = std::move(callbacks_);
    if (callbacks.on_done) callbacks.on_done(std::move(status));
    finished_.store(true, std::memory_order_release);
    core_->ExchangeDone(this);
  }

  void AbortIo() {
    error_code ec;
    resolver_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  // Arms the timer for the nearer of the total deadline and the idle deadline.
  void ArmTimer() {
    Clock::time_point expiry = Clock::time_point::max();
    if (request_.timeout.count() > 0) expiry = start_ + request_.timeout;
    if (request_.idle_timeout.count() > 0) {
      expiry = std::min(expiry, Clock::now() + request_.idle_timeout);
    }
    timer_.expires_at(expiry);
    if (expiry == Clock::time_point::max()) return;
    timer_.async_wait([weak = weak_from_this()](error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->timer_.expiry() > Clock::now()) return;
      self->timed_out_ = true;
      self->AbortIo();
    });
  }

  Status ErrorStatus(std::string_view what, const error_code& ec) const {
    if (cancelled_) return CancelledError("HTTP request cancelled");
    std::string where = request_.method + " http://" + key_ + request_.target;
    if (timed_out_) {
      return DeadlineExceededError(where + ": timed out while " + std::string(what));
    }
    return UnavailableError(where + ": " + std::string(what) + ": " + ec.message());
  }

  asio::awaitable<Status> Perform();
  asio::awaitable<Status> Connect();

  std::shared_ptr<Core> core_;  // first: outlives the I/O objects below
  Strand strand_;
  HttpClientRequest request_;
  HttpStreamCallbacks callbacks_;
  const size_t max_body_bytes_;  // 0 = unbounded
  const std::string key_;        // pool key "host:port"
  tcp::socket socket_;
  tcp::resolver resolver_;
  asio::steady_timer timer_;
  boost::beast::flat_buffer buffer_;
  Clock::time_point start_ = Clock::now();
  bool cancelled_ = false;
  bool timed_out_ = false;
  bool done_ = false;
  bool sent_reported_ = false;  // on_sent has run
  std::atomic<bool> finished_{false};  // Run() has completed
};

asio::awaitable<Status> HttpClient::Core::Exchange::Connect() {
  auto [rec, endpoints] =
      co_await resolver_.async_resolve(request_.host, std::to_string(request_.port), kAwait);
  if (rec) co_return ErrorStatus("resolving " + request_.host, rec);
  if (cancelled_ || timed_out_) co_return ErrorStatus("resolving", asio::error::operation_aborted);
  auto [cec, endpoint] = co_await asio::async_connect(socket_, endpoints, kAwait);
  if (cec) co_return ErrorStatus("connecting", cec);
  error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);
  co_return Status::Ok();
}

asio::awaitable<Status> HttpClient::Core::Exchange::Perform() {
  StatusOr<std::string> wire = FormatRequest(request_);
  if (!wire.ok()) co_return wire.status();
  ArmTimer();
  std::optional<http::response_parser<http::buffer_body>> parser;
  // Attempt 0 may use a pooled connection; if that one turns out dead before any
  // response byte, attempt 1 uses a fresh connection.
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    if (attempt == 0) {
      if (std::optional<tcp::socket> pooled = core_->TakeIdle(key_, strand_)) {
        socket_ = std::move(*pooled);
        reused = true;
      }
    }
    if (!reused) {
      Status connected = co_await Connect();
      if (!connected.ok()) co_return connected;
    }
    auto [wec, wn] = co_await asio::async_write(socket_, asio::buffer(*wire), kAwait);
    error_code ec = wec;
    // on_sent runs once the server may have the request: its response head arrived, or
    // the request was written and the exchange fails without the retry below (which
    // treats a dead pooled connection as "never sent").
    auto report_sent = [this] {
      if (sent_reported_) return;
      sent_reported_ = true;
      if (callbacks_.on_sent) callbacks_.on_sent();
    };
    if (!ec) {
      parser.emplace();
      parser->header_limit(static_cast<uint32_t>(core_->options().max_response_header_bytes));
      parser->body_limit(boost::none);
      if (request_.method == "HEAD") parser->skip(true);
      buffer_.clear();
      auto [hec, hn] = co_await http::async_read_header(socket_, buffer_, *parser, kAwait);
      ec = hec;
    }
    if (!ec) {
      report_sent();
      break;
    }
    bool nothing_received = !parser || !parser->got_some();
    if (reused && nothing_received && !cancelled_ && !timed_out_) {
      error_code ignored;
      socket_.close(ignored);
      continue;
    }
    if (!wec) report_sent();
    co_return ErrorStatus("sending the request or reading the response head", ec);
  }

  auto& message = parser->get();
  if (callbacks_.on_headers) {
    HttpHeaders headers;
    for (const auto& field : message) {
      headers.Add(std::string(field.name_string()), std::string(field.value()));
    }
    callbacks_.on_headers(static_cast<int>(message.result_int()), headers);
  }
  size_t body_bytes = 0;
  char chunk[16384];
  while (!parser->is_done()) {
    if (cancelled_) co_return ErrorStatus("reading", asio::error::operation_aborted);
    message.body().data = chunk;
    message.body().size = sizeof(chunk);
    ArmTimer();  // restarts the idle deadline
    auto [ec, n] = co_await http::async_read_some(socket_, buffer_, *parser, kAwait);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return ErrorStatus("reading the response body", ec);
    size_t got = sizeof(chunk) - message.body().size;
    body_bytes += got;
    if (max_body_bytes_ != 0 && body_bytes > max_body_bytes_) {
      co_return ResourceExhaustedError("HTTP response body exceeds " +
                                       std::to_string(max_body_bytes_) + " bytes");
    }
    if (got > 0 && callbacks_.on_data) callbacks_.on_data(std::string_view(chunk, got));
  }
  if (cancelled_) co_return ErrorStatus("reading", asio::error::operation_aborted);
  timer_.cancel();
  if (message.keep_alive() && !message.need_eof() && buffer_.size() == 0 && socket_.is_open()) {
    core_->ReturnIdle(key_, std::move(socket_));
  }
  co_return Status::Ok();
}

HttpClient::Core::Core(HttpClientOptions options)
    : options_(std::move(options)), io_(std::max(1, options_.io_threads)) {}

void HttpClient::Core::StartThreads() {
  work_.emplace(io_.get_executor());
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
    threads_.emplace_back([this] {
      tls_client_core = this;
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          TANDEM_LOG(ERROR) << "exception escaped an HTTP client handler: " << e.what();
        }
      }
    });
  }
}

std::shared_ptr<HttpClient::Core::Exchange> HttpClient::Core::Launch(
    HttpClientRequest request, HttpStreamCallbacks callbacks, size_t max_body_bytes) {
  auto exchange = std::make_shared<Exchange>(shared_from_this(), std::move(request),
                                             std::move(callbacks), max_body_bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    TANDEM_CHECK(!shut_down_) << "HttpClient used after destruction began";
    exchanges_.emplace(exchange.get(), exchange);
  }
  exchange->Start();
  return exchange;
}

void HttpClient::Core::ExchangeDone(const void* exchange) {
  std::lock_guard<std::mutex> lock(mu_);
  exchanges_.erase(exchange);
  cv_.notify_all();
}

std::optional<tcp::socket> HttpClient::Core::TakeIdle(const std::string& key,
                                                      const Strand& strand) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = idle_.find(key);
  if (it == idle_.end()) return std::nullopt;
  std::vector<IdleConnection>& list = it->second;
  while (!list.empty()) {
    IdleConnection c = std::move(list.back());
    list.pop_back();
    if (Clock::now() - c.since > options_.idle_connection_ttl || !IdleSocketAlive(c.socket)) {
      continue;  // destroyed (closed) here
    }
    // Re-home the descriptor on the new exchange's strand.
    error_code ec;
    tcp::endpoint local = c.socket.local_endpoint(ec);
    if (ec) continue;
    tcp::socket moved(strand, local.protocol(), c.socket.release(ec));
    if (ec) continue;
    return moved;
  }
  return std::nullopt;
}

void HttpClient::Core::ReturnIdle(const std::string& key, tcp::socket socket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  std::vector<IdleConnection>& list = idle_[key];
  if (list.size() >= options_.max_idle_connections_per_host) return;
  error_code ec;
  tcp::endpoint local = socket.local_endpoint(ec);
  if (ec) return;
  tcp::socket pooled(io_, local.protocol(), socket.release(ec));
  if (ec) return;
  list.push_back({std::move(pooled), Clock::now()});
}

void HttpClient::Core::Shutdown() {
  std::vector<std::shared_ptr<Exchange>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    idle_.clear();
    for (const auto& [key, weak] : exchanges_) {
      if (auto e = weak.lock()) live.push_back(std::move(e));
    }
  }
  for (auto& e : live) e->Cancel();
  live.clear();
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(2), [&] { return exchanges_.empty(); })) {
      TANDEM_LOG(WARNING) << "HttpClient: " << exchanges_.size()
                          << " requests did not finish cancelling";
    }
  }
  work_.reset();
  io_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

HttpClient::HttpClient(HttpClientOptions options)
    : core_(std::make_shared<Core>(std::move(options))) {
  core_->StartThreads();
}

HttpClient::~HttpClient() { core_->Shutdown(); }

std::shared_ptr<HttpClientStream> HttpClient::Stream(HttpClientRequest request,
                                                     HttpStreamCallbacks callbacks) {
  return core_->Launch(std::move(request), std::move(callbacks), /*max_body_bytes=*/0);
}

std::shared_ptr<HttpClientStream> HttpClient::FetchAsync(
    HttpClientRequest request, std::function<void(StatusOr<HttpResponse> response)> done) {
  auto response = std::make_shared<HttpResponse>();
  HttpStreamCallbacks callbacks;
  callbacks.on_headers = [response](int status, const HttpHeaders& headers) {
    response->status = status;
    response->headers = headers;
  };
  callbacks.on_data = [response](std::string_view bytes) { response->body.append(bytes); };
  callbacks.on_done = [response, done = std::move(done)](Status status) {
    if (!status.ok()) {
      done(status);
    } else {
      done(std::move(*response));
    }
  };
  return core_->Launch(std::move(request), std::move(callbacks),
                       core_->options().max_response_body_bytes);
}

StatusOr<HttpResponse> HttpClient::Fetch(HttpClientRequest request) {
  if (tls_client_core == core_.get()) {
    return FailedPreconditionError("blocking HttpClient::Fetch on the client's own I/O thread");
  }
  std::promise<StatusOr<HttpResponse>> promise;
  std::future<StatusOr<HttpResponse>> future = promise.get_future();
  FetchAsync(std::move(request),
             [&promise](StatusOr<HttpResponse> response) { promise.set_value(std::move(response)); });
  return future.get();
}

StatusOr<HttpResponse> HttpClient::Fetch(std::string method, std::string_view url,
                                         HttpHeaders headers, std::string body,
                                         std::chrono::milliseconds timeout) {
  TANDEM_ASSIGN_OR_RETURN(HttpClientRequest request,
                          HttpClientRequest::FromUrl(std::move(method), url));
  request.headers = std::move(headers);
  request.body = std::move(body);
  request.timeout = timeout;
  return Fetch(std::move(request));
}

}  // namespace tandem::net
