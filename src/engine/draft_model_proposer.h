// DraftModelProposer: speculative decoding's `draft_model` method (vLLM's
// --speculative-config '{"method": "draft_model", "model": "draft.gguf", ...}'): a
// smaller model with the target's vocabulary proposes k tokens greedily; the engine
// verifies them in its next step (spec_decode.h).
//
// The draft keeps its own paged KV cache (its own arena and KvCacheManager, prefix
// caching on), sized to hold as many tokens as the target's cache. For each request it
// remembers which tokens its cache holds; a proposal first brings that cache up to the
// request's tokens (the longest common prefix is kept, the rest rolled back with
// FreeTail: rejected drafts, preemption, a new request), then runs k batched single-token
// steps over every proposing request. A request whose draft cache cannot grow (out of
// draft blocks) or whose context would pass the draft model's simply gets no proposal.
//
// Thread safety: engine thread only. The ThreadPool is borrowed and must be idle while
// Propose runs (the engine calls it between steps).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "model/forward.h"
#include "model/model.h"

namespace tandem {

class KvArena;
class ThreadPool;
struct Request;
namespace kv {
class KvCacheManager;
}

class DraftModelProposer {
 public:
  // Loads the draft GGUF at `path` and checks it against `target`: the same vocabulary
  // (size and every token's text), else InvalidArgument naming --speculative-config's
  // `model`. `num_kv_blocks` x `block_size` tokens of draft KV cache; `max_batch_tokens`
  // bounds one catch-up forward. `pool` is borrowed.
  static StatusOr<std::unique_ptr<DraftModelProposer>> Create(const std::string& path, const Model& target,
                                                              int64_t num_kv_blocks, int block_size,
                                                              int max_batch_tokens, ThreadPool* pool);
  ~DraftModelProposer();

  struct Slot {
    Request* request;  // sets request->spec_tokens (up to k tokens)
    int k;             // >= 1
  };
  // Greedy proposals for every slot, batched (see the top of this file).
  void Propose(const std::vector<Slot>& slots);
  // Forgets a finished request's draft cache. Unknown ids are ignored.
  void Release(const std::string& request_id);

  int context_length() const { return draft_->config().context_length; }
  const Model& model() const { return *draft_; }

 private:
  DraftModelProposer(std::unique_ptr<Model> draft, std::unique_ptr<KvArena> arena, int block_size,
                     int max_batch_tokens, ThreadPool* pool);
  struct Sequence {
    std::vector<int32_t> tokens;  // the tokens whose KV the draft cache holds, in order
  };
  // Brings each slot's draft cache to its request's tokens (all but the last, whose
  // logits the first draft step computes) and reserves room for `k` more; false (and
  // nothing reserved) when the draft cache is full.
  bool Prepare(const Slot& slot);
  int32_t Argmax(const float* row) const;

  std::unique_ptr<Model> draft_;
  std::unique_ptr<KvArena> arena_;
  std::unique_ptr<kv::KvCacheManager> kv_;
  Forward forward_;
  const int max_batch_tokens_;
  std::unordered_map<std::string, Sequence> sequences_;
  std::vector<float> logits_;  // [rows, n_vocab]
};

}  // namespace tandem
