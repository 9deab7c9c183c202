#include "engine/engine_metrics.h"

#include <cstdio>

#include "common/logging.h"
#include "common/metrics.h"
#include "engine/request.h"

namespace tandem {
namespace {

const std::vector<double> kLatencyBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                             0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kTokenBuckets = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000,
                                           20000, 50000, 100000};

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

EngineMetrics::EngineMetrics(MetricsRegistry* registry, const std::string& model_name, int engine_index)
    : registry_(registry), model_name_(model_name), engine_index_(engine_index), engine_label_(std::to_string(engine_index)) {
  if (registry_ == nullptr) return;
  const MetricLabels labels = {{"model_name", model_name}, {"engine", engine_label_}};
  prompt_tokens_ = registry_->GetCounter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels);
  generation_tokens_ = registry_->GetCounter("vllm:generation_tokens", "Number of generation tokens processed.", labels);
  preemptions_ = registry_->GetCounter("vllm:num_preemptions", "Cumulative number of preemptions.", labels);
  prefix_queries_ = registry_->GetCounter("vllm:prefix_cache_queries",
                                          "Prefix cache queries, in terms of number of queried tokens.", labels);
  prefix_hits_ = registry_->GetCounter("vllm:prefix_cache_hits",
                                       "Prefix cache hits, in terms of number of cached tokens.", labels);
  running_ = registry_->GetGauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels);
  waiting_ = registry_->GetGauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels);
  kv_usage_ = registry_->GetGauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels);
  kv_leases_ = registry_->GetGauge("tandem_kv_transfer_leases",
                                   "Prefilled prompts whose KV blocks are held for a decoder's pull.", labels);
  ttft_ = registry_->GetHistogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                                  kLatencyBuckets, labels);
  itl_ = registry_->GetHistogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                                 kLatencyBuckets, labels);
  e2e_ = registry_->GetHistogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                                 kLatencyBuckets, labels);
  request_prompt_tokens_ = registry_->GetHistogram("vllm:request_prompt_tokens",
                                                   "Number of prefill tokens processed.", kTokenBuckets, labels);
  request_generation_tokens_ = registry_->GetHistogram(
      "vllm:request_generation_tokens", "Number of generation tokens processed.", kTokenBuckets, labels);
  external_queries_ = registry_->GetCounter(
      "vllm:external_prefix_cache_queries",
      "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
      labels);
  external_hits_ = registry_->GetCounter(
      "vllm:external_prefix_cache_hits",
      "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
      labels);
  const char* loaded_help = "KV blocks loaded from the pool, by where the pool held them.";
  pool_loaded_local_ = registry_->GetCounter("tandem_pool_connector_blocks_loaded", loaded_help,
                                             {{"model_name", model_name}, {"engine", engine_label_}, {"source", "local"}});
  pool_loaded_disk_ = registry_->GetCounter("tandem_pool_connector_blocks_loaded", loaded_help,
                                            {{"model_name", model_name}, {"engine", engine_label_}, {"source", "disk"}});
  pool_loaded_remote_ = registry_->GetCounter("tandem_pool_connector_blocks_loaded", loaded_help,
                                              {{"model_name", model_name}, {"engine", engine_label_}, {"source", "remote"}});
  const char* saved_help = "KV blocks handed to the pool, by outcome.";
  pool_saved_ = registry_->GetCounter("tandem_pool_connector_blocks_saved", saved_help,
                                      {{"model_name", model_name}, {"engine", engine_label_}, {"outcome", "stored"}});
  pool_save_existing_ = registry_->GetCounter("tandem_pool_connector_blocks_saved", saved_help,
                                              {{"model_name", model_name}, {"engine", engine_label_}, {"outcome", "exists"}});
  pool_save_dropped_ = registry_->GetCounter("tandem_pool_connector_blocks_saved", saved_help,
                                             {{"model_name", model_name}, {"engine", engine_label_}, {"outcome", "dropped"}});
  kv_pulls_ok_ = registry_->GetCounter("tandem_kv_transfer_pulls", "KV pulls from prefill instances, by result.",
                                      {{"model_name", model_name}, {"engine", engine_label_}, {"result", "ok"}});
  kv_pulls_failed_ = registry_->GetCounter("tandem_kv_transfer_pulls", "KV pulls from prefill instances, by result.",
                                          {{"model_name", model_name}, {"engine", engine_label_}, {"result", "failed"}});
  kv_pull_bytes_ = registry_->GetCounter("tandem_kv_transfer_pull_bytes", "Bytes of KV pulled from prefill instances.",
                                        labels);
  kv_pulls_shm_ = registry_->GetCounter("tandem_kv_transfer_shm_pulls",
                                       "KV pulls read from the producer's shared-memory arena (same host).", labels);
  kv_pull_seconds_ = registry_->GetHistogram("tandem_kv_transfer_pull_seconds", "Duration of one KV pull in seconds.",
                                             kLatencyBuckets, labels);
  // Create the finish-reason series up front so dashboards see zeros.
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    registry_->GetCounter("vllm:request_success", "Count of successfully processed requests.",
                          {{"model_name", model_name}, {"engine", engine_label_}, {"finished_reason", reason}});
  }
}

