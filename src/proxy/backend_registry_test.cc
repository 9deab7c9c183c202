#include "proxy/backend_registry.h"

#include <gtest/gtest.h>

namespace tandem::proxy {
namespace {

BackendAddress A(uint16_t port) { return {"127.0.0.1", port}; }

TEST(BackendRegistryTest, PicksTheLeastLoaded) {
  BackendRegistry r;
  r.Add(Role::kPrefill, A(1));
  r.Add(Role::kPrefill, A(2));
  BackendPtr first = r.Pick(Role::kPrefill, 100);
  BackendPtr second = r.Pick(Role::kPrefill, 10);
  ASSERT_TRUE(first && second);
  EXPECT_NE(first, second);
  // 100 vs 10 in flight: the next goes to the one with 10.
  EXPECT_EQ(r.Pick(Role::kPrefill, 10), second);
  r.Release(first, 100);
  EXPECT_EQ(r.Pick(Role::kPrefill, 1), first);   // now 0 vs 20
  EXPECT_EQ(r.Pick(Role::kDecode, 1), nullptr);  // no decoders
}

TEST(BackendRegistryTest, TiesGoToTheLeastRecentlyPicked) {
  BackendRegistry r;
  r.Add(Role::kDecode, A(1));
  r.Add(Role::kDecode, A(2));
  BackendPtr a = r.Pick(Role::kDecode, 5);
  r.Release(a, 5);
  BackendPtr b = r.Pick(Role::kDecode, 5);
  r.Release(b, 5);
  EXPECT_NE(a, b);
  EXPECT_EQ(r.Pick(Role::kDecode, 5), a);
}

TEST(BackendRegistryTest, AvoidsTriedAndDownInstances) {
  BackendRegistry r;
  r.Add(Role::kPrefill, A(1));
  r.Add(Role::kPrefill, A(2));
  BackendPtr a = r.Pick(Role::kPrefill, 0);
  r.Release(a, 0);
  BackendPtr b = r.Pick(Role::kPrefill, 0, {a});
  EXPECT_NE(a, b);
  r.Release(b, 0);
  // Both tried: an up one is reused.
  EXPECT_TRUE(r.Pick(Role::kPrefill, 0, {a, b}));
  r.Release(a, 0);
  r.MarkDown(a);
  for (int i = 0; i < 3; ++i) {
    BackendPtr p = r.Pick(Role::kPrefill, 0);
    EXPECT_EQ(p, b);
    r.Release(p, 0);
  }
  // Nothing up: a down one is still tried rather than failing at once.
  r.MarkDown(b);
  EXPECT_TRUE(r.Pick(Role::kPrefill, 0));
  EXPECT_EQ(r.InState(Backend::State::kDown).size(), 2u);
  r.MarkUp(a);
  EXPECT_EQ(r.InState(Backend::State::kDown).size(), 1u);
}

TEST(BackendRegistryTest, RemovingABusyInstanceDrainsIt) {
  BackendRegistry r;
  r.Add(Role::kDecode, A(1));
  r.Add(Role::kDecode, A(2));
  BackendPtr busy = r.Pick(Role::kDecode, 3);
  EXPECT_EQ(r.Remove(Role::kDecode, busy->address()), BackendRegistry::RemoveResult::kDraining);
  EXPECT_EQ(r.CountActive(Role::kDecode), 2u);
  for (int i = 0; i < 3; ++i) {
    BackendPtr p = r.Pick(Role::kDecode, 1);
    EXPECT_NE(p, busy);
    r.Release(p, 1);
  }
  r.Release(busy, 3);
  EXPECT_EQ(r.CountActive(Role::kDecode), 1u);
  EXPECT_EQ(r.Remove(Role::kDecode, busy->address()), BackendRegistry::RemoveResult::kNotFound);
  BackendPtr idle = r.Pick(Role::kDecode, 0);
  r.Release(idle, 0);
  EXPECT_EQ(r.Remove(Role::kDecode, idle->address()), BackendRegistry::RemoveResult::kRemoved);
  EXPECT_EQ(r.Pick(Role::kDecode, 0), nullptr);
}

TEST(BackendRegistryTest, DuplicateAddsAreRefused) {
  BackendRegistry r;
  EXPECT_TRUE(r.Add(Role::kPrefill, A(1)));
  EXPECT_FALSE(r.Add(Role::kPrefill, A(1)));
  EXPECT_TRUE(r.Add(Role::kDecode, A(1)));  // another role is another instance
}

TEST(BackendRegistryTest, PendingInstancesAreNotRoutedUntilHealthy) {
  BackendRegistry r;
  BackendPtr p = r.Add(Role::kPrefill, A(1), Backend::State::kPending);
  EXPECT_EQ(r.Pick(Role::kPrefill, 0), nullptr);
  EXPECT_EQ(r.CountActive(Role::kPrefill), 0u);
  EXPECT_FALSE(r.PendingProbeFailed(p, 2));
  r.MarkUp(p);
  EXPECT_EQ(r.Pick(Role::kPrefill, 0), p);
  BackendPtr q = r.Add(Role::kPrefill, A(2), Backend::State::kPending);
  EXPECT_FALSE(r.PendingProbeFailed(q, 2));
  EXPECT_TRUE(r.PendingProbeFailed(q, 2));
  EXPECT_EQ(r.Snapshot().size(), 1u);
}

TEST(BackendRegistryTest, ExportsUpAndInFlightGauges) {
  MetricsRegistry metrics;
  BackendRegistry r(&metrics);
  r.Add(Role::kDecode, A(7));
  BackendPtr d = r.Pick(Role::kDecode, 1);
  r.MarkDown(d);
  std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find(R"(tandem_proxy_backend_up{instance="127.0.0.1:7",role="decode"} 0.0)"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"(tandem_proxy_backend_in_flight_requests{instance="127.0.0.1:7",role="decode"} 1.0)"),
      std::string::npos)
      << text;
}

TEST(BackendRegistryTest, ParsesAddresses) {
  auto a = ParseBackendAddress("10.0.0.1:8100");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "10.0.0.1");
  EXPECT_EQ(a->port, 8100);
  auto v6 = ParseBackendAddress("[::1]:80");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->Key(), "[::1]:80");
  for (const char* bad : {"host", ":80", "h:0", "h:70000", "h:8x", "::1:80", "[]:1"}) {
    EXPECT_FALSE(ParseBackendAddress(bad).ok()) << bad;
  }
}

