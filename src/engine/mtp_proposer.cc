#include "engine/mtp_proposer.h"

#include <algorithm>

#include "common/logging.h"
#include "engine/kv_arena.h"
#include "engine/request.h"
#include "kv/kv_cache_manager.h"

namespace tandem {

MtpProposer::MtpProposer(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool, KvArena* arena,
                         const kv::KvCacheManager* kv)
    : c_(config), forward_(config, weights, pool), arena_(arena), kv_(kv) {}

void MtpProposer::Reserve(Request* r, int k) {
  const int64_t newest = static_cast<int64_t>(r->tokens.size()) - 1;
  const State& s = states_[r->id];
  if (s.last_pos != newest - 1 || s.last_h.empty()) return;  // h_{P-1} unknown: no drafts this step
  r->spec_tokens.assign(static_cast<size_t>(k), r->tokens.back());
}

void MtpProposer::RunBlock(const std::vector<ForwardSequence>& batch, const std::vector<float>& h,
                           bool want_hidden) {
  forward_.RunNextn(0, batch, h.data(), &logits_, want_hidden ? &hidden_ : nullptr);
}

void MtpProposer::FillDrafts(const std::vector<ScheduledRequest>& scheduled) {
  const int64_t E = c_.n_embd;
  std::vector<Request*> drafting;
  for (const ScheduledRequest& s : scheduled) {
    if (!s.request->spec_tokens.empty()) drafting.push_back(s.request);
  }
  if (drafting.empty()) return;
  std::vector<PagedKvStore> stores;
  stores.reserve(drafting.size());
  std::vector<std::vector<int32_t>> drafts(drafting.size());
  std::vector<std::vector<float>> prev_h(drafting.size());  // the block's last output per request
  for (size_t i = 0; i < drafting.size(); ++i) {
    stores.emplace_back(arena_, &kv_->GetBlockTable(drafting[i]->id));
    prev_h[i] = states_[drafting[i]->id].last_h;
  }
  std::vector<int32_t> inputs(drafting.size());
  for (size_t step = 0;; ++step) {
    std::vector<ForwardSequence> batch;
    std::vector<size_t> rows;
    h_in_.clear();
    for (size_t i = 0; i < drafting.size(); ++i) {
      Request* r = drafting[i];
      if (step >= r->spec_tokens.size()) continue;
      inputs[i] = step == 0 ? r->tokens.back() : drafts[i].back();
      ForwardSequence seq;
      seq.tokens = &inputs[i];
      seq.n_tokens = 1;
      seq.start_pos = static_cast<int64_t>(r->tokens.size()) - 1 + static_cast<int64_t>(step);
      seq.kv = &stores[i];
      batch.push_back(seq);
      rows.push_back(i);
      h_in_.insert(h_in_.end(), prev_h[i].begin(), prev_h[i].end());
    }
    if (batch.empty()) break;
    RunBlock(batch, h_in_, true);
    for (size_t j = 0; j < rows.size(); ++j) {
      const float* row = logits_.data() + j * c_.n_vocab;
      drafts[rows[j]].push_back(static_cast<int32_t>(std::max_element(row, row + c_.n_vocab) - row));
      prev_h[rows[j]].assign(hidden_.begin() + static_cast<int64_t>(j) * E, hidden_.begin() + (j + 1) * E);
    }
  }
  for (size_t i = 0; i < drafting.size(); ++i) drafting[i]->spec_tokens = std::move(drafts[i]);
}

void MtpProposer::AfterForward(const std::vector<ScheduledRequest>& scheduled, const float* hidden,
                               const std::vector<int64_t>& first_token) {
  const int64_t E = c_.n_embd;
  std::vector<PagedKvStore> stores;
  stores.reserve(scheduled.size());
  std::vector<std::vector<int32_t>> spec_inputs;  // [last token, drafts...] as the trunk ran them
  spec_inputs.reserve(scheduled.size());
  std::vector<ForwardSequence> batch;
  h_in_.clear();
  for (size_t i = 0; i < scheduled.size(); ++i) {
    const Request* r = scheduled[i].request;
    State& st = states_[r->id];
    stores.emplace_back(arena_, &kv_->GetBlockTable(r->id));
    ForwardSequence seq;
    seq.tokens = r->tokens.data() + r->num_computed_tokens;
    seq.n_tokens = scheduled[i].num_new_tokens;
    seq.start_pos = r->num_computed_tokens;
    seq.kv = &stores.back();
    seq.want_logits = false;
    if (!r->spec_tokens.empty()) {
      spec_inputs.emplace_back(1, r->tokens.back());
      spec_inputs.back().insert(spec_inputs.back().end(), r->spec_tokens.begin(), r->spec_tokens.end());
      seq.tokens = spec_inputs.back().data();
    }
    batch.push_back(seq);
    // Token t of the chunk pairs with the trunk's hidden state of the position before.
    if (st.last_pos == seq.start_pos - 1 && !st.last_h.empty()) {
      h_in_.insert(h_in_.end(), st.last_h.begin(), st.last_h.end());
    } else {
      h_in_.insert(h_in_.end(), E, 0.0f);
    }
    const float* rows = hidden + first_token[i] * E;
    h_in_.insert(h_in_.end(), rows, rows + (seq.n_tokens - 1) * E);
    if (r->spec_tokens.empty()) {
      st.last_h.assign(rows + (seq.n_tokens - 1) * E, rows + seq.n_tokens * E);
      st.last_pos = seq.start_pos + seq.n_tokens - 1;
      st.verify_rows = nullptr;
    } else {
      st.verify_rows = rows;  // which row holds depends on the verification (OnVerified)
      st.last_pos = -1;
    }
  }
  if (!batch.empty()) RunBlock(batch, h_in_, false);
}

void MtpProposer::Fork(const std::string& parent, const std::string& child) {
  auto it = states_.find(parent);
  if (it == states_.end()) return;
  State copy = it->second;
  copy.verify_rows = nullptr;
  states_[child] = std::move(copy);
}

void MtpProposer::OnVerified(const Request& r, int accepted) {
  auto it = states_.find(r.id);
  if (it == states_.end() || it->second.verify_rows == nullptr) return;
  State& st = it->second;
  const int64_t E = c_.n_embd;
  // The last token and `accepted` drafts were real: the newest computed position's row.
  st.last_h.assign(st.verify_rows + accepted * E, st.verify_rows + (accepted + 1) * E);
  st.last_pos = r.num_computed_tokens - 1;
  st.verify_rows = nullptr;
}

}  // namespace tandem
