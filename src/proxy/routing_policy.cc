#include "proxy/routing_policy.h"

#include <algorithm>
#include <string>

namespace tandem::proxy {

StatusOr<RoutingPolicy> ParseRoutingPolicy(std::string_view name) {
  if (name == "round_robin") return RoutingPolicy::kRoundRobin;
  if (name == "least_load") return RoutingPolicy::kLeastLoad;
  if (name == "prefix_aware") return RoutingPolicy::kPrefixAware;
  if (name == "rank_load") return RoutingPolicy::kRankLoad;
  return InvalidArgumentError("unknown routing policy '" + std::string(name) +
                              "' (want round_robin, least_load, prefix_aware or rank_load)");
}

std::string_view RoutingPolicyName(RoutingPolicy policy) {
  switch (policy) {
    case RoutingPolicy::kRoundRobin:
      return "round_robin";
    case RoutingPolicy::kLeastLoad:
      return "least_load";
    case RoutingPolicy::kPrefixAware:
      return "prefix_aware";
    case RoutingPolicy::kRankLoad:
      return "rank_load";
  }
  return "?";
}

std::string_view RouteReasonName(RouteReason reason) {
  switch (reason) {
    case RouteReason::kRoundRobin:
      return "round_robin";
    case RouteReason::kLeastLoad:
      return "least_load";
    case RouteReason::kPrefixHit:
      return "prefix_hit";
    case RouteReason::kPrefixOverloaded:
      return "prefix_overloaded";
    case RouteReason::kNoPrefix:
      return "no_prefix";
    case RouteReason::kNotScored:
      return "not_scored";
    case RouteReason::kFallback:
      return "fallback";
    case RouteReason::kRankLoad:
      return "rank_load";
  }
  return "?";
}

size_t LeastLoaded(std::span<const RouteCandidate> c) {
  size_t best = 0;
  for (size_t i = 1; i < c.size(); ++i) {
    if (c[i].load != c[best].load ? c[i].load < c[best].load : c[i].last_pick < c[best].last_pick) {
      best = i;
    }
  }
  return best;
}

int64_t RankScore(const RankLoad& load, int64_t sent_since_report) {
  return (std::max<int64_t>(0, load.waiting) + std::max<int64_t>(0, sent_since_report)) * 4 +
         std::max<int64_t>(0, load.running);
}

size_t ChooseRankLoad(std::span<const RouteCandidate> c) {
  // Lexicographic: score, KV usage, requests in flight, least recently picked.
  auto better = [](const RouteCandidate& a, const RouteCandidate& b) {
    if (a.rank_score != b.rank_score) return a.rank_score < b.rank_score;
    if (a.kv_usage != b.kv_usage) return a.kv_usage < b.kv_usage;
    if (a.in_flight != b.in_flight) return a.in_flight < b.in_flight;
    return a.last_pick < b.last_pick;
  };
  size_t best = 0;
  for (size_t i = 1; i < c.size(); ++i) {
    if (better(c[i], c[best])) best = i;
  }
  return best;
}

RouteChoice ChoosePrefixAware(std::span<const RouteCandidate> c, int64_t load_threshold) {
  size_t holder = 0;
  int64_t min_in_flight = c[0].in_flight;
  for (size_t i = 1; i < c.size(); ++i) {
    min_in_flight = std::min(min_in_flight, c[i].in_flight);
    const bool longer = c[i].cached_tokens > c[holder].cached_tokens;
    const bool tie_less_busy =
        c[i].cached_tokens == c[holder].cached_tokens &&
        (c[i].in_flight != c[holder].in_flight ? c[i].in_flight < c[holder].in_flight
                                               : c[i].load < c[holder].load);
    if (longer || tie_less_busy) holder = i;
  }
  if (c[holder].cached_tokens <= 0) return {LeastLoaded(c), RouteReason::kNoPrefix};
  if (c[holder].in_flight - min_in_flight > load_threshold) {
    return {LeastLoaded(c), RouteReason::kPrefixOverloaded};
  }
  return {holder, RouteReason::kPrefixHit};
}

}  // namespace tandem::proxy
