// DpFrontEnd: the one OpenAI front end over the N data-parallel ranks of a `tandem serve`
// deployment (vLLM's internal DP load balancing, DpMode::kFrontEnd).
//
// It is a ProxyServer in worker mode (src/proxy: the OpenAI routes, streaming,
// /v1/models from a rank, /health, /metrics aggregated with engine="<rank>" on every
// rank's series), plus:
//   - a rank roster (RankRoster): the local ranks are registered by the supervisor,
//     the ranks of --headless nodes over HTTP on --data-parallel-rpc-port
//     (POST /dp/ranks, GET /dp/ranks; the API key applies when set);
//   - a load scraper: every `load_interval` each up rank's /metrics is read and its
//     waiting / running requests and KV-cache usage reported to the registry, where
//     RoutingPolicy::kRankLoad routes by them (vLLM's waiting * 4 + running).
// A new rank is pending until its /health answers 200; a rank whose process died is
// marked down at once (RankDown) and routed to again once /health answers 200.
// A request is not replayed on another rank once it was sent to one
// (ProxyOptions::retry_sent_requests false): a request in flight on a rank that dies
// ends with an OpenAI error (a JSON error, or an SSE error event and [DONE] once the
// stream started). Requests that never reached a rank (connection refused: it died a
// moment before it was marked down) and overload answers (503/429) go to another rank.
//
// Thread safety: Start(), Stop() and the destructor from one controlling thread;
// RegisterRank() and RankDown() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "dp/rank_roster.h"
#include "proxy/proxy_options.h"

namespace tandem::net {
class HttpServer;
class HttpClient;
}  // namespace tandem::net
namespace tandem::proxy {
class ProxyServer;
}

namespace tandem::dp {

struct DpFrontEndOptions {
  // host, port, api_key, limits, io_threads; worker mode, rank_load routing and
  // retry_sent_requests false are set by Create.
  proxy::ProxyOptions proxy;
  int size = 1;                        // N: ranks [0, N) are accepted
  std::string rpc_host = "127.0.0.1";  // where the registration port binds (the DP address)
  int rpc_port = 0;                    // 0: ephemeral (tests)
  std::chrono::milliseconds load_interval{100};
};

class DpFrontEnd {
 public:
  // InvalidArgument for bad options.
  static StatusOr<std::unique_ptr<DpFrontEnd>> Create(DpFrontEndOptions options);
  ~DpFrontEnd();  // Stop()s

  // Binds the API port and the registration port; Unavailable when one is in use.
  Status Start();
  void Stop();

  // Registers `rank` at `address` (see RankRoster). InvalidArgument outside [0, N).
  Status RegisterRank(int rank, const proxy::BackendAddress& address);
  // The rank's process died: stop routing to it until it answers /health again.
  void RankDown(int rank);

  uint16_t port() const;
  uint16_t rpc_port() const;

 private:
  explicit DpFrontEnd(DpFrontEndOptions options);
  void AddRegistrationRoutes();
  void ScrapeLoop();

  DpFrontEndOptions options_;
  std::unique_ptr<proxy::ProxyServer> proxy_;
  std::unique_ptr<net::HttpServer> rpc_;
  std::unique_ptr<net::HttpClient> scrape_client_;
  std::mutex mu_;
  RankRoster roster_;  // guarded by mu_
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread scraper_;
  bool started_ = false;
};

}  // namespace tandem::dp
