#include "engine/choice_forker.h"

#include <optional>
#include <utility>

#include "engine/kv_arena.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/spec_decode.h"
#include "kv/kv_cache_manager.h"

namespace tandem {

void ChoiceForker::Fork(Request* r, const float* row, std::vector<SampleInput>* inputs) {
  for (Request* c : std::exchange(r->fork_children, {})) {
    c->fork_parent = nullptr;
    std::optional<kv::KvCacheManager::ForkCopy> copy = kv_->Fork(r->id, c->id, r->num_computed_tokens);
    if (!copy) {
      scheduler_->AddRequest(c);
      continue;
    }
    if (copy->copy_from >= 0) arena_->CopyBlock(copy->copy_from, copy->copy_to);
    c->num_computed_tokens = r->num_computed_tokens;
    c->num_cached_tokens = r->num_cached_tokens;
    if (spec_ != nullptr) spec_->OnFork(r->id, c->id);  // MTP: the choice drafts from the prompt's last hidden state
    scheduler_->AddRunning(c);
    rows_.emplace_back(row, row + n_vocab_);
    inputs->push_back({c, rows_.back().data(), {}});
  }
}

}  // namespace tandem
