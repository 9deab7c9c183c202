#include "engine/draft_model_proposer.h"

#include <algorithm>

#include "common/logging.h"
#include "engine/kv_arena.h"
#include "engine/request.h"
#include "kernels/sampling_ops.h"
#include "kv/kv_cache_manager.h"

namespace tandem {
namespace {

// Why `draft` cannot propose for `target`, or "" when the vocabularies are the same.
std::string VocabularyMismatch(const Model& draft, const Model& target) {
  const Vocab& d = draft.tokenizer().vocab();
  const Vocab& t = target.tokenizer().vocab();
  if (draft.config().n_vocab != target.config().n_vocab || d.size() != t.size()) {
    return "has a vocabulary of " + std::to_string(draft.config().n_vocab) + " logits / " +
           std::to_string(d.size()) + " tokens, the target " + std::to_string(target.config().n_vocab) + " / " +
           std::to_string(t.size());
  }
  for (int32_t i = 0; i < d.size(); ++i) {
    if (d.tokens[i] != t.tokens[i]) {
      return "differs from the target's vocabulary at token " + std::to_string(i) + " (\"" + d.tokens[i] +
             "\" vs \"" + t.tokens[i] + "\")";
    }
  }
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<DraftModelProposer>> DraftModelProposer::Create(const std::string& path,
                                                                        const Model& target, int64_t num_kv_blocks,
                                                                        int block_size, int max_batch_tokens,
                                                                        ThreadPool* pool) {
  auto draft = Model::Load(path);
  if (!draft.ok()) {
    return InvalidArgumentError("--speculative-config: model " + path + ": " + draft.status().message());
  }
  if (std::string why = VocabularyMismatch(**draft, target); !why.empty()) {
    return InvalidArgumentError("--speculative-config: model " + path + " " + why +
                                "; a draft model must share the target's vocabulary");
  }
  const ModelConfig& c = (*draft)->config();
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<KvArena> arena,
      KvArena::Create(num_kv_blocks, c.n_layers, block_size, c.KeyRowBytes(KvDtype::kF16),
                      c.ValueRowBytes(KvDtype::kF16), KvDtype::kF16, false));
  TANDEM_LOG(INFO) << "draft model " << (*draft)->name() << " (" << path << "): " << c.n_layers << " layers, KV cache "
                   << num_kv_blocks << " blocks of " << arena->block_bytes() << " bytes";
  return std::unique_ptr<DraftModelProposer>(
      new DraftModelProposer(std::move(*draft), std::move(arena), block_size, max_batch_tokens, pool));
}

DraftModelProposer::DraftModelProposer(std::unique_ptr<Model> draft, std::unique_ptr<KvArena> arena, int block_size,
                                       int max_batch_tokens, ThreadPool* pool)
    : draft_(std::move(draft)),
      arena_(std::move(arena)),
      kv_(std::make_unique<kv::KvCacheManager>(kv::KvCacheConfig{static_cast<int32_t>(arena_->num_blocks()),
                                                                 block_size, true, draft_->fingerprint(), "f16"})),
      forward_(draft_->config(), draft_->weights(), pool),
      max_batch_tokens_(std::max(1, max_batch_tokens)) {}

DraftModelProposer::~DraftModelProposer() = default;

void DraftModelProposer::Release(const std::string& request_id) {
  if (sequences_.erase(request_id) > 0) kv_->Free(request_id);
}

bool DraftModelProposer::Prepare(const Slot& slot) {
  const Request& r = *slot.request;
  const int n = static_cast<int>(r.tokens.size());
  if (n + slot.k - 1 > context_length()) return false;
  auto it = sequences_.find(r.id);
  if (it == sequences_.end()) {
    // A prefix another request left in the draft cache is reused (capped below n - 1).
    const kv::ComputedBlocks hit = kv_->GetComputedBlocks(r.id, r.tokens, r.params.cache_salt);
    const int cached = hit.num_computed_tokens;
    if (!kv_->AllocateSlots(r.id, cached, n - cached + slot.k - 1, hit)) {
      kv_->Free(r.id);
      return false;
    }
    sequences_[r.id].tokens.assign(r.tokens.begin(), r.tokens.begin() + cached);
    return true;
  }
  // Keep the longest common prefix (the rejected drafts and anything else go), but
  // always recompute the last token: its logits give the first draft.
  std::vector<int32_t>& held = it->second.tokens;
  const size_t common = std::mismatch(held.begin(), held.end(), r.tokens.begin(), r.tokens.end()).first - held.begin();
  const int keep = std::min(static_cast<int>(common), n - 1);
  kv_->FreeTail(r.id, keep);
  held.resize(keep);
  return kv_->AllocateSlots(r.id, keep, n - keep + slot.k - 1).has_value();
}

int32_t DraftModelProposer::Argmax(const float* row) const {
  return static_cast<int32_t>(ArgmaxIndex(row, draft_->config().n_vocab));  // std::max_element's pick
}

void DraftModelProposer::Propose(const std::vector<Slot>& slots) {
  std::vector<Slot> active;
  for (const Slot& s : slots) {
    if (Prepare(s)) active.push_back(s);
  }
  if (active.empty()) return;
  std::vector<std::vector<int32_t>> drafts(active.size());
  std::vector<PagedKvStore> stores;
  stores.reserve(active.size());
  for (const Slot& s : active) stores.emplace_back(arena_.get(), &kv_->GetBlockTable(s.request->id));

  // Catch-up: each draft cache reaches its request's tokens; the chunk that ends at the
  // last token yields the first draft. Batches of at most max_batch_tokens_ tokens.
  std::vector<int> done(active.size());  // tokens of the request in the draft cache
  for (size_t i = 0; i < active.size(); ++i) done[i] = static_cast<int>(sequences_[active[i].request->id].tokens.size());
  for (bool pending = true; pending;) {
    pending = false;
    std::vector<ForwardSequence> batch;
    std::vector<size_t> with_logits;
    int budget = max_batch_tokens_;
    for (size_t i = 0; i < active.size(); ++i) {
      const Request& r = *active[i].request;
      const int left = static_cast<int>(r.tokens.size()) - done[i];
      if (left == 0) continue;
      if (budget == 0) {
        pending = true;
        continue;
      }
      ForwardSequence seq;
      seq.tokens = r.tokens.data() + done[i];
      seq.n_tokens = std::min(left, budget);
      seq.start_pos = done[i];
      seq.kv = &stores[i];
      seq.want_logits = seq.n_tokens == left;
      if (seq.want_logits) with_logits.push_back(i);
      budget -= seq.n_tokens;
      done[i] += seq.n_tokens;
      pending = pending || !seq.want_logits;
      batch.push_back(seq);
    }
    if (batch.empty()) break;
    forward_.Run(batch, &logits_);
    for (size_t j = 0; j < with_logits.size(); ++j) {
      drafts[with_logits[j]].push_back(Argmax(logits_.data() + j * draft_->config().n_vocab));
    }
  }
  // Draft steps 2..k: one token per proposing request per forward.
  std::vector<int32_t> inputs(active.size());
  for (int step = 1;; ++step) {
    std::vector<ForwardSequence> batch;
    std::vector<size_t> rows;
    for (size_t i = 0; i < active.size(); ++i) {
      if (static_cast<int>(drafts[i].size()) != step || step >= active[i].k) continue;
      inputs[i] = drafts[i].back();
      ForwardSequence seq;
      seq.tokens = &inputs[i];
      seq.n_tokens = 1;
      seq.start_pos = static_cast<int64_t>(active[i].request->tokens.size()) + step - 1;
      seq.kv = &stores[i];
      batch.push_back(seq);
      rows.push_back(i);
    }
    if (batch.empty()) break;
    forward_.Run(batch, &logits_);
    for (size_t j = 0; j < rows.size(); ++j) {
      drafts[rows[j]].push_back(Argmax(logits_.data() + j * draft_->config().n_vocab));
    }
  }
  for (size_t i = 0; i < active.size(); ++i) {
    Request* r = active[i].request;
    const int n = static_cast<int>(r->tokens.size());
    // The cache now holds the request's tokens and every draft but the last. Only the
    // request's own tokens (before the last, so no later catch-up writes into a shared
    // block) enter the draft's prefix cache.
    std::vector<int32_t>& held = sequences_[r->id].tokens;
    held.assign(r->tokens.begin(), r->tokens.end());
    held.insert(held.end(), drafts[i].begin(), drafts[i].end() - 1);
    kv_->CacheComputedBlocks(r->id, r->tokens, n - 1);
    r->spec_tokens = std::move(drafts[i]);
  }
}

}  // namespace tandem
