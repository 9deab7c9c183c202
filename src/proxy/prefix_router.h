// PrefixRouter: the prefix_aware policy's view of a request: how many leading prompt
// tokens each routed instance has cached.
//
// It owns the PrefixIndex and the KvEventSubscriber that fills it (one source per
// routed instance with a --kv-events-endpoints entry). To score a request it needs the
// prompt's token ids, and the proxy links no tokenizer, so it asks one of the routed
// instances (the least loaded up one): POST /tokenize with the request's prompt, or its
// messages (plus tools, chat_template_kwargs, add_generation_prompt and
// continue_final_message) for a chat; a completion sent as token ids is used as it is.
// Then PrefixIndex::MatchPrefix gives each instance's cached prefix.
// Not scored (routed by load, reason not_scored): requests with a cache_salt (the
// engines hash them apart from the unsalted chain), multi-prompt completions, and any
// request whose /tokenize call fails or takes over 2 s (a connection failure marks the
// instance down, as a failed completion call does; a slow answer does not). With an empty index there is
// nothing to match and the request is scored as "nothing cached" without a call.
//
// Thread safety: all methods are thread-safe; Score's callback runs on an I/O thread
// (or inline). Start/Stop from the controlling thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"
#include "proxy/backend_io.h"
#include "proxy/backend_registry.h"
#include "proxy/kv_event_subscriber.h"
#include "proxy/pd_bodies.h"
#include "proxy/prefix_index.h"
#include "proxy/proxy_options.h"

namespace tandem::proxy {

struct PrefixScore {
  bool scored = false;
  int64_t prompt_tokens = 0;  // from /tokenize, else estimated
  // Instance key (host:port) -> predicted cached prompt tokens (absent = 0).
  std::unordered_map<std::string, int64_t> cached_tokens;

  int64_t CachedOn(const Backend& backend) const;
};

class PrefixRouter {
 public:
  // Subscribes to options.kv_events_endpoints (aligned with RoutedInstances(options)).
  // InvalidArgument for a malformed endpoint. Borrows everything; they must outlive
  // the router.
  static StatusOr<std::unique_ptr<PrefixRouter>> Create(const ProxyOptions& options,
                                                        BackendRegistry* registry, BackendIo* io,
                                                        MetricsRegistry* metrics);
  ~PrefixRouter();

  void Start();
  void Stop();

  // Scores `body` (a client body to `target`, "/v1/completions" or
  // "/v1/chat/completions") against the instances of `role`; `authorization` goes with
  // the /tokenize call. `done` runs exactly once.
  void Score(Role role, const Json& body, bool chat, const std::string& authorization,
             std::function<void(PrefixScore)> done);

  // The request went to `backend` predicted to hit `cached_tokens` of `score`: if that
  // leaves at least one block to compute, its events are expected.
  void Routed(const Backend& backend, const PrefixScore& score, int64_t cached_tokens);

  const PrefixIndex& index() const { return index_; }

 private:
  PrefixRouter(BackendRegistry* registry, BackendIo* io) : registry_(registry), io_(io) {}
  void Finish(const std::vector<int32_t>& tokens, PrefixScore score,
              const std::function<void(PrefixScore)>& done) const;

  BackendRegistry* const registry_;
  BackendIo* const io_;
  PrefixIndex index_;
  std::unordered_map<std::string, int> instance_ids_;  // host:port -> index instance
  std::unique_ptr<KvEventSubscriber> subscriber_;
};

}  // namespace tandem::proxy
