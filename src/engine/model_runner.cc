#include "engine/model_runner.h"

#include <algorithm>

#include "engine/kv_arena.h"
#include "engine/request.h"

namespace tandem {

ModelRunner::ModelRunner(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool, KvArena* arena,
                         const kv::KvCacheManager* kv, bool keep_hidden)
    : forward_(config, weights, pool), pool_(pool), arena_(arena), kv_(kv), n_vocab_(config.n_vocab), keep_hidden_(keep_hidden) {}

StepLogits ModelRunner::Run(const std::vector<ScheduledRequest>& scheduled) {
  StepLogits out;
  out.first_row.assign(scheduled.size(), nullptr);
  out.prompt_tokens.assign(scheduled.size(), 0);
  out.first_token.assign(scheduled.size(), 0);
  int64_t batch_tokens = 0;
  std::vector<PagedKvStore> stores;
  stores.reserve(scheduled.size());
  std::vector<std::vector<int32_t>> spec_inputs;  // [last token, drafts...] per request with drafts
  spec_inputs.reserve(scheduled.size());
  std::vector<ForwardSequence> batch;
  std::vector<int64_t> row_of(scheduled.size(), -1);
  int64_t rows = 0;
  for (size_t i = 0; i < scheduled.size(); ++i) {
    const ScheduledRequest& s = scheduled[i];
    const Request* r = s.request;
    stores.emplace_back(arena_, &kv_->GetBlockTable(r->id));
    ForwardSequence seq;
    seq.tokens = r->tokens.data() + r->num_computed_tokens;
    seq.n_tokens = s.num_new_tokens;
    seq.start_pos = r->num_computed_tokens;
    seq.kv = &stores.back();
    seq.want_logits = r->num_computed_tokens + s.num_new_tokens >= static_cast<int>(r->tokens.size());
    if (!r->spec_tokens.empty()) {
      // One row per position: the last token's successor and each draft's.
      spec_inputs.emplace_back(1, r->tokens.back());
      spec_inputs.back().insert(spec_inputs.back().end(), r->spec_tokens.begin(), r->spec_tokens.end());
      seq.tokens = spec_inputs.back().data();
      seq.all_logits = true;
    }
    out.first_token[i] = batch_tokens;
    batch_tokens += seq.n_tokens;
    if (seq.want_logits) {
      row_of[i] = rows;
      rows += seq.all_logits ? seq.n_tokens : 1;
    }
    batch.push_back(seq);
    if (r->num_computed_tokens < r->prompt_len) {
      out.prompt_tokens[i] = std::min(s.num_new_tokens, r->prompt_len - r->num_computed_tokens);
      out.has_prompt_tokens = true;
    }
  }
  forward_.Run(batch, &logits_, keep_hidden_ ? &hidden_ : nullptr);
  if (keep_hidden_) out.hidden = hidden_.data();
  for (size_t i = 0; i < scheduled.size(); ++i) {
    if (row_of[i] >= 0) out.first_row[i] = logits_.data() + row_of[i] * n_vocab_;
  }
  return out;
}

}  // namespace tandem
