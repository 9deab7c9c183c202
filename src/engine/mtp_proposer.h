// MtpProposer: speculative decoding with the model's own NextN (multi-token prediction)
// block — vLLM's `mtp` / `deepseek_mtp` / `glm4_moe_mtp` methods, as the GLM-5
// deployment guides run it (`--speculative-config '{"num_speculative_tokens": 3, "method": "deepseek_mtp"}'`).
//
// The NextN block is one more transformer block with its own attention, so its K/V rows
// live in the request's paged KV blocks as one more layer (layer n_layers of the arena):
// prefix caching, PD transfer and the pool carry them with the trunk's (the engine marks
// such blocks with ":mtp" in the model fingerprint). Position p of the block takes
// (token x_p, the trunk's hidden state h_{p-1}) as llama.cpp's MTP graph pairs them.
//
// Per engine step:
//   1. Reserve (before scheduling): a decoding request whose h_{P-1} is known (P = the
//      position of its newest token) gets k placeholder drafts, so the scheduler
//      budgets and allocates slots for them (or trims them).
//   2. FillDrafts (after scheduling): draft 1 = argmax of the block at P with
//      (x_P, h_{P-1}); draft i = the block at P + i - 1 with (draft i-1, the block's own
//      previous output) — the one block reused for every step, as vLLM does when
//      num_speculative_tokens exceeds the file's NextN layers.
//   3. AfterForward (after the trunk's forward, before any block is cached or saved):
//      the block runs over every position the trunk just computed, so its K/V rows are
//      those of the real tokens; the trunk's last hidden state is kept per request (for a
//      request that verified drafts, the one after its last accepted draft: OnVerified).
// A chunk whose previous position was not computed here (a prefix-cache hit, KV pulled
// from a prefill instance) starts with a zero hidden state, as llama.cpp starts a
// sequence: only that position's draft quality suffers, never an output.
//
// Thread safety: engine thread only; the ThreadPool is borrowed and idle between calls.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/scheduler.h"
#include "model/forward.h"

namespace tandem {

class KvArena;
class ThreadPool;
struct Request;
namespace kv {
class KvCacheManager;
}

class MtpProposer {
 public:
  // The model must have NextN weights (config.n_nextn_layers > 0, weights.nextn bound);
  // every block of `arena` has n_layers + 1 layers. All borrowed.
  MtpProposer(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool, KvArena* arena,
              const kv::KvCacheManager* kv);

  // Step 1: k placeholder drafts for `r` (decoding, k >= 1) when its h_{P-1} is known.
  void Reserve(Request* r, int k);
  // Step 2: the drafts of every scheduled request that kept placeholders.
  void FillDrafts(const std::vector<ScheduledRequest>& scheduled);
  // Step 3: `hidden` is the trunk's [batch tokens, n_embd] output for `scheduled` (same
  // order as ModelRunner ran it; `first_token[i]` = row of request i's first token).
  // Valid until the engine's next forward.
  void AfterForward(const std::vector<ScheduledRequest>& scheduled, const float* hidden,
                    const std::vector<int64_t>& first_token);
  // After VerifyDrafts: `accepted` drafts of `r` were kept.
  void OnVerified(const Request& r, int accepted);
  void Release(const std::string& request_id) { states_.erase(request_id); }
  // n > 1: `child` continues from a copy of `parent`'s KV, so from its hidden state too.
  void Fork(const std::string& parent, const std::string& child);

 private:
  struct State {
    std::vector<float> last_h;  // [n_embd] trunk hidden state of position last_pos
    int64_t last_pos = -1;
    const float* verify_rows = nullptr;  // this step's rows of a verifying request
  };
  // Runs the block over `batch` with one hidden row per token (`h`, [tokens, n_embd]);
  // fills logits_ / hidden_ as Forward::RunNextn.
  void RunBlock(const std::vector<ForwardSequence>& batch, const std::vector<float>& h, bool want_hidden);

  const ModelConfig& c_;
  Forward forward_;
  KvArena* arena_;
  const kv::KvCacheManager* kv_;
  std::unordered_map<std::string, State> states_;
  std::vector<float> h_in_, logits_, hidden_;
};

}  // namespace tandem
