// Engine: the serving engine of one `tandem serve` instance — continuous batching over a
// paged KV cache with prefix caching, driven by one step-loop thread.
//
// Requests come in through AddRequest with already-tokenized prompts; their outputs go
// out through the request's callback, called on the engine thread after every step that
// produced something (incremental tokens, text deltas with stop strings handled,
// logprobs), and exactly once with finished = true. AbortRequest (e.g. on client
// disconnect) finishes a request with finish_reason "abort" and frees its KV blocks.
//
// Thread safety: every public method may be called from any thread, at any time until
// the engine is destroyed (each method says what it synchronises with); Shutdown may be
// called more than once and from several threads, and never races the other methods.
// Callbacks run on the engine thread and must not block (post work elsewhere).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/sampler.h"
#include "kernels/kv_dtype.h"

namespace tandem {

class ExpertExchange;
class KvConnector;
class Model;
struct KvConnectorContext;
class MetricsRegistry;
namespace kv {
class KvEventSink;
}
namespace grammar {
class GrammarAutomaton;
}

// The P->D transfer connector's part in this engine (docs/KV_TRANSFER.md).
struct KvTransferOptions {
  bool producer = false;           // keep do_remote_decode requests' blocks; serve them to D
  bool consumer = false;           // pull do_remote_prefill requests' blocks from P
  std::string engine_id;           // remote_engine_id in the answers
  std::string bind_host = "127.0.0.1";       // `tandem serve` passes --host
  std::string advertise_host = "127.0.0.1";  // remote_host in the answers
  int port = 0;                    // the producer's transfer port (0 = any free port)
  bool recompute_on_failure = true;  // kv_load_failure_policy: recompute | fail
  double lease_s = 30;
  double lease_cap_s = 480;        // VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT
  bool same_host_shm = true;       // memfd arena + unix socket for same-host pulls
  std::string auth_token;          // shared secret on every transfer connection (empty = none)
};

// The KV-pool connector (AscendStoreConnector; docs/POOL.md).
struct PoolOptions {
  bool enabled = false;
  std::string worker_address;  // empty = $DS_WORKER_ADDR
  int tp_rank = 0;
  bool save = true;            // write new full blocks to the pool (consumer_is_to_put on D)
  bool load = true;            // look up and load prefixes from the pool (consumer_is_to_load on D)
  bool load_async = false;     // load on a worker thread instead of in the step
  int64_t soft_pin_ttl_s = 0;  // soft-pin what was loaded from the pool (0 = off)
};

// kv_transfer_params, as P answers them and D receives them.
struct KvTransferParams {
  std::string remote_engine_id;
  std::string remote_request_id;
  std::string remote_host;
  int remote_port = 0;
  std::vector<int32_t> remote_block_ids;
  int remote_block_size = 0;
  int num_prompt_blocks = 0;
  int32_t last_token_id = -1;
};

// A request's kv_transfer_params, parsed once at the HTTP edge; it travels unchanged to
// the connectors (kv_connector.h).
struct KvTransferRequest {
  // PD: on a producer, keep the prompt's blocks for a decode instance when done.
  bool do_remote_decode = false;
  // PD: on a consumer, pull the prompt's blocks from this producer instead of computing.
  std::optional<KvTransferParams> remote_prefill;
};

// --speculative-config (vLLM's keys; spec_decode.h parses it).
struct SpeculativeOptions {
  enum class Method { kNone, kNgram, kDraftModel, kMtp };
  Method method = Method::kNone;
  std::string draft_model;         // draft_model: the draft GGUF's path ("model")
  int num_speculative_tokens = 0;  // drafts verified per step, [1, 16]
  int prompt_lookup_min = 5;       // ngram: shortest suffix matched
  int prompt_lookup_max = 5;       // ngram: longest suffix matched
};

struct EngineOptions {
  int block_size = 16;                 // tokens per KV block (--block-size)
  int64_t num_kv_blocks = 0;           // 0 = derive from kv_cache_bytes
  int64_t kv_cache_bytes = int64_t{1} << 30;  // --kv-cache-memory x --gpu-memory-utilization
  KvDtype kv_cache_dtype = KvDtype::kF16;     // --kv-cache-dtype (the cache's element type)
  int max_num_seqs = 256;              // --max-num-seqs
  int max_num_batched_tokens = 2048;   // --max-num-batched-tokens (per step)
  int max_model_len = 0;               // --max-model-len (0 = the model's context)
  // --enable-chunked-prefill / --no-enable-chunked-prefill: off, a prompt runs in one step
  // (it waits until the step's budget holds all of it; max_num_batched_tokens must then
  // be at least max_model_len).
  bool enable_chunked_prefill = true;
  int max_waiting = 1024;              // queue bound; AddRequest fails beyond it (-> HTTP 503)
  bool enable_prefix_caching = true;
  int threads = 0;                     // compute threads (0: one per cpu_ids core, else per core available)
  std::vector<int> cpu_ids;            // --cpu-affinity
  std::string model_name = "tandem";   // label `model_name` on metrics
  int engine_index = 0;                // --data-parallel-rank: label `engine`, "Engine NNN:" log line
  KvTransferOptions kv_transfer;
  PoolOptions pool;
  // Builds the KV connectors `kv_transfer` and `pool` ask for, once, at the engine's start
  // (kv_connector/kv_connector_factory.h's CreateKvConnector; the engine knows only
  // engine/kv_connector.h's interface). Null, or returning null: no connector, and
  // kv_transfer / pool have no effect.
  std::function<std::unique_ptr<KvConnector>(const KvConnectorContext&)> kv_connector_factory;
  // --additional-config recompute_scheduler_enable (vLLM-Ascend): on a KV consumer that
  // is not a producer, a request preempted for lack of blocks ends with finish_reason
  // "stop" and stop_reason "recomputed" (what it generated so far included), and the
  // proxy re-sends the rest through a prefill instance.
  bool recompute_scheduler = false;
  // --scheduling-policy (vLLM's): kFcfs admits in arrival order and preempts the newest
  // running request; kPriority admits by (priority, arrival) and preempts the running
  // request with the largest (priority, arrival). Under kFcfs a nonzero request
  // priority is refused (vLLM's rule).
  enum class SchedulingPolicy { kFcfs, kPriority };
  SchedulingPolicy scheduling_policy = SchedulingPolicy::kFcfs;
  // /health's watchdog (--health-watchdog-s): the engine reports itself stalled when work
  // is queued and no step completed for this long (Engine::Health).
  double health_watchdog_s = 60;
  // TEST ONLY (env TANDEM_FAULT_ENGINE_STEP_DELAY_MS in `tandem serve`): every step that
  // has work first sleeps this long, as a stuck loop would, so tests can watch /health.
  int fault_step_delay_ms = 0;
  SpeculativeOptions speculative;
  // KV cache events (--kv-events-config): the prefix cache reports to this sink on the
  // engine thread, and the engine closes one batch per step (EndStep). Null = none.
  // Not owned; must outlive the engine.
  kv::KvEventSink* kv_event_sink = nullptr;
  // Expert parallelism (--enable-expert-parallel over --data-parallel-size ranks): the
  // group this rank's MoE layers exchange tokens with; the model holds this rank's
  // experts (ModelLoadOptions::expert_shard). The engine loops of the group step in
  // lockstep: each step every rank says whether it has a batch (one all-reduce); when
  // any has, the idle ones run the dummy batch (Forward::RunExpertParallelIdle), so every
  // rank makes the same collectives. A failed collective (a rank gone) ends every request
  // with an error and /health reports it: the group is restarted as a whole.
  // Not owned; must outlive the engine. Null: one rank holds every expert.
  ExpertExchange* expert_exchange = nullptr;
};

// Per-request generation parameters (OpenAI / vLLM semantics).
struct GenerationParams {
  SamplingParams sampling;               // temperature, top_k, top_p, min_p, seed
  bool has_seed = false;                 // else a seed is drawn per request
  float presence_penalty = 0.0f;         // [-2, 2]
  float frequency_penalty = 0.0f;        // [-2, 2]
  float repetition_penalty = 1.0f;       // (0, 2]
  int max_tokens = 16;                   // >= 1 (clamped to fit the context)
  int min_tokens = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;         // stop strings (not in the output unless the next is set)
  bool include_stop_str_in_output = false;  // vLLM's: keep the matched stop string in the text
  std::vector<int32_t> stop_token_ids;
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the token's logit, [-100, 100]
  int logprobs = -1;                     // -1 = none; else top-N alternatives per token (0..20)
  bool skip_special_tokens = true;
  // Goes into every KV block hash of the request: only requests with the same salt share
  // prefix-cache blocks (vLLM's cache_salt; empty = the shared cache).
  std::string cache_salt;
  // vLLM's request priority: lower runs first (ties by arrival). Only with
  // --scheduling-policy priority; under fcfs a nonzero value is refused.
  int priority = 0;
  // Parallel sampling: choices generated for the prompt (1..max_num_seqs). With n > 1 the
  // engine runs child requests "<i>_<request_id>" (vLLM's ids; AbortRequest of the
  // request id aborts them all); the prompt is prefilled once and its KV forked to every
  // child (full blocks shared, the partial last block copied); each child draws its own
  // first token from the prompt's logits, with the seed `seed + i` (vLLM's rule) or, with
  // no seed, a seed of its own.
  int n = 1;
  // Test-only: when non-empty, these tokens are emitted in order instead of sampled
  // (the model still runs), and the request then stops with finish_reason "stop". Lets
  // tests drive the output parsers with exact model output on any model.
  std::vector<int32_t> scripted_tokens;
  // Structured outputs (grammar/): the output must be a sentence of this grammar (null =
  // unconstrained). The engine masks every draw, allows EOS only where the grammar may
  // end, and ends the request when it can take nothing more.
  std::shared_ptr<grammar::GrammarAutomaton> grammar;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // [logprobs] most likely tokens
};

struct RequestOutput {
  std::string request_id;
  int index = 0;                       // the choice (0..n-1) this output belongs to
  std::vector<int32_t> new_tokens;     // generated since the previous callback
  std::string new_text;                // their text (UTF-8 complete; stop strings removed)
  std::vector<TokenLogprob> new_logprobs;  // parallel to new_tokens when logprobs >= 0
  bool finished = false;
  std::string finish_reason;           // "stop" | "length" | "abort" | "error" (when finished)
  std::string stop_reason;             // the matched stop string, or the stop token id as text
  int prompt_tokens = 0;
  int completion_tokens = 0;           // total so far
  int cached_tokens = 0;               // prompt tokens served from the prefix cache
  Status error;                        // set when finish_reason == "error"
  // Producer only, on the final output of a do_remote_decode request: where its KV
  // blocks wait for the decode instance.
  std::optional<KvTransferParams> kv_transfer_params;
};

struct EngineRequest {
  std::string request_id;              // unique among live requests
  std::vector<int32_t> prompt_tokens;  // non-empty
  GenerationParams params;
  std::function<void(const RequestOutput&)> on_output;  // required
  KvTransferRequest kv_transfer;       // PD: what the proxy asked of this instance
};

// Whether the step loop is making progress (GET /health).
struct EngineHealth {
  bool healthy = true;
  std::string reason;              // why not, when !healthy
  double seconds_since_step = 0;   // since the last completed step (or since work arrived)
};

// A point-in-time view for /health and logs.
struct EngineSnapshot {
  int num_running = 0;
  int num_waiting = 0;
  double kv_cache_usage = 0;           // fraction of KV blocks in use
  int64_t num_kv_blocks = 0;
  int64_t max_tokens_in_cache = 0;
  int num_kept = 0;                    // producer: requests whose blocks are kept for a decoder's pull
  int compute_threads = 0;             // the forward's thread pool (EngineOptions::threads resolved)
};

class Engine {
 public:
  // Builds the KV arena, the scheduler and the step thread. `model` must outlive it.
  // `metrics` (may be null) receives the vllm:* series. InvalidArgument for options that
  // cannot run (NormalizeEngineOptions, kv_cache_utils.h).
  static StatusOr<std::unique_ptr<Engine>> Create(const Model& model, const EngineOptions& options,
                                                  MetricsRegistry* metrics);
  // Shuts down (if not yet) and frees everything.
  virtual ~Engine() = default;

