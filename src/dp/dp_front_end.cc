#include "dp/dp_front_end.h"

#include "common/logging.h"
#include "dp/rank_load.h"
#include "net/api_key.h"
#include "net/http_client.h"
#include "net/http_response_writer.h"
#include "net/http_server.h"
#include "proxy/pd_bodies.h"
#include "proxy/proxy_server.h"

namespace tandem::dp {

using proxy::BackendAddress;
using proxy::Json;

StatusOr<std::unique_ptr<DpFrontEnd>> DpFrontEnd::Create(DpFrontEndOptions options) {
  if (options.size < 1) return InvalidArgumentError("--data-parallel-size must be at least 1");
  if (options.load_interval.count() <= 0)
    return InvalidArgumentError("the load interval must be positive");
  proxy::ProxyOptions& p = options.proxy;
  p.worker_mode = true;
  p.workers.clear();
  p.routing_policy = proxy::RoutingPolicy::kRankLoad;
  // A request in flight on a rank that dies ends with an error; one that never reached
  // it (the rank died a moment before it was marked down) goes to another rank.
  p.retry_sent_requests = false;
  // Ranks join pending and may take long to load their model: probe them often, forever.
  p.waiting_retry_interval_s = 0.25;
  p.max_waiting_retries = 1 << 30;
  p.health_check_interval = std::chrono::milliseconds(250);
  TANDEM_RETURN_IF_ERROR(proxy::ValidateProxyOptions(p));
  std::unique_ptr<DpFrontEnd> front(new DpFrontEnd(std::move(options)));
  TANDEM_ASSIGN_OR_RETURN(front->proxy_, proxy::ProxyServer::Create(front->options_.proxy));
  return front;
}

DpFrontEnd::DpFrontEnd(DpFrontEndOptions options)
    : options_(std::move(options)), roster_(options_.size) {
  net::HttpServerOptions http;
  http.host = options_.rpc_host;
  http.port = static_cast<uint16_t>(options_.rpc_port);
  http.io_threads = 1;
  http.max_body_bytes = 64u << 10;
  rpc_ = std::make_unique<net::HttpServer>(http);
  scrape_client_ = std::make_unique<net::HttpClient>(net::HttpClientOptions{});
  AddRegistrationRoutes();
}

DpFrontEnd::~DpFrontEnd() { Stop(); }

Status DpFrontEnd::Start() {
  if (Status s = rpc_->Start(); !s.ok()) {
    return UnavailableError("--data-parallel-rpc-port: cannot listen on " + options_.rpc_host +
                            ":" + std::to_string(options_.rpc_port) + ": " + s.message());
  }
  if (Status s = proxy_->Start(); !s.ok()) {
    rpc_->Stop();
    return s;
  }
  started_ = true;
  scraper_ = std::thread([this] { ScrapeLoop(); });
  TANDEM_LOG(INFO) << "data-parallel front end: " << options_.size << " ranks, registration on "
                   << options_.rpc_host << ":" << rpc_->port() << ", routing by rank load";
  return Status::Ok();
}

void DpFrontEnd::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (scraper_.joinable()) scraper_.join();
  if (started_) rpc_->Stop();
  proxy_->Stop();
}

Status DpFrontEnd::RegisterRank(int rank, const BackendAddress& address) {
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_ASSIGN_OR_RETURN(RankRoster::Change change, roster_.Register(rank, address));
  if (!change.added) return Status::Ok();
  if (change.replaced) {
    proxy_->RemoveWorker(*change.replaced);
    TANDEM_LOG(INFO) << "DP rank " << rank << " moved from " << change.replaced->Key() << " to "
                     << address.Key();
  }
  proxy_->AddWorker(address, std::to_string(rank));
  TANDEM_LOG(INFO) << "DP rank " << rank << " registered at " << address.Key()
                   << " (routed to once /health answers 200)";
  return Status::Ok();
}

void DpFrontEnd::RankDown(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto address = roster_.Find(rank)) proxy_->MarkWorkerDown(*address);
}

uint16_t DpFrontEnd::port() const { return proxy_->port(); }
uint16_t DpFrontEnd::rpc_port() const { return rpc_->port(); }

void DpFrontEnd::AddRegistrationRoutes() {
  using WriterPtr = std::shared_ptr<net::HttpResponseWriter>;
  rpc_->Route("POST", "/dp/ranks", [this](net::HttpRequest request, WriterPtr writer) {
    if (!net::HasApiKey(request, options_.proxy.api_key)) {
      net::SendError(*writer, 401, "Unauthorized");
      return;
    }
    StatusOr<RankRegistration> r = ParseRankRegistration(request.body);
    if (!r.ok()) {
      net::SendError(*writer, 400, r.status().message());
      return;
    }
    Status s = Status::Ok();
    if (r->up) {
      s = RegisterRank(r->rank, r->address);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      auto known = roster_.Find(r->rank);
      if (known && *known == r->address) {
        proxy_->MarkWorkerDown(r->address);
        TANDEM_LOG(WARNING) << "DP rank " << r->rank << " at " << r->address.Key()
                            << " reported down by its node";
      }
    }
    if (!s.ok()) {
      net::SendError(*writer, 400, s.message(), "", "rank");
      return;
    }
    net::SendJson(*writer, 200, proxy::DumpJson(Json{{"rank", r->rank}, {"accepted", true}}));
  });
  rpc_->Route("GET", "/dp/ranks", [this](net::HttpRequest request, WriterPtr writer) {
    if (!net::HasApiKey(request, options_.proxy.api_key)) {
      net::SendError(*writer, 401, "Unauthorized");
      return;
    }
    Json ranks = Json::array();
    std::map<int, BackendAddress> roster;
    {
      std::lock_guard<std::mutex> lock(mu_);
      roster = roster_.ranks();
    }
    const std::vector<proxy::BackendInfo> infos = proxy_->registry().Snapshot();
    for (const auto& [rank, address] : roster) {
      std::string state = "unknown";
      for (const proxy::BackendInfo& info : infos) {
        if (info.address == address) {
          state = info.state == proxy::Backend::State::kUp     ? "up"
                  : info.state == proxy::Backend::State::kDown ? "down"
                                                               : "pending";
        }
      }
      ranks.push_back(Json{{"rank", rank}, {"address", address.Key()}, {"state", state}});
    }
    net::SendJson(*writer, 200, proxy::DumpJson(Json{{"size", options_.size}, {"ranks", ranks}}));
  });
}

void DpFrontEnd::ScrapeLoop() {
  const std::string authorization =
      options_.proxy.api_key.empty() ? "" : "Bearer " + options_.proxy.api_key;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_cv_.wait_for(lock, options_.load_interval, [this] { return stopping_; })) {
    lock.unlock();
    for (const proxy::BackendInfo& info : proxy_->registry().Snapshot()) {
      if (info.state != proxy::Backend::State::kUp) continue;
      net::HttpClientRequest request;
      request.method = "GET";
      request.host = info.address.host;
      request.port = info.address.port;
      request.target = "/metrics";
      request.timeout = std::chrono::milliseconds(500);
      if (!authorization.empty()) request.headers.Set("Authorization", authorization);
      StatusOr<net::HttpResponse> response = scrape_client_->Fetch(std::move(request));
      if (!response.ok() || response->status != 200) continue;  // the request path notices
      StatusOr<proxy::RankLoad> load = ParseRankLoad(response->body);
      if (load.ok()) proxy_->ReportWorkerLoad(info.address, *load);
    }
    lock.lock();
  }
}

}  // namespace tandem::dp
