// Request: the engine's state for one generation request (scheduler + output side).
//
// Thread safety: owned and touched only by the engine thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "engine/generator.h"
#include "engine/grammar_constraint.h"
#include "engine/sampler.h"
#include "engine/spec_decode.h"

namespace tandem {

// kWaitingForRemoteKvs: admitted, its blocks allocated, waiting for a connector's load
// (kv_connector.h); it uses no token budget until the load is reported.
enum class RequestStatus { kWaiting, kWaitingForRemoteKvs, kRunning, kFinished };

struct Request {
  using Clock = std::chrono::steady_clock;

  explicit Request(EngineRequest r, uint64_t seed)
      : id(std::move(r.request_id)),
        params(std::move(r.params)),
        on_output(std::move(r.on_output)),
        sampler(WithSeed(params.sampling, seed)),
        prompt_len(static_cast<int>(r.prompt_tokens.size())),
        kv_transfer(std::move(r.kv_transfer)),
        tokens(std::move(r.prompt_tokens)),
        arrival(Clock::now()) {}

  static SamplingParams WithSeed(SamplingParams p, uint64_t seed) {
    p.seed = seed;
    return p;
  }

  int num_output_tokens() const { return static_cast<int>(tokens.size()) - prompt_len; }
  bool prefill_done() const { return num_computed_tokens >= static_cast<int>(tokens.size()) - 1; }

  std::string id;
  GenerationParams params;
  std::function<void(const RequestOutput&)> on_output;
  Sampler sampler;
  int prompt_len;
  // PD (docs/KV_TRANSFER.md): what the proxy asked of this instance; read by the connectors.
  const KvTransferRequest kv_transfer;
  bool abort_after_load = false;      // aborted while waiting for a connector's load
  std::vector<int32_t> tokens;        // prompt followed by generated tokens
  int num_computed_tokens = 0;        // tokens whose KV is in the cache
  // Speculative decoding: draft tokens to verify after tokens.back() this step (never
  // part of `tokens`; the scheduler trims them to its budget), and the acceptance record.
  std::vector<int32_t> spec_tokens;
  SpecAdaptivity spec_adaptivity;
  int num_cached_tokens = -1;         // prompt tokens served by the prefix cache (first schedule)
  int max_tokens = 0;                 // after clamping to the context
  RequestStatus status = RequestStatus::kWaiting;
  std::unordered_map<int32_t, int> output_counts;  // token -> occurrences in the output
  std::unique_ptr<GrammarConstraint> constraint;   // structured outputs (null = none)

  // Output side: text produced but not yet sent (held back while it may start a stop string).
  Utf8Stream utf8;
  std::string pending_text;
  std::vector<int32_t> pending_tokens;
  std::vector<TokenLogprob> pending_logprobs;
  std::string stop_reason;            // matched stop string or stop token id

  // Parallel sampling (GenerationParams::n > 1). Choice 0 prefills the prompt; the other
  // choices wait in `fork_children` (in no scheduler queue, `fork_parent` set) until the
  // step that completes the prompt forks its KV to them.
  int choice_index = 0;
  std::string family_id;               // the client's request id (n > 1), else empty
  Request* fork_parent = nullptr;
  std::vector<Request*> fork_children;

  Clock::time_point arrival;
  uint64_t arrival_seq = 0;           // the engine's arrival counter (ties in priority order)
  Clock::time_point first_token_time;
  Clock::time_point last_token_time;
  bool has_first_token = false;
};

}  // namespace tandem
