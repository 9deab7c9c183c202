// KvConnector: how KV cache moves between this engine and the outside — a producer's
// kept prompts, a consumer's pulls from a producer, the KV pool — behind one
// interface modelled on vLLM v1's KVConnectorBase_V1 (vllm/distributed/kv_transfer/
// kv_connector/v1/base.py). The engine loop knows nothing of any particular connector.
//
// Scheduler side (what vLLM runs in the scheduler process):
//   GetNumNewMatchedTokens  a waiting request with a local prefix hit of N tokens: how
//                           many more tokens can the connector load into its blocks?
//   UpdateStateAfterAlloc   the blocks for those tokens are allocated: remember the load.
//   RequestFinished         the request is done: keep its blocks (a producer keeps them
//                           for a decode instance) and the kv_transfer_params to answer.
// Worker side (what vLLM runs in the model runner):
//   StartLoadKv             start the loads remembered this step (asynchronously or not).
//   SaveKv                  after a forward pass: the request's blocks up to its
//                           num_computed_tokens hold computed KV (the pool saves them).
//   GetFinished             loads that completed, and kept requests whose blocks may
//                           now be freed (vLLM's finished_recving / finished_sending).
//
// A request that GetNumNewMatchedTokens matched waits (RequestStatus::kWaitingForRemoteKvs,
// holding its blocks and a max_num_seqs slot, using no token budget) until GetFinished
// reports its KvLoadResult. A load is always reported, also after CancelLoad (the engine
// frees the blocks only then, so no load ever writes into freed blocks).
//
// Per-request connector state (what was pulled, what was saved) lives in the
// connector, keyed by request id, and is dropped in RequestFinished.
//
// Thread safety: every method is called on the engine thread only, except where a
// method says otherwise. Connectors may run their own threads; they call
// KvConnectorContext::wake (thread-safe) when GetFinished has something new.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "transfer/kv_memory.h"

namespace tandem {

class EngineMetrics;
struct Request;
namespace kv {
class KvCacheManager;
}

// What a connector gets from the engine. Pointers are borrowed and outlive the connector.
struct KvConnectorContext {
  const EngineOptions* options = nullptr;
  transfer::KvMemory memory;                 // the KV arena's blocks
  std::string model_fingerprint;             // identifies weights + tokenizer
  const kv::KvCacheManager* kv = nullptr;    // block tables and block hashes (engine thread)
  EngineMetrics* metrics = nullptr;          // engine thread only (see engine_metrics.h)
  std::function<void()> wake;                // wakes the step loop; callable from any thread
};

// One finished load (GetFinished).
struct KvLoadResult {
  std::string request_id;
  // Leading prompt tokens whose KV is now in the request's blocks (the local prefix hit
  // plus what was loaded). The engine resumes the request from here (less one token
  // when nothing would be left to compute).
  int num_loaded_tokens = 0;
  // Count the loaded tokens as prefix-cache hits (cached_tokens in the usage).
  bool counts_as_cached = false;
  // The first output token, drawn by whoever computed the prompt (PD: the producer);
  // -1 = none. The engine continues after it when the request lets it.
  int32_t first_token = -1;
  // Set when the request must fail (kv_load_failure_policy "fail").
  Status error;
};

// What happens to a finished request's blocks (RequestFinished).
struct KvFinishAction {
  bool keep_blocks = false;  // the connector holds them; GetFinished names the id when freeable
  std::optional<KvTransferParams> kv_transfer_params;  // for the final output
};

class KvConnector {
 public:
  virtual ~KvConnector() = default;

  // Starts servers and threads. Called once, before any other method.
  virtual Status Start() { return Status::Ok(); }
  // Stops threads and servers; in-flight loads are abandoned. Called once, after the
  // engine thread stopped.
  virtual void Stop() {}

  // Any thread, before the request is queued: drops the parts of `kv_transfer` this
  // connector cannot honour (with a log line saying why); the request then computes
  // locally. `n_prompt`: prompt tokens.
  virtual void AcceptRequest(KvTransferRequest* kv_transfer, int n_prompt) const = 0;

  // ---- Scheduler side ----
  // Tokens past `num_computed_tokens` (the local prefix hit, block aligned) this connector
  // can load into the request's blocks; 0 = none. Called for a waiting request about to be
  // admitted with no computed tokens of its own (first admission, or after a preemption).
  virtual int GetNumNewMatchedTokens(const Request& r, int num_computed_tokens) = 0;
  // The request's block table now covers `num_computed_tokens + num_external_tokens`
  // tokens (the latter from GetNumNewMatchedTokens): the connector remembers the load.
  virtual void UpdateStateAfterAlloc(const Request& r, int num_computed_tokens, int num_external_tokens) = 0;
  // The request finished for `reason` ("stop", "length", "abort", "error"). Called for
  // every request exactly once, while its blocks are still allocated.
  virtual KvFinishAction RequestFinished(const Request& r, std::string_view reason) = 0;

  // ---- Worker side ----
  virtual void StartLoadKv() = 0;
  // After each forward pass, for every request in it.
  virtual void SaveKv(const Request& r) = 0;
  // Appends loads that completed and ids of kept requests whose blocks may be freed now
  // (all of them when `stopping`).
  virtual void GetFinished(bool stopping, std::vector<KvLoadResult>* loads, std::vector<std::string>* freeable) = 0;
  // The request was aborted while its load runs: end the load early. Its KvLoadResult
  // still comes through GetFinished.
  virtual void CancelLoad(const std::string& request_id) = 0;

  // The next time GetFinished may have something without a wake (a lease expiring).
  virtual std::optional<std::chrono::steady_clock::time_point> NextDeadline() const { return std::nullopt; }
  // Any thread: ends the lease of a kept request (the proxy's abort). False if none.
  virtual bool ReleaseKvBlocks(const std::string& /*remote_request_id*/) { return false; }
  // Any thread: the producer's transfer port (0 if not a producer).
  virtual int kv_transfer_port() const { return 0; }
  // Requests whose blocks the connector keeps (engine thread).
  virtual int num_kept() const { return 0; }
};

}  // namespace tandem
