// RoutingPolicy: how the proxy picks the instance of the routed phase (the prefiller in
// PD mode, the worker with --worker-urls) among the routable ones.
//
//   round_robin   each in turn, in registration order;
//   least_load    the least estimated in-flight tokens (ties: least recently picked);
//   prefix_aware  the instance with the longest cached prefix of the prompt (from the
//                 KV-event index), unless it has more than `load_threshold` requests in
//                 flight beyond the least busy candidate: then least_load. With no
//                 cached prefix anywhere, least_load. In the spirit of SGLang's
//                 cache-aware policy (cache affinity unless the load is imbalanced) and
//                 llm-d's prefix-cache scorer beside its load scorer;
//   rank_load     the lowest RankScore: the load the instances themselves report
//                 (waiting and running requests, scraped from their /metrics by the
//                 data-parallel front end, src/dp) plus the requests sent since the
//                 report, scored as vLLM's DP load balancer does (waiting * 4 + running;
//                 ties: lower KV-cache usage, then fewer in flight, then least recently
//                 picked). Not offered by `tandem proxy`, which scrapes nothing.
// The decode phase in PD mode is always least_load (its KV arrives from the prefiller).
//
// Thread safety: pure functions and value types.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.h"

namespace tandem::proxy {

enum class RoutingPolicy { kRoundRobin, kLeastLoad, kPrefixAware, kRankLoad };

// "round_robin" | "least_load" | "prefix_aware" | "rank_load"; InvalidArgument otherwise.
StatusOr<RoutingPolicy> ParseRoutingPolicy(std::string_view name);
std::string_view RoutingPolicyName(RoutingPolicy policy);

// Why an instance was picked (the reason label of tandem_proxy_routing_decisions_total).
enum class RouteReason {
  kRoundRobin,        // round_robin's turn
  kLeastLoad,         // least_load
  kPrefixHit,         // prefix_aware: the longest cached prefix
  kPrefixOverloaded,  // prefix_aware: the holder was too busy; least_load instead
  kNoPrefix,          // prefix_aware: nothing cached anywhere; least_load
  kNotScored,         // prefix_aware without a score (salted, not tokenizable, no index)
  kFallback,          // no untried up instance: a tried or down one (any policy)
  kRankLoad,          // rank_load
};
std::string_view RouteReasonName(RouteReason reason);
inline constexpr int kNumRouteReasons = 8;

struct RouteCandidate {
  int64_t load = 0;           // estimated in-flight tokens
  int64_t in_flight = 0;      // requests in flight
  uint64_t last_pick = 0;     // pick sequence number (0: never)
  int64_t cached_tokens = 0;  // predicted cached prefix of this request
  int64_t rank_score = 0;     // rank_load: RankScore of the instance's reported load
  double kv_usage = 0;        // rank_load: reported KV-cache usage, 0..1
};

// What an instance reports about itself (vllm:num_requests_waiting / _running and
// vllm:kv_cache_usage_perc on its /metrics).
struct RankLoad {
  int64_t waiting = 0;  // requests
  int64_t running = 0;  // requests
  double kv_usage = 0;  // 0..1
};

// vLLM's DP score: waiting * 4 + running, where `sent_since_report` requests routed to
// the instance after its report count as waiting (they have not been seen yet).
int64_t RankScore(const RankLoad& load, int64_t sent_since_report);

// rank_load's choice (see above). Preconditions: !candidates.empty().
size_t ChooseRankLoad(std::span<const RouteCandidate> candidates);

// The index of the least-loaded candidate (ties: the least recently picked).
// Preconditions: !candidates.empty().
size_t LeastLoaded(std::span<const RouteCandidate> candidates);

struct RouteChoice {
  size_t index = 0;
  RouteReason reason = RouteReason::kLeastLoad;
};

// prefix_aware's choice (see above). Preconditions: !candidates.empty().
RouteChoice ChoosePrefixAware(std::span<const RouteCandidate> candidates, int64_t load_threshold);

}  // namespace tandem::proxy