  // Any thread. Queues a request (the engine thread takes it at its next step).
  // InvalidArgument if the prompt is empty or does not fit max_model_len, if params.n is
  // out of [1, max_num_seqs] or n > 1 comes with kv_transfer_params, or for a nonzero
  // priority under fcfs; AlreadyExists for a duplicate live id; ResourceExhausted when
  // the waiting queue is full; Unavailable after Shutdown.
  virtual Status AddRequest(EngineRequest request) = 0;

  // Any thread. Finishes the request with "abort" at the engine's next step (no-op if
  // unknown or already finished).
  virtual void AbortRequest(const std::string& request_id) = 0;

  // Any thread (the HTTP threads: the proxy's abort). Producer: ends the lease of a kept
  // request; its blocks are freed at the engine's next step. False if no such lease is
  // live. Still answers (false) after Shutdown.
  virtual bool ReleaseKvBlocks(const std::string& remote_request_id) = 0;

  // Any thread. Drops every prefix-cache entry (vLLM's POST /reset_prefix_cache) before
  // the engine's next step: requests added after this call never reuse blocks cached
  // before it. Running requests keep their blocks. Reported as AllBlocksCleared to the KV
  // event sink.
  virtual void ResetPrefixCache() = 0;

  // Any thread. Producer: the transfer server's port (0 when not a producer); fixed from
  // Create on.
  virtual int kv_transfer_port() const = 0;

  // Any thread: figures the engine thread published at its last step (atomics).
  virtual EngineSnapshot Snapshot() const = 0;

  // Any thread. Unhealthy when the step loop has exited (Shutdown), when the
  // expert-parallel group is broken, or when work is queued and no step completed within
  // options().health_watchdog_s (a stuck loop). An idle engine is healthy however long
  // ago its last step was.
  virtual EngineHealth Health() const = 0;
  // Any thread: the options after Create normalised them; never change.
  virtual const EngineOptions& options() const = 0;

  // Any thread, any number of times (a second call waits for the first to finish).
  // Aborts everything still running, stops the step thread, then the connectors' threads.
  virtual void Shutdown() = 0;
};

}  // namespace tandem
