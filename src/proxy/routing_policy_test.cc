#include "proxy/routing_policy.h"

#include <gtest/gtest.h>

#include <vector>

#include "proxy/backend_registry.h"

namespace tandem::proxy {
namespace {

TEST(RoutingPolicyTest, ParsesNames) {
  EXPECT_EQ(*ParseRoutingPolicy("round_robin"), RoutingPolicy::kRoundRobin);
  EXPECT_EQ(*ParseRoutingPolicy("least_load"), RoutingPolicy::kLeastLoad);
  EXPECT_EQ(*ParseRoutingPolicy("prefix_aware"), RoutingPolicy::kPrefixAware);
  EXPECT_EQ(ParseRoutingPolicy("cache_aware").status().code(), StatusCode::kInvalidArgument);
}

TEST(RoutingPolicyTest, PrefixAwarePrefersTheLongestCachedPrefix) {
  // load, in_flight, last_pick, cached_tokens
  std::vector<RouteCandidate> c = {{100, 1, 1, 0}, {900, 3, 2, 512}, {50, 0, 3, 128}};
  RouteChoice choice = ChoosePrefixAware(c, /*load_threshold=*/4);
  EXPECT_EQ(choice.index, 1u);
  EXPECT_EQ(choice.reason, RouteReason::kPrefixHit);
}

TEST(RoutingPolicyTest, PrefixAwareFallsBackToLoadWhenTheHolderIsBusy) {
  std::vector<RouteCandidate> c = {{100, 1, 1, 0}, {900, 6, 2, 512}};
  RouteChoice choice = ChoosePrefixAware(c, /*load_threshold=*/4);  // 6 - 1 > 4
  EXPECT_EQ(choice.index, 0u);
  EXPECT_EQ(choice.reason, RouteReason::kPrefixOverloaded);
  EXPECT_EQ(ChoosePrefixAware(c, 5).reason, RouteReason::kPrefixHit);  // 6 - 1 <= 5
}

TEST(RoutingPolicyTest, PrefixAwareWithoutHitsIsLeastLoad) {
  std::vector<RouteCandidate> c = {{300, 1, 1, 0}, {200, 1, 2, 0}, {200, 1, 0, 0}};
  RouteChoice choice = ChoosePrefixAware(c, 4);
  EXPECT_EQ(choice.index, 2u);  // least load, then least recently picked
  EXPECT_EQ(choice.reason, RouteReason::kNoPrefix);
}

TEST(RoutingPolicyTest, EqualPrefixesGoToTheLessBusy) {
  std::vector<RouteCandidate> c = {{100, 2, 1, 64}, {100, 1, 2, 64}};
  EXPECT_EQ(ChoosePrefixAware(c, 4).index, 1u);
}

TEST(RoutingPolicyTest, RegistryRoundRobinCyclesInRegistrationOrder) {
  BackendRegistry registry;
  for (uint16_t port : {1, 2, 3}) registry.Add(Role::kWorker, {"h", port});
  std::vector<uint16_t> ports;
  for (int i = 0; i < 6; ++i) {
    auto r = registry.PickRouted(Role::kWorker, 10, {}, RoutingPolicy::kRoundRobin, 4, {});
    ASSERT_TRUE(r.backend);
    EXPECT_EQ(r.reason, RouteReason::kRoundRobin);
    ports.push_back(r.backend->address().port);
  }
  EXPECT_EQ(ports, (std::vector<uint16_t>{1, 2, 3, 1, 2, 3}));
}

TEST(RoutingPolicyTest, RegistryPrefixAwareUsesThePrediction) {
  BackendRegistry registry;
  registry.Add(Role::kWorker, {"h", 1});
  BackendPtr holder = registry.Add(Role::kWorker, {"h", 2});
  auto cached = [&](const Backend& b) -> int64_t { return &b == holder.get() ? 256 : 0; };
  auto r = registry.PickRouted(Role::kWorker, 10, {}, RoutingPolicy::kPrefixAware, 4, cached);
  EXPECT_EQ(r.backend, holder);
  EXPECT_EQ(r.reason, RouteReason::kPrefixHit);
  EXPECT_EQ(r.cached_tokens, 256);
  // Tried already (a retry): the other one, by load.
  auto retry =
      registry.PickRouted(Role::kWorker, 10, {holder}, RoutingPolicy::kPrefixAware, 4, cached);
  EXPECT_NE(retry.backend, holder);
  EXPECT_EQ(retry.reason, RouteReason::kNoPrefix);
  // Not scored: least load.
  auto unscored = registry.PickRouted(Role::kWorker, 10, {}, RoutingPolicy::kPrefixAware, 4, {});
  EXPECT_EQ(unscored.reason, RouteReason::kNotScored);
  // Everything tried: the fallback tier.
  auto fallback = registry.PickRouted(Role::kWorker, 10, {holder, retry.backend},
                                      RoutingPolicy::kPrefixAware, 4, cached);
  EXPECT_EQ(fallback.reason, RouteReason::kFallback);
}

}  // namespace
}  // namespace tandem::proxy
