// ModelRunner: one engine step's forward pass and sampling (vLLM's model runner): turns
// the scheduler's plan into a ragged batch over the paged KV cache — a prompt chunk, a
// decode token, or (speculative decoding) the last token followed by its drafts with
// every logits row — runs it, says where each request's logits rows are, and samples
// them (rejection_sampler.h: the tokens each request accepts, drafts verified).
//
// Thread safety: engine thread only. Row pointers stay valid until the next Run.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/rejection_sampler.h"
#include "engine/scheduler.h"
#include "model/forward.h"

namespace tandem {

class KvArena;
class ThreadPool;
class Tokenizer;

struct StepLogits {
  // Per scheduled request (same order): its first logits row ([n_vocab] floats; a
  // request with drafts has 1 + drafts rows one after another), or null when its chunk
  // ends inside the prompt.
  std::vector<float*> first_row;
  bool has_prompt_tokens = false;   // some request ran prompt tokens (not a pure decode step)
  std::vector<int> prompt_tokens;   // per scheduled request: prompt tokens it ran
  // With keep_hidden: the trunk's final hidden state of every batch token
  // ([batch tokens, n_embd]) and, per scheduled request, the row of its first token.
  const float* hidden = nullptr;
  std::vector<int64_t> first_token;
};

class ModelRunner {
 public:
  // All borrowed; they outlive the runner. `keep_hidden`: each Run also returns the
  // hidden states (MTP speculation needs them).
  ModelRunner(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool, KvArena* arena,
              const kv::KvCacheManager* kv, bool keep_hidden = false);

  StepLogits Run(const std::vector<ScheduledRequest>& scheduled);

  // The sampling stage over rows of the last Run (or copies of them), on the compute
  // threads: per input, the tokens its request accepts (SampleTokens).
  std::vector<SampledTokens> Sample(const std::vector<SampleInput>& inputs, const Tokenizer& tokenizer) {
    return SampleTokens(inputs, tokenizer, n_vocab_, pool_);
  }

  // Expert parallelism (see EngineOptions::expert_exchange): the MoE layers' group, and
  // an idle rank's turn in a step of its group (the dummy batch).
  void set_expert_exchange(ExpertExchange* exchange) { forward_.set_expert_exchange(exchange); }
  void RunExpertParallelIdle() { forward_.RunExpertParallelIdle(); }
  double expert_exchange_seconds() const { return forward_.expert_exchange_seconds(); }
  int64_t expert_exchange_bytes_sent() const { return forward_.expert_exchange_bytes_sent(); }

 private:
  Forward forward_;
  ThreadPool* pool_;
  KvArena* arena_;
  const kv::KvCacheManager* kv_;
  int32_t n_vocab_;
  bool keep_hidden_;
  std::vector<float> logits_;  // [rows, n_vocab]
  std::vector<float> hidden_;  // [batch tokens, n_embd] (keep_hidden)
};

}  // namespace tandem
