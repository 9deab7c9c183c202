#include "proxy/proxy_server.h"

#include <atomic>
#include <mutex>
#include <random>

#include "common/logging.h"
#include "net/api_key.h"
#include "net/http_server.h"
#include "net/openai_error.h"
#include "proxy/backend_io.h"
#include "proxy/backend_registry.h"
#include "proxy/health_prober.h"
#include "proxy/metrics_merge.h"
#include "proxy/pd_bodies.h"
#include "proxy/pd_request.h"
#include "proxy/prefix_router.h"
#include "proxy/proxy_metrics.h"

namespace tandem::proxy {
namespace {

using WriterPtr = std::shared_ptr<net::HttpResponseWriter>;

// A random UUID (version 4), as the Python proxy's request ids.
std::string NewRequestId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t hi = rng(), lo = rng();
  hi = (hi & ~0xF000ull) | 0x4000ull;                  // version 4
  lo = (lo & ~(0xC000ull << 48)) | (0x8000ull << 48);  // variant 10
  char buf[40];
  snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
           static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
           static_cast<unsigned>(lo >> 48),
           static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

Json InstanceList(const BackendRegistry& registry, Role role) {
  Json list = Json::array();
  for (const BackendInfo& info : registry.Snapshot()) {
    if (info.role == role && info.state != Backend::State::kPending) {
      list.push_back(info.address.Key());
    }
  }
  return list;
}

}  // namespace

StatusOr<std::unique_ptr<ProxyServer>> ProxyServer::Create(ProxyOptions options) {
  TANDEM_RETURN_IF_ERROR(ValidateProxyOptions(options));
  std::unique_ptr<ProxyServer> server(new ProxyServer(std::move(options)));
  if (!server->options_.kv_events_endpoints.empty()) {
    TANDEM_ASSIGN_OR_RETURN(server->router_,
                            PrefixRouter::Create(server->options_, server->registry_.get(),
                                                 server->io_.get(), &server->metrics_registry_));
    if (server->options_.routing_policy == RoutingPolicy::kPrefixAware) {
      server->context_->router = server->router_.get();
    }
  }
  return server;
}

ProxyServer::ProxyServer(ProxyOptions options) : options_(std::move(options)) {
  const std::string& key = !options_.api_key.empty() ? options_.api_key : options_.backend_api_key;
  if (!key.empty()) backend_authorization_ = "Bearer " + key;
  metrics_ = std::make_unique<ProxyMetrics>(&metrics_registry_, options_.routing_policy);
  registry_ = std::make_unique<BackendRegistry>(&metrics_registry_);
  for (const BackendAddress& a : options_.prefillers) registry_->Add(Role::kPrefill, a);
  for (const BackendAddress& a : options_.decoders) registry_->Add(Role::kDecode, a);
  for (const BackendAddress& a : options_.workers) registry_->Add(Role::kWorker, a);
  net::HttpClientOptions client;
  client.io_threads = options_.io_threads;
  client.max_idle_connections_per_host = 256;
  io_ = std::make_unique<BackendIo>(client);
  context_ = std::make_unique<ProxyContext>(
      ProxyContext{&options_, registry_.get(), io_.get(), metrics_.get()});
  prober_ =
      std::make_unique<HealthProber>(options_, registry_.get(), io_.get(), backend_authorization_);
  net::HttpServerOptions http;
  http.host = options_.host;
  http.port = options_.port;
  http.io_threads = options_.io_threads;
  http.max_body_bytes = options_.max_body_bytes;
  http.max_header_bytes = options_.max_header_bytes;
  http.max_connections = options_.max_connections;
  http_ = std::make_unique<net::HttpServer>(http);
  AddRoutes();
}

ProxyServer::~ProxyServer() { Stop(); }

Status ProxyServer::Start() {
  TANDEM_RETURN_IF_ERROR(http_->Start());
  prober_->Start();
  if (router_) router_->Start();
  if (WorkerMode(options_)) {
    TANDEM_LOG(INFO) << "tandem proxy on " << options_.host << ":" << http_->port() << ": "
                     << options_.workers.size() << " worker instances, routing "
                     << RoutingPolicyName(options_.routing_policy);
  } else {
    TANDEM_LOG(INFO) << "tandem proxy on " << options_.host << ":" << http_->port() << ": "
                     << options_.prefillers.size() << " prefill and " << options_.decoders.size()
                     << " decode instances, routing prefill "
                     << RoutingPolicyName(options_.routing_policy);
  }
  return Status::Ok();
}

void ProxyServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  http_->Stop();  // in-flight responses get the grace period; then OnClose fires
  io_->Close();   // then nothing new starts on the backends
  if (router_) router_->Stop();
}

