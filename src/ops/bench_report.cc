#include "ops/bench_report.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace tandem::ops {
namespace {

using nlohmann::json;

std::string Line(const char* label, double value, int decimals) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%-40s %-10.*f\n", label, decimals, value);
  return buf;
}

std::string Line(const char* label, const std::string& value) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-40s %-10s\n", label, value.c_str());
  return buf;
}

std::string Banner(const std::string& title, char fill) {
  const int width = 50;
  const int left = (width - static_cast<int>(title.size())) / 2;
  const int right = width - static_cast<int>(title.size()) - left;
  return std::string(std::max(left, 0), fill) + title + std::string(std::max(right, 0), fill) +
         "\n";
}

std::string Section(const char* title, const char* name, const LatencySummary& s) {
  std::string out = Banner(title, '-');
  const std::string n(name);
  out += Line(("Mean " + n + " (ms):").c_str(), s.mean_ms, 2);
  out += Line(("Median " + n + " (ms):").c_str(), s.median_ms, 2);
  out += Line(("P90 " + n + " (ms):").c_str(), s.p90_ms, 2);
  out += Line(("P99 " + n + " (ms):").c_str(), s.p99_ms, 2);
  return out;
}

std::string Rate(const std::optional<double>& r) {
  if (!r) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", *r * 100);
  return buf;
}

json RateJson(const std::optional<double>& r) { return r ? json(*r) : json(nullptr); }

void AddSummary(json& j, const char* name, const LatencySummary& s) {
  const std::string n(name);
  j["mean_" + n + "_ms"] = s.mean_ms;
  j["median_" + n + "_ms"] = s.median_ms;
  j["std_" + n + "_ms"] = s.std_ms;
  j["p90_" + n + "_ms"] = s.p90_ms;
  j["p99_" + n + "_ms"] = s.p99_ms;
}

}  // namespace

std::string FormatBenchReport(const BenchReport& r) {
  const BenchMetrics& m = r.metrics;
  std::string out = Banner(" Serving Benchmark Result ", '=');
  out += Line("Workload:", std::string(WorkloadKindName(r.workload.kind)));
  out += Line("Successful requests:", std::to_string(m.completed));
  if (m.failed > 0) out += Line("Failed requests:", std::to_string(m.failed));
  if (r.run_options.max_concurrency > 0) {
    out += Line("Maximum request concurrency:", std::to_string(r.run_options.max_concurrency));
  }
  out += Line("Request rate configured (RPS):",
              std::isfinite(r.run_options.request_rate)
                  ? std::to_string(r.run_options.request_rate).substr(0, 8)
                  : std::string("inf"));
  out += Line("Benchmark duration (s):", m.duration_s, 2);
  out += Line("Total input tokens:", std::to_string(m.total_input_tokens));
  out += Line("Total generated tokens:", std::to_string(m.total_output_tokens));
  out += Line("Cached prompt tokens:", std::to_string(m.total_cached_tokens));
  out += Line("Prefix hit rate (%):", Rate(m.prefix_hit_rate));
  out += Line("Request throughput (req/s):", m.request_throughput, 2);
  if (m.request_goodput) out += Line("Request goodput (req/s):", *m.request_goodput, 2);
  out += Line("Output token throughput (tok/s):", m.output_throughput, 2);
  out += Line("Total Token throughput (tok/s):", m.total_token_throughput, 2);
  out += Section("Time to First Token", "TTFT", m.ttft);
  out += Section("Time per Output Token (excl. 1st token)", "TPOT", m.tpot);
  out += Section("Inter-token Latency", "ITL", m.itl);
  out += Section("End-to-end Latency", "E2EL", m.e2el);
  if (r.cache_increase) {
    const PrefixCacheCounters& c = *r.cache_increase;
    out += Banner("Prefix Cache (engine /metrics)", '-');
    out += Line("Local hit rate (%):", Rate(Ratio(c.local_hits_tokens, c.local_queries_tokens)));
    out += Line("Pool hit rate (%):", Rate(Ratio(c.ext_hits_tokens, c.ext_queries_tokens)));
    out += Line("Effective hit rate (%):",
                Rate(Ratio(c.local_hits_tokens + c.ext_hits_tokens, c.local_queries_tokens)));
  }
  out += std::string(50, '=') + "\n";
  return out;
}