void EngineMetrics::OnPreemptions(int n) {
  if (n > 0 && preemptions_) preemptions_->Add(n);
}

void EngineMetrics::OnTokensComputed(int prompt_tokens) {
  window_prompt_tokens_ += prompt_tokens;
  if (prompt_tokens_ && prompt_tokens > 0) prompt_tokens_->Add(prompt_tokens);
}

void EngineMetrics::OnToken(Request* r) {
  const auto now = std::chrono::steady_clock::now();
  ++window_generation_tokens_;
  if (generation_tokens_) generation_tokens_->Add(1);
  if (!r->has_first_token) {
    r->has_first_token = true;
    r->first_token_time = now;
    if (ttft_) ttft_->Observe(Seconds(now - r->arrival));
  } else if (itl_) {
    itl_->Observe(Seconds(now - r->last_token_time));
  }
  r->last_token_time = now;
}

void EngineMetrics::OnFinished(const Request& r, const std::string& finish_reason) {
  if (registry_ == nullptr) return;
  registry_->GetCounter("vllm:request_success", "Count of successfully processed requests.",
                        {{"model_name", model_name_}, {"engine", engine_label_}, {"finished_reason", finish_reason}})
      ->Add(1);
  e2e_->Observe(Seconds(std::chrono::steady_clock::now() - r.arrival));
  request_prompt_tokens_->Observe(r.prompt_len);
  request_generation_tokens_->Observe(r.num_output_tokens());
}

void EngineMetrics::SetKvLeases(size_t leases) {
  if (registry_ != nullptr) kv_leases_->Set(static_cast<double>(leases));
}

void EngineMetrics::SetGauges(int running, int waiting, double kv_usage, const kv::PrefixCacheStats& prefix) {
  if (registry_ == nullptr) return;
  running_->Set(running);
  waiting_->Set(waiting);
  kv_usage_->Set(kv_usage);
  prefix_queries_->Add(static_cast<double>(prefix.queries_tokens - reported_queries_));
  prefix_hits_->Add(static_cast<double>(prefix.hits_tokens - reported_hits_));
  reported_queries_ = prefix.queries_tokens;
  reported_hits_ = prefix.hits_tokens;
}