uint16_t ProxyServer::port() const { return http_->port(); }

bool ProxyServer::AddWorker(const BackendAddress& address, const std::string& label) {
  return registry_->Add(Role::kWorker, address, Backend::State::kPending, label) != nullptr;
}

void ProxyServer::MarkWorkerDown(const BackendAddress& address) {
  if (BackendPtr backend = registry_->Find(Role::kWorker, address)) registry_->MarkDown(backend);
}

bool ProxyServer::RemoveWorker(const BackendAddress& address) {
  return registry_->Remove(Role::kWorker, address) != BackendRegistry::RemoveResult::kNotFound;
}

void ProxyServer::ReportWorkerLoad(const BackendAddress& address, const RankLoad& load) {
  registry_->ReportLoad(Role::kWorker, address, load);
}

void ProxyServer::AddRoutes() {
  // Wraps a handler with the API-key check.
  auto guarded = [this](auto handler) {
    return [this, handler](net::HttpRequest request, WriterPtr writer) {
      if (!net::HasApiKey(request, options_.api_key)) {
        net::SendError(*writer, 401, "Unauthorized");
        return;
      }
      handler(std::move(request), std::move(writer));
    };
  };

  for (const char* target : {"/v1/completions", "/v1/chat/completions"}) {
    http_->Route(
        "POST", target, guarded([this, target](net::HttpRequest request, WriterPtr writer) {
          StatusOr<Json> body = ParseClientBody(request.body);
          if (!body.ok()) {
            net::SendError(*writer, 400, body.status().message());
            return;
          }
          PdRequestParams params;
          params.target = target;
          params.body = std::move(*body);
          params.raw_body = std::move(request.body);
          params.request_id = std::string(request.headers.Get("X-Request-Id").value_or(""));
          if (params.request_id.empty()) params.request_id = NewRequestId();
          params.authorization = !backend_authorization_.empty()
                                     ? backend_authorization_
                                     : request.headers.GetOr("Authorization", "");
          StartPdRequest(context_.get(), std::move(params), std::move(writer));
        }));
  }

  http_->Route("GET", "/v1/models", guarded([this](net::HttpRequest request, WriterPtr writer) {
                 // Decoders first (up ones first), then prefillers; the first 200 answers.
                 std::vector<BackendAddress> candidates;
                 for (Role role : {Role::kDecode, Role::kWorker, Role::kPrefill}) {
                   for (bool want_up : {true, false}) {
                     for (const BackendInfo& info : registry_->Snapshot()) {
                       if (info.role != role || info.state == Backend::State::kPending) continue;
                       if ((info.state == Backend::State::kUp) == want_up)
                         candidates.push_back(info.address);
                     }
                   }
                 }
                 std::string authorization = !backend_authorization_.empty()
                                                 ? backend_authorization_
                                                 : request.headers.GetOr("Authorization", "");
                 struct Lookup {
                   std::vector<BackendAddress> candidates;
                   size_t next = 0;
                   std::string authorization;
                   WriterPtr writer;
                   std::function<void()> try_next;
                 };
                 auto lookup = std::make_shared<Lookup>();
                 lookup->candidates = std::move(candidates);
                 lookup->authorization = std::move(authorization);
                 lookup->writer = std::move(writer);
                 BackendIo* io = io_.get();
                 std::weak_ptr<Lookup> weak = lookup;
                 lookup->try_next = [io, weak] {
                   auto self = weak.lock();
                   if (!self) return;
                   if (self->next >= self->candidates.size()) {
                     net::SendError(*self->writer, 503, "no backend instance answered /v1/models");
                     return;
                   }
                   const BackendAddress& address = self->candidates[self->next++];
                   net::HttpClientRequest r;
                   r.method = "GET";
                   r.host = address.host;
                   r.port = address.port;
                   r.target = "/v1/models";
                   r.timeout = std::chrono::seconds(5);
                   if (!self->authorization.empty())
                     r.headers.Set("Authorization", self->authorization);
                   auto started =
                       io->Fetch(std::move(r), [self](StatusOr<net::HttpResponse> response) {
                         if (response.ok() && response->status == 200) {
                           net::SendJson(*self->writer, 200, std::move(response->body));
                           self->try_next = nullptr;  // breaks the self-reference
                         } else {
                           self->try_next();
                         }
                       });
                   if (!started) net::SendError(*self->writer, 503, "the proxy is shutting down");
                 };
                 lookup->try_next();
               }));

  auto health = [this](net::HttpRequest, WriterPtr writer) {
    Json body{{"status", "ok"},
              {"prefill_instances", registry_->CountActive(Role::kPrefill)},
              {"decode_instances", registry_->CountActive(Role::kDecode)},
              {"request_num", metrics_->in_flight()}};
    if (WorkerMode(options_)) body["worker_instances"] = registry_->CountActive(Role::kWorker);
    int status = 200;
    if (options_.worker_mode) {
      // An embedding front end (the DP one) is healthy while one of its workers is up.
      size_t up = 0;
      for (const BackendInfo& info : registry_->Snapshot())
        up += info.role == Role::kWorker && info.state == Backend::State::kUp ? 1 : 0;
      body["worker_instances_up"] = up;
      if (up == 0) {
        body["status"] = "no worker instance is up";
        status = 503;
      }
    }
    net::SendJson(*writer, status, DumpJson(body));
  };
  // --no-auth-health-metrics opens these to scrapers and load balancers without the key.
  auto health_or_metrics = [this, guarded](auto handler) -> net::HttpHandler {
    if (options_.no_auth_health_metrics) return handler;
    return guarded(handler);
  };
  http_->Route("GET", "/health", health_or_metrics(health));
  http_->Route("GET", "/healthcheck", health_or_metrics(health));

  // Its own series, then every up backend's engine series (scraped now, 2 s budget; a
  // backend that does not answer in time is left out), relabelled per engine.
  auto metrics = [this](net::HttpRequest client_request, WriterPtr writer) {
    struct Gather {
      std::mutex mu;
      size_t pending = 0;
      std::string own;
      std::vector<ScrapedBackend> scraped;  // in backend order; empty text = no answer
      WriterPtr writer;
      void Done() {
        writer->SendResponse(200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}},
                             MergeBackendMetrics(own, scraped));
      }
    };
    auto g = std::make_shared<Gather>();
    g->own = metrics_registry_.RenderPrometheus();
    g->writer = writer;
    std::vector<BackendInfo> backends;
    for (const BackendInfo& b : registry_->Snapshot()) {
      if (b.state == Backend::State::kUp) backends.push_back(b);
    }
    if (backends.empty()) return g->Done();
    // Keyed backends need the key for /metrics too: ours, else the client's.
    const std::string authorization = !backend_authorization_.empty()
                                          ? backend_authorization_
                                          : client_request.headers.GetOr("Authorization", "");
    g->scraped.resize(backends.size());
    g->pending = backends.size();
    for (size_t i = 0; i < backends.size(); ++i) {
      g->scraped[i].engine = !backends[i].label.empty() ? backends[i].label
                                                        : std::string(RoleName(backends[i].role)) +
                                                              "@" + backends[i].address.Key();
      net::HttpClientRequest request;
      request.host = backends[i].address.host;
      request.port = backends[i].address.port;
      request.target = "/metrics";
      request.timeout = std::chrono::milliseconds(2000);
      if (!authorization.empty()) request.headers.Set("Authorization", authorization);
      auto finish = [g, i](StatusOr<net::HttpResponse> response) {
        std::lock_guard<std::mutex> lock(g->mu);
        if (response.ok() && response->status == 200) g->scraped[i].text = std::move(response->body);
        if (--g->pending == 0) g->Done();
      };
      if (!io_->Fetch(std::move(request), finish))
        finish(CancelledError("the proxy is shutting down"));
    }
  };
  http_->Route("GET", "/metrics", health_or_metrics(metrics));

  for (bool add : {true, false}) {
    http_->Route(
        "POST", add ? "/instances/add" : "/instances/remove",
        guarded([this, add](net::HttpRequest request, WriterPtr writer) {
          StatusOr<Json> body = ParseClientBody(request.body);
          if (!body.ok()) {
            net::SendError(*writer, 400, body.status().message());
            return;
          }
          const std::string type = body->value("type", Json("")).is_string()
                                       ? body->value("type", std::string())
                                       : std::string();
          const bool workers = WorkerMode(options_);
          if (workers ? type != "worker" : (type != "prefill" && type != "decode")) {
            net::SendError(*writer, 400,
                           "Instance type '" + type + "' is not supported. Only " +
                               (workers ? "'worker' is" : "'prefill' and 'decode' are") +
                               " allowed.",
                           "", "type");
            return;
          }
          const Role role = type == "prefill"  ? Role::kPrefill
                            : type == "decode" ? Role::kDecode
                                               : Role::kWorker;
          Json items = body->contains("instances") ? (*body)["instances"]
                                                   : body->value("instance", Json(nullptr));
          if (items.is_string()) items = Json::array({items});
          if (!items.is_array() || items.empty()) {
            net::SendError(*writer, 400, "'instances' must be a \"host:port\" string or a list", "",
                           "instances");
            return;
          }
          std::vector<BackendAddress> addresses;
          for (const Json& item : items) {
            StatusOr<BackendAddress> a = item.is_string()
                                             ? ParseBackendAddress(item.get<std::string>())
                                             : StatusOr<BackendAddress>(InvalidArgumentError(
                                                   "instances must be \"host:port\" strings"));
            if (!a.ok()) {
              net::SendError(*writer, 400, a.status().message(), "", "instances");
              return;
            }
            addresses.push_back(std::move(*a));
          }
          if (add) {
            AddInstances(role, std::move(addresses), std::move(writer));
          } else {
            RemoveInstances(role, addresses, *writer);
          }
        }));
  }
}