std::string BenchReportJson(const BenchReport& r) {
  const BenchMetrics& m = r.metrics;
  const BenchRunOptions& o = r.run_options;
  json j;
  j["date"] = r.date;
  j["backend"] = IsChatEndpoint(o.target.endpoint) ? "openai-chat" : "openai";
  j["base_url"] = r.base_url;
  j["endpoint"] = o.target.endpoint;
  j["model_id"] = o.target.model;
  j["workload"] = {
      {"name", WorkloadKindName(r.workload.kind)}, {"input_len", r.workload.input_len},
      {"output_len", r.workload.output_len},       {"range_ratio", r.workload.range_ratio},
      {"prefix_len", r.workload.prefix_len},       {"num_prefixes", r.workload.num_prefixes},
      {"num_turns", r.workload.num_turns},         {"tokens_per_word", r.workload.tokens_per_word}};
  j["num_prompts"] = r.workload.num_prompts;
  j["request_rate"] = std::isfinite(o.request_rate) ? json(o.request_rate) : json("inf");
  j["burstiness"] = o.burstiness;
  j["max_concurrency"] = o.max_concurrency > 0 ? json(o.max_concurrency) : json(nullptr);
  j["seed"] = o.seed;
  j["duration"] = m.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input_tokens;
  j["total_output_tokens"] = m.total_output_tokens;
  j["total_cached_tokens"] = m.total_cached_tokens;
  j["prefix_hit_rate"] = RateJson(m.prefix_hit_rate);
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = m.request_goodput ? json(*m.request_goodput) : json(nullptr);
  json slos = json::object();
  if (r.slos.ttft_ms) slos["ttft"] = *r.slos.ttft_ms;
  if (r.slos.tpot_ms) slos["tpot"] = *r.slos.tpot_ms;
  if (r.slos.e2el_ms) slos["e2el"] = *r.slos.e2el_ms;
  j["goodput_slos_ms"] = slos;
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["max_in_flight"] = r.run.max_in_flight;
  json input_lens = json::array(), output_lens = json::array(), cached = json::array(),
       ttfts = json::array(), itls = json::array(), e2els = json::array(), errors = json::array(),
       texts = json::array(), groups = json::array();
  for (const RequestResult& res : r.run.results) {
    input_lens.push_back(res.prompt_tokens);
    output_lens.push_back(res.output_tokens);
    cached.push_back(res.cached_tokens);
    ttfts.push_back(res.ttft_s);
    itls.push_back(res.itl_s);
    e2els.push_back(res.latency_s);
    errors.push_back(res.error);
    texts.push_back(res.generated_text);
    groups.push_back(res.group);
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["cached_tokens"] = std::move(cached);
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["e2els"] = std::move(e2els);
  j["errors"] = std::move(errors);
  j["generated_texts"] = std::move(texts);
  j["groups"] = std::move(groups);  // shared-prefix group per request, -1 for none
  AddSummary(j, "ttft", m.ttft);
  AddSummary(j, "tpot", m.tpot);
  AddSummary(j, "itl", m.itl);
  AddSummary(j, "e2el", m.e2el);
  if (r.cache_increase) {
    const PrefixCacheCounters& c = *r.cache_increase;
    j["prefix_cache"] = {
        {"local_queries_tokens", c.local_queries_tokens},
        {"local_hits_tokens", c.local_hits_tokens},
        {"ext_queries_tokens", c.ext_queries_tokens},
        {"ext_hits_tokens", c.ext_hits_tokens},
        {"local_hit_rate", RateJson(Ratio(c.local_hits_tokens, c.local_queries_tokens))},
        {"pool_hit_rate", RateJson(Ratio(c.ext_hits_tokens, c.ext_queries_tokens))},
        {"effective_hit_rate",
         RateJson(Ratio(c.local_hits_tokens + c.ext_hits_tokens, c.local_queries_tokens))}};
  } else {
    j["prefix_cache"] = nullptr;
  }
  return j.dump(2);
}

}  // namespace tandem::ops
