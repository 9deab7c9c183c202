// EngineMetrics: the engine's vllm:* Prometheus series (labels model_name, engine) and
// its periodic stats log line in vLLM's wording ("Prefix cache hit rate: X%").
//
// Thread safety: engine thread only (the registry itself is thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "kv/kv_cache_manager.h"

namespace tandem {

class MetricsRegistry;
class Counter;
class Gauge;
class Histogram;
struct Request;

class EngineMetrics {
 public:
  // `registry` may be null (metrics off; the stats log line still works).
  // `engine_index` (EngineOptions::engine_index, the data-parallel rank) is the `engine`
  // label and the NNN of the "Engine NNN:" log line, as in vLLM.
  EngineMetrics(MetricsRegistry* registry, const std::string& model_name, int engine_index = 0);

  void OnPreemptions(int n);
  void OnTokensComputed(int prompt_tokens);  // prompt tokens run through the model this step
  void OnToken(Request* r);                  // one generated token (TTFT / inter-token latency)
  void OnFinished(const Request& r, const std::string& finish_reason);
  // The pool connector: a request's tokens looked up externally (once per request), and
  // blocks loaded from the pool, held by the local worker or fetched from another one.
  void OnExternalQuery(int tokens);
  // Blocks the pool had in its worker's memory (local), its disk tier, or another worker.
  void OnExternalHit(int tokens, int local_blocks, int disk_blocks, int remote_blocks);
  // Blocks the pool connector's saver handed to the pool, by outcome. Unlike the other
  // methods, callable from any thread (it only adds to registry counters).
  void AddPoolSaves(uint64_t stored, uint64_t existing, uint64_t dropped);
  // One KV pull from a producer (PD consumer); `used_shm`: through the same-host arena.
  void OnKvPull(bool ok, uint64_t bytes, double seconds, bool used_shm);
  void SetGauges(int running, int waiting, double kv_usage, const kv::PrefixCacheStats& prefix);
  // PD producer: prompts kept under a transfer lease (their blocks wait for a decoder).
  void SetKvLeases(size_t leases);
  // Expert parallelism, after a step: `idle` when this rank ran the dummy batch; the MoE
  // collectives' seconds and bytes sent so far (totals, from the forward pass).
  void OnExpertParallelStep(bool idle, double exchange_seconds, int64_t bytes_sent);
  // Logs a stats line at most every 10 s while there is work.
  void MaybeLogStats(int running, int waiting, double kv_usage, const kv::PrefixCacheStats& prefix);

 private:
  MetricsRegistry* registry_;
  std::string model_name_;
  int engine_index_;
  std::string engine_label_;  // engine_index_ as the `engine` label's value
  Counter* prompt_tokens_ = nullptr;
  Counter* generation_tokens_ = nullptr;
  Counter* preemptions_ = nullptr;
  Counter* prefix_queries_ = nullptr;
  Counter* prefix_hits_ = nullptr;
  Gauge* running_ = nullptr;
  Gauge* waiting_ = nullptr;
  Gauge* kv_usage_ = nullptr;
  Gauge* kv_leases_ = nullptr;
  Histogram* ttft_ = nullptr;
  Histogram* itl_ = nullptr;
  Histogram* e2e_ = nullptr;
  Histogram* request_prompt_tokens_ = nullptr;
  Histogram* request_generation_tokens_ = nullptr;
  Counter* external_queries_ = nullptr;
  Counter* external_hits_ = nullptr;
  Counter* pool_loaded_local_ = nullptr;
  Counter* pool_loaded_disk_ = nullptr;
  Counter* pool_loaded_remote_ = nullptr;
  Counter* pool_saved_ = nullptr;
  Counter* pool_save_existing_ = nullptr;
  Counter* pool_save_dropped_ = nullptr;
  int64_t external_queries_total_ = 0;
  int64_t external_hits_total_ = 0;
  int64_t window_ext_queries_start_ = 0;
  int64_t window_ext_hits_start_ = 0;
  Counter* ep_steps_ = nullptr;
  Counter* ep_idle_steps_ = nullptr;
  Counter* ep_exchange_seconds_ = nullptr;
  Counter* ep_bytes_sent_ = nullptr;
  double ep_seconds_seen_ = 0;
  int64_t ep_bytes_seen_ = 0;
  Counter* kv_pulls_ok_ = nullptr;
  Counter* kv_pulls_failed_ = nullptr;
  Counter* kv_pull_bytes_ = nullptr;
  Counter* kv_pulls_shm_ = nullptr;
  Histogram* kv_pull_seconds_ = nullptr;
  int64_t reported_queries_ = 0;
  int64_t reported_hits_ = 0;
  // Window for the stats log line.
  std::chrono::steady_clock::time_point window_start_ = std::chrono::steady_clock::now();
  int64_t window_prompt_tokens_ = 0;
  int64_t window_generation_tokens_ = 0;
  int64_t window_queries_start_ = 0;
  int64_t window_hits_start_ = 0;
};

}  // namespace tandem