void ProxyServer::AddInstances(Role role, std::vector<BackendAddress> addresses, WriterPtr writer) {
  // Each new instance starts pending and is probed now; the answer waits for the probes.
  struct Pending {
    std::mutex mu;
    Json added = Json::array(), waiting = Json::array(), existing = Json::array(),
         failed = Json::array();
    size_t outstanding = 0;
    WriterPtr writer;
  };
  auto state = std::make_shared<Pending>();
  state->writer = std::move(writer);
  std::vector<BackendPtr> to_probe;
  for (const BackendAddress& address : addresses) {
    BackendPtr backend = registry_->Add(role, address, Backend::State::kPending);
    if (backend) {
      to_probe.push_back(std::move(backend));
    } else {
      state->existing.push_back(address.Key());
    }
  }
  state->outstanding = to_probe.size();
  auto reply = [this, role, state] {
    std::string message;
    if (!state->added.empty()) {
      message +=
          "Added " + std::string(RoleName(role)) + " instances " + state->added.dump() + ". ";
    }
    if (!state->waiting.empty()) {
      message += "Instances " + state->waiting.dump() + " are waiting to be added. ";
    }
    if (!state->existing.empty()) {
      message += "Instances " + state->existing.dump() + " are already present. ";
    }
    if (!state->failed.empty()) {
      message += "Instances " + state->failed.dump() + " were not added (not healthy). ";
    }
    if (!message.empty()) message.pop_back();
    Json body{{"message", message},
              {"added", state->added},
              {"waiting", state->waiting},
              {"failed", state->failed},
              {"current_prefill_instances", InstanceList(*registry_, Role::kPrefill)},
              {"current_decode_instances", InstanceList(*registry_, Role::kDecode)}};
    if (WorkerMode(options_))
      body["current_worker_instances"] = InstanceList(*registry_, Role::kWorker);
    net::SendJson(*state->writer, 200, DumpJson(body));
  };
  if (to_probe.empty()) return reply();
  for (const BackendPtr& backend : to_probe) {
    prober_->Probe(backend->address(), [this, backend, state, reply](bool healthy) {
      bool last = false;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        if (healthy) {
          registry_->MarkUp(backend);
          state->added.push_back(backend->address().Key());
        } else {
          // The first probe counts as one of the --max-waiting-retries.
          const bool dropped = registry_->PendingProbeFailed(backend, options_.max_waiting_retries);
          (dropped ? state->failed : state->waiting).push_back(backend->address().Key());
        }
        last = --state->outstanding == 0;
      }
      if (last) reply();
    });
  }
}