TEST(BackendRegistryTest, RankLoadRoutesByTheReportedLoadPlusPicksSinceTheReport) {
  BackendRegistry r;
  r.Add(Role::kWorker, A(1), Backend::State::kUp, "0");
  r.Add(Role::kWorker, A(2), Backend::State::kUp, "1");
  auto pick = [&] {
    return r.PickRouted(Role::kWorker, 1, {}, RoutingPolicy::kRankLoad, 0, nullptr);
  };
  // Rank 0 reports 2 waiting (score 8), rank 1 runs 5 (score 5): rank 1.
  ASSERT_TRUE(r.ReportLoad(Role::kWorker, A(1), RankLoad{2, 0, 0.1}));
  ASSERT_TRUE(r.ReportLoad(Role::kWorker, A(2), RankLoad{0, 5, 0.1}));
  BackendRegistry::Routed first = pick();
  ASSERT_TRUE(first.backend);
  EXPECT_EQ(first.backend->address(), A(2));
  EXPECT_EQ(first.reason, RouteReason::kRankLoad);
  EXPECT_EQ(first.backend->label(), "1");
  // That pick counts as waiting on rank 1 (score 9 > 8) until its next report.
  EXPECT_EQ(pick().backend->address(), A(1));
  // A fresh report from rank 1 resets its count: 5 < 12 (rank 0: 2 waiting + 1 sent).
  ASSERT_TRUE(r.ReportLoad(Role::kWorker, A(2), RankLoad{0, 5, 0.1}));
  EXPECT_EQ(pick().backend->address(), A(2));
  EXPECT_FALSE(r.ReportLoad(Role::kWorker, A(9), RankLoad{}));
  const std::vector<BackendInfo> infos = r.Snapshot();
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].label, "0");
  EXPECT_EQ(infos[0].reported.waiting, 2);
  EXPECT_EQ(infos[0].sent_since_report, 1);
}

}  // namespace
}  // namespace tandem::proxy
