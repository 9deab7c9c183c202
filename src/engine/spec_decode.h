// Speculative decoding (vLLM's --speculative-config): the config parser and the ngram
// (prompt lookup) proposer.
//
// How the engine uses a proposal: a decoding request with drafts d_1..d_k runs its last
// token and the k drafts in one forward pass (all k+1 logits rows); row i is sampled
// exactly as a non-speculative step would sample it (logits processors with the output
// so far, the request's sampler and RNG); the token is emitted; if it differs from
// d_{i+1} the rest is dropped. With a draft that is a single proposed token (ngram), this
// IS rejection sampling: the draft is accepted with probability p(d) and otherwise a
// token comes from p with d excluded, renormalized — the target distribution either way.
// Since every emitted token consumes one draw of the request's RNG, as without
// speculation, a seeded request produces the same tokens with and without it.
//
// Thread safety: pure functions; an NgramProposer is a value.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"

namespace tandem {

class DraftModelProposer;
class KvArena;
class MetricsRegistry;
class Model;
class ThreadPool;
class MtpProposer;
class SpecDecodeMetrics;
struct Request;
struct ScheduledRequest;
struct StepLogits;
namespace kv {
class KvCacheManager;
}

// Parses the JSON of --speculative-config. Empty = off. InvalidArgument naming the key
// for an unknown method, num_speculative_tokens outside [1, 16], prompt lookup bounds
// that are not 1 <= min <= max, or a draft model path that does not exist. The MTP
// family (mtp, deepseek_mtp, glm4_moe_mtp, ...) is kMtp (Engine::Create checks that the
// model has NextN layers). `*unsupported` is set for keys accepted but not honoured.
StatusOr<SpeculativeOptions> ParseSpeculativeConfig(const std::string& json, std::string* unsupported);

// Prompt lookup: the longest suffix of `tokens` (between min and max tokens) that also
// occurs earlier; proposes up to `k` tokens that followed its earliest occurrence (as vLLM's
// NgramProposer).
class NgramProposer {
 public:
  NgramProposer(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {}
  std::vector<int32_t> Propose(std::span<const int32_t> tokens, int k) const;

 private:
  int min_n_;
  int max_n_;
};

// Per-request acceptance bookkeeping that turns speculation off while it does not pay:
// after a window of drafted tokens with an acceptance rate below kMinAcceptance, the
// request stops proposing for a cooling-off period (then tries again).
class SpecAdaptivity {
 public:
  static constexpr double kMinAcceptance = 0.25;
  static constexpr int kWindowTokens = 16;
  static constexpr int kCoolOffSteps = 32;

  bool ShouldPropose();  // call once per decode step; false while cooling off
  void Record(int drafted, int accepted);

 private:
  int window_drafted_ = 0;
  int window_accepted_ = 0;
  int cool_off_ = 0;
};

// Engine-wide: whether drafting pays on this machine for this workload. Verifying k
// drafts costs more than one token (on a CPU the LM head of a large vocabulary is
// compute-bound), so acceptance alone does not say. Compares the seconds per emitted
// token of recent decode-only steps with drafts and without (moving averages); while
// drafting is the slower, it is off, with a probe of kProbeSteps drafting steps every
// kOffSteps. Every kOffSteps drafting steps, kProbeSteps go without, so both averages
// stay current. Each turn off or on is logged (INFO) with the figures that decided it.
class SpecController {
 public:
  static constexpr int kOffSteps = 64;
  static constexpr int kProbeSteps = 4;

  bool ShouldDraft() const;
  // One decode-only step (no prompt tokens): whether it verified drafts, the tokens it
  // emitted and its duration.
  void OnDecodeStep(bool drafted, int tokens, double seconds);
  // A verification of `drafted` drafts, `accepted` of them kept (for the log line).
  void OnVerified(int drafted, int accepted);

 private:
  double with_ = 0;     // seconds per token, steps with drafts (0 = none yet)
  double without_ = 0;  // seconds per token, steps without drafts
  int phase_ = 0;       // steps into the current on/off period
  bool on_ = true;
  int64_t period_drafted_ = 0;   // draft tokens verified in the current period
  int64_t period_accepted_ = 0;  // of them accepted
};

// The engine's side of speculative decoding: drafts for the requests about to decode,
// and what verification reports (metrics, per-request adaptivity, the engine-wide
// controller). Engine thread only.
class SpecDecoder {
 public:
  // `options.method` != kNone. `draft` is the draft_model proposer, `mtp` the MTP one
  // (null otherwise). `registry` may be null. `engine_index`: the metrics' `engine` label.
  // The speculation `options.speculative` asks for (method != kNone) on an engine's model,
  // arena, cache and compute threads (all borrowed; they outlive it): the draft model is
  // loaded (its errors returned), the MTP proposer built over the NextN block.
  static StatusOr<std::unique_ptr<SpecDecoder>> Create(const EngineOptions& options, const Model& model,
                                                       KvArena* arena, kv::KvCacheManager* kv,
                                                       ThreadPool* threads, MetricsRegistry* registry);
  SpecDecoder(const SpeculativeOptions& options, int max_model_len, std::unique_ptr<DraftModelProposer> draft,
              std::unique_ptr<MtpProposer> mtp, MetricsRegistry* registry, const std::string& model_name,
              int engine_index = 0);
  ~SpecDecoder();

  // Before scheduling: sets Request::spec_tokens of each running request that decodes
  // its next token this step (never past its max_tokens or the context), unless drafting
  // is off (MTP: placeholders the scheduler budgets; AfterSchedule fills them).
  void Propose(const std::vector<Request*>& running);
  // After scheduling (MTP: the drafts of the requests that kept placeholders).
  void AfterSchedule(const std::vector<ScheduledRequest>& scheduled);
  // After the step's forward pass, before its blocks are cached or saved (MTP: the
  // NextN block's rows for the positions just computed).
  void AfterForward(const std::vector<ScheduledRequest>& scheduled, const StepLogits& logits);
  bool wants_hidden() const { return mtp_ != nullptr; }
  // A request ended: its proposer state (the draft model's cache) goes.
  void OnFinished(const std::string& request_id);
  // n > 1: `child` took a copy of `parent`'s prompt KV (MTP: and its last hidden state).
  void OnFork(const std::string& parent, const std::string& child);
  // A verification of `drafted` drafts of `r`, `accepted` of them kept. `r` may be
  // finished (null): only the metrics count it then.
  void OnVerified(Request* r, int drafted, int accepted);
  void OnDecodeStep(bool drafted, int tokens, double seconds) { controller_.OnDecodeStep(drafted, tokens, seconds); }
  void MaybeLog();

 private:
  const int num_speculative_tokens_;
  const int max_model_len_;
  NgramProposer proposer_;
  std::unique_ptr<DraftModelProposer> draft_;  // draft_model (else null)
  std::unique_ptr<MtpProposer> mtp_;           // MTP (else null)
  SpecController controller_;
  std::unique_ptr<SpecDecodeMetrics> metrics_;
};

}  // namespace tandem