void EngineMetrics::MaybeLogStats(int running, int waiting, double kv_usage, const kv::PrefixCacheStats& prefix) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = Seconds(now - window_start_);
  if (elapsed < 10.0) return;
  const bool had_work = window_prompt_tokens_ > 0 || window_generation_tokens_ > 0 || running > 0 || waiting > 0;
  if (had_work) {
    const int64_t queries = prefix.queries_tokens - window_queries_start_;
    const int64_t hits = prefix.hits_tokens - window_hits_start_;
    const int64_t ext_queries = external_queries_total_ - window_ext_queries_start_;
    const int64_t ext_hits = external_hits_total_ - window_ext_hits_start_;
    char line[512];
    std::snprintf(line, sizeof(line),
                  "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
                  "Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%, "
                  "External prefix cache hit rate: %.1f%%",
                  engine_index_, window_prompt_tokens_ / elapsed, window_generation_tokens_ / elapsed, running, waiting,
                  100.0 * kv_usage, queries > 0 ? 100.0 * hits / queries : 0.0,
                  ext_queries > 0 ? 100.0 * ext_hits / ext_queries : 0.0);
    TANDEM_LOG(INFO) << line;
  }
  window_start_ = now;
  window_prompt_tokens_ = 0;
  window_generation_tokens_ = 0;
  window_queries_start_ = prefix.queries_tokens;
  window_hits_start_ = prefix.hits_tokens;
  window_ext_queries_start_ = external_queries_total_;
  window_ext_hits_start_ = external_hits_total_;
}

void EngineMetrics::OnExternalQuery(int tokens) {
  external_queries_total_ += tokens;
  if (registry_ != nullptr) external_queries_->Add(tokens);
}

void EngineMetrics::OnExternalHit(int tokens, int local_blocks, int disk_blocks, int remote_blocks) {
  external_hits_total_ += tokens;
  if (registry_ == nullptr) return;
  external_hits_->Add(tokens);
  pool_loaded_local_->Add(local_blocks);
  pool_loaded_disk_->Add(disk_blocks);
  pool_loaded_remote_->Add(remote_blocks);
}

void EngineMetrics::AddPoolSaves(uint64_t stored, uint64_t existing, uint64_t dropped) {
  if (registry_ == nullptr) return;
  if (stored > 0) pool_saved_->Add(static_cast<double>(stored));
  if (existing > 0) pool_save_existing_->Add(static_cast<double>(existing));
  if (dropped > 0) pool_save_dropped_->Add(static_cast<double>(dropped));
}

void EngineMetrics::OnKvPull(bool ok, uint64_t bytes, double seconds, bool used_shm) {
  if (registry_ == nullptr) return;
  (ok ? kv_pulls_ok_ : kv_pulls_failed_)->Add();
  if (ok) {
    if (used_shm) kv_pulls_shm_->Add();
    kv_pull_bytes_->Add(static_cast<double>(bytes));
    kv_pull_seconds_->Observe(seconds);
  }
}

void EngineMetrics::OnExpertParallelStep(bool idle, double exchange_seconds, int64_t bytes_sent) {
  if (registry_ == nullptr) return;
  if (ep_steps_ == nullptr) {  // created on the first step: only expert-parallel engines have them
    const MetricLabels labels = {{"model_name", model_name_}, {"engine", engine_label_}};
    ep_steps_ = registry_->GetCounter("tandem_expert_parallel_steps",
                                      "Steps of this rank's expert-parallel group with a batch of its own.", labels);
    ep_idle_steps_ = registry_->GetCounter(
        "tandem_expert_parallel_idle_steps",
        "Steps this rank ran the dummy batch (no tokens of its own; serving the other ranks' experts).", labels);
    ep_exchange_seconds_ = registry_->GetCounter(
        "tandem_expert_parallel_exchange_seconds",
        "Seconds in the MoE dispatch/combine collectives (all-to-all), waiting on other ranks included.", labels);
    ep_bytes_sent_ = registry_->GetCounter("tandem_expert_parallel_bytes_sent",
                                           "Bytes this rank sent to other ranks in the MoE all-to-alls.", labels);
  }
  (idle ? ep_idle_steps_ : ep_steps_)->Add();
  ep_exchange_seconds_->Add(exchange_seconds - ep_seconds_seen_);
  ep_bytes_sent_->Add(static_cast<double>(bytes_sent - ep_bytes_seen_));
  ep_seconds_seen_ = exchange_seconds;
  ep_bytes_seen_ = bytes_sent;
}

}  // namespace tandem
