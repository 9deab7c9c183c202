// ModelRunner: one engine step's forward pass (vLLM's model runner): turns the
// scheduler's plan into a ragged batch over the paged KV cache — a prompt chunk, a
// decode token, or (speculative decoding) the last token followed by its drafts with
// every logits row — runs it, and says where each request's logits rows are.
//
// Thread safety: engine thread only. Row pointers stay valid until the next Run.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/scheduler.h"
#include "model/forward.h"

namespace tandem {

class KvArena;
class ThreadPool;

struct StepLogits {
  // Per scheduled request (same order): its first logits row ([n_vocab] floats; a
  // request with drafts has 1 + drafts rows one after another), or null when its chunk
  // ends inside the prompt.
  std::vector<float*> first_row;
  bool has_prompt_tokens = false;   // some request ran prompt tokens (not a pure decode step)
  std::vector<int> prompt_tokens;   // per scheduled request: prompt tokens it ran
};

class ModelRunner {
 public:
  // All borrowed; they outlive the runner.
  ModelRunner(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool, KvArena* arena,
              const kv::KvCacheManager* kv);

  StepLogits Run(const std::vector<ScheduledRequest>& scheduled);

 private:
  Forward forward_;
  KvArena* arena_;
  const kv::KvCacheManager* kv_;
  int32_t n_vocab_;
  std::vector<float> logits_;  // [rows, n_vocab]
};

}  // namespace tandem
