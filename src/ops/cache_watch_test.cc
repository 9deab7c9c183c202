#include "ops/cache_watch.h"

#include <gtest/gtest.h>

#include "ops/prefix_cache_stats.h"

namespace tandem::ops {
namespace {

std::string Engine(const std::string& engine, double q, double h, double eq = -1, double eh = -1) {
  const std::string labels = "{engine=\"" + engine + "\",model_name=\"m\"}";
  std::string out = "vllm:prefix_cache_queries_total" + labels + " " + std::to_string(q) + "\n" +
                    "vllm:prefix_cache_hits_total" + labels + " " + std::to_string(h) + "\n";
  if (eq >= 0) {
    out += "vllm:external_prefix_cache_queries_total" + labels + " " + std::to_string(eq) + "\n";
    out += "vllm:external_prefix_cache_hits_total" + labels + " " + std::to_string(eh) + "\n";
  }
  return out + "vllm:num_requests_running" + labels + " 3\n";
}

TEST(PrefixCacheStats, GroupsByEngineLabelAndSumsOtherLabels) {
  auto samples =
      ParsePrometheusText(Engine("0", 100, 40) + Engine("1", 10, 5, 5, 5) +
                          "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"alias\"} 10\n"
                          "vllm:prefix_cache_queries_total 7\n");
  ASSERT_TRUE(samples.ok());
  auto by_engine = PrefixCacheCountersByEngine(*samples);
  ASSERT_EQ(by_engine.size(), 3u);
  EXPECT_EQ(by_engine["0"].local_queries_tokens, 100);
  EXPECT_EQ(by_engine["0"].local_hits_tokens, 50);
  EXPECT_EQ(by_engine["1"].ext_hits_tokens, 5);
  EXPECT_EQ(by_engine[""].local_queries_tokens, 7);
}

TEST(PrefixCacheStats, RatesFollowTheDesignDefinitions) {
  PrefixCacheCounters total{200, 100, 100, 25};
  PrefixCacheCounters window{50, 10, 40, 20};
  HitRates r = ComputeHitRates(window, total);
  EXPECT_DOUBLE_EQ(*r.local_win, 0.2);
  EXPECT_DOUBLE_EQ(*r.local_total, 0.5);
  EXPECT_DOUBLE_EQ(*r.ext_win, 0.5);
  EXPECT_DOUBLE_EQ(*r.ext_total, 0.25);
  EXPECT_DOUBLE_EQ(*r.eff_total, 125.0 / 200.0);  // (local hits + pool hits) / local queries
  HitRates empty = ComputeHitRates({}, {});
  EXPECT_FALSE(empty.local_win || empty.local_total || empty.ext_win || empty.ext_total ||
               empty.eff_total);
}

TEST(PrefixCacheStats, CounterResetCountsTheNewValue) {
  PrefixCacheCounters before{100, 50, 10, 5};
  PrefixCacheCounters after{30, 20, 12, 6};  // local counters restarted
  PrefixCacheCounters inc = CounterIncrease(before, after);
  EXPECT_EQ(inc.local_queries_tokens, 30);
  EXPECT_EQ(inc.local_hits_tokens, 20);
  EXPECT_EQ(inc.ext_queries_tokens, 2);
  EXPECT_EQ(inc.ext_hits_tokens, 1);
}

TEST(CacheWatch, WindowIsTheDifferenceBetweenScrapesPerEngineAndInTotal) {
  CacheWatch watch({"a:1", "b:2"});
  WatchReport first = watch.Update({Engine("0", 100, 50), Engine("0", 100, 0, 100, 100)});
  ASSERT_EQ(first.rows.size(), 3u);
  EXPECT_EQ(first.rows[0].name, "a:1 engine=0");
  EXPECT_EQ(first.rows[1].name, "b:2 engine=0");
  EXPECT_EQ(first.rows[2].name, "total");
  EXPECT_FALSE(first.rows[0].rates.local_win);  // no window yet
  EXPECT_DOUBLE_EQ(*first.rows[0].rates.local_total, 0.5);
  EXPECT_DOUBLE_EQ(*first.rows[2].rates.local_total, 0.25);
  EXPECT_DOUBLE_EQ(*first.rows[2].rates.eff_total, 150.0 / 200.0);

  WatchReport second = watch.Update({Engine("0", 200, 140), Engine("0", 300, 100, 200, 150)});
  EXPECT_DOUBLE_EQ(*second.rows[0].rates.local_win, 0.9);   // 90 / 100
  EXPECT_DOUBLE_EQ(*second.rows[1].rates.local_win, 0.5);   // 100 / 200
  EXPECT_DOUBLE_EQ(*second.rows[1].rates.ext_win, 0.5);     // 50 / 100
  EXPECT_DOUBLE_EQ(*second.rows[1].rates.ext_total, 0.75);  // 150 / 200
  EXPECT_DOUBLE_EQ(*second.rows[2].rates.local_win, 190.0 / 300.0);
  EXPECT_FALSE(second.rows[0].rates.ext_win);  // engine a has no pool counters

  std::string text = FormatWatchReport(second, "2026-01-01T00:00:00Z", 5);
  std::string squeezed;  // columns are padded; compare with single spaces
  for (char c : text) {
    if (c != ' ' || (!squeezed.empty() && squeezed.back() != ' ')) squeezed += c;
  }
  EXPECT_NE(squeezed.find("engine local_win local_total ext_win ext_total eff_total\n"),
            std::string::npos)
      << text;
  EXPECT_NE(squeezed.find("b:2 engine=0 50.0% 33.3% 50.0% 75.0% 83.3%\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("90.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("window 5.0 s"), std::string::npos) << text;
}

TEST(CacheWatch, AFailedScrapeIsReportedAndTheNextWindowSpansFromTheLastGoodOne) {
  CacheWatch watch({"a:1"});
  watch.Update({Engine("0", 100, 50)});
  WatchReport failed = watch.Update({StatusOr<std::string>(UnavailableError("refused"))});
  ASSERT_EQ(failed.errors.size(), 1u);
  EXPECT_NE(failed.errors[0].find("a:1"), std::string::npos);
  ASSERT_EQ(failed.rows.size(), 1u);  // only "total"
  WatchReport next = watch.Update({Engine("0", 300, 250)});
  EXPECT_DOUBLE_EQ(*next.rows[0].rates.local_win, 1.0);  // (250-50) / (300-100)
  WatchReport garbage = watch.Update({std::string("not metrics at all\n")});
  EXPECT_EQ(garbage.errors.size(), 1u);
}

TEST(CacheWatch, SeveralEnginesBehindOneEndpoint) {
  CacheWatch watch({"proxy:8000"});
  WatchReport r = watch.Update({Engine("0", 10, 5) + Engine("1", 30, 15)});
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0].name, "proxy:8000 engine=0");
  EXPECT_EQ(r.rows[1].name, "proxy:8000 engine=1");
  EXPECT_DOUBLE_EQ(*r.rows[2].rates.local_total, 0.5);
}

std::string PoolWorker(double mh, double mm, double dh, double dm, double disk_capacity) {
  auto line = [](const char* name, const char* tier, double v) {
    return std::string(name) + "{tier=\"" + tier + "\"} " + std::to_string(v) + "\n";
  };
  return line("tandem_pool_tier_hits_total", "memory", mh) +
         line("tandem_pool_tier_misses_total", "memory", mm) +
         line("tandem_pool_tier_hits_total", "disk", dh) +
         line("tandem_pool_tier_misses_total", "disk", dm) +
         line("tandem_pool_tier_capacity_bytes", "disk", disk_capacity) +
         "tandem_pool_objects 12\n";
}

TEST(CacheWatch, PoolWorkersGetAHitRatePerTier) {
  CacheWatch watch({"engine:1", "pool:9"});
  WatchReport first = watch.Update({Engine("0", 100, 50), PoolWorker(30, 70, 60, 10, 1 << 30)});
  ASSERT_EQ(first.pool_rows.size(), 1u);
  EXPECT_EQ(first.pool_rows[0].name, "pool:9");
  EXPECT_DOUBLE_EQ(*first.pool_rows[0].total.memory, 0.3);
  EXPECT_DOUBLE_EQ(*first.pool_rows[0].total.disk, 60.0 / 70.0);  // over the memory misses
  EXPECT_DOUBLE_EQ(*first.pool_rows[0].total.combined, 0.9);
  EXPECT_FALSE(first.pool_rows[0].window.memory);  // no window yet
  EXPECT_EQ(first.rows.size(), 2u);                // the worker adds no engine row

  WatchReport second = watch.Update({Engine("0", 100, 50), PoolWorker(40, 80, 70, 10, 1 << 30)});
  EXPECT_DOUBLE_EQ(*second.pool_rows[0].window.memory, 0.5);  // 10 / 20
  EXPECT_DOUBLE_EQ(*second.pool_rows[0].window.disk, 1.0);    // 10 / 10
  std::string text = FormatWatchReport(second, "t", 5);
  EXPECT_NE(text.find("mem_win"), std::string::npos) << text;
  EXPECT_NE(text.find("100.0%"), std::string::npos) << text;

  // Without a disk tier, its rate is undefined rather than 0.
  CacheWatch memory_only({"pool:9"});
  WatchReport r = memory_only.Update({PoolWorker(5, 5, 0, 0, 0)});
  EXPECT_FALSE(r.pool_rows[0].total.disk);
  EXPECT_DOUBLE_EQ(*r.pool_rows[0].total.combined, 0.5);
}

}  // namespace
}  // namespace tandem::ops