void ProxyServer::RemoveInstances(Role role, const std::vector<BackendAddress>& addresses,
                                  net::HttpResponseWriter& writer) {
  Json removed = Json::array(), draining = Json::array(), unknown = Json::array();
  for (const BackendAddress& address : addresses) {
    switch (registry_->Remove(role, address)) {
      case BackendRegistry::RemoveResult::kRemoved:
        removed.push_back(address.Key());
        break;
      case BackendRegistry::RemoveResult::kDraining:
        draining.push_back(address.Key());
        break;
      case BackendRegistry::RemoveResult::kNotFound:
        unknown.push_back(address.Key());
        break;
    }
  }
  std::string message;
  if (!removed.empty()) {
    message += "Removed " + std::string(RoleName(role)) + " instances " + removed.dump() + ". ";
    TANDEM_LOG(INFO) << "removed " << RoleName(role) << " instances " << removed.dump();
  }
  if (!draining.empty()) {
    message += "Instances " + draining.dump() + " are isolated and waiting to be removed. ";
  }
  if (!unknown.empty()) message += "Instances " + unknown.dump() + " are not registered. ";
  if (!message.empty()) message.pop_back();
  Json body{{"message", message},
            {"removed", removed},
            {"draining", draining},
            {"current_prefill_instances", InstanceList(*registry_, Role::kPrefill)},
            {"current_decode_instances", InstanceList(*registry_, Role::kDecode)}};
  if (WorkerMode(options_))
    body["current_worker_instances"] = InstanceList(*registry_, Role::kWorker);
  net::SendJson(writer, 200, DumpJson(body));
}

}  // namespace tandem::proxy
