#include "engine/scheduler.h"

#include <algorithm>

#include "common/logging.h"

namespace tandem {

namespace {

// vLLM's priority order: lower priority value first, then earlier arrival.
bool RunsBefore(const Request* a, const Request* b) {
  if (a->params.priority != b->params.priority) return a->params.priority < b->params.priority;
  return a->arrival_seq < b->arrival_seq;
}

}  // namespace

Scheduler::Scheduler(kv::KvCacheManager* kv, int max_num_seqs, int max_num_batched_tokens,
                     Policy policy, bool enable_chunked_prefill)
    : kv_(kv),
      max_num_seqs_(max_num_seqs),
      max_num_batched_tokens_(max_num_batched_tokens),
      policy_(policy),
      enable_chunked_prefill_(enable_chunked_prefill) {}

void Scheduler::AddRequest(Request* request) {
  request->status = RequestStatus::kWaiting;
  Enqueue(request, /*front=*/false);
}

void Scheduler::Enqueue(Request* request, bool front) {
  if (policy_ == Policy::kFcfs) {
    if (front) {
      waiting_.push_front(request);
    } else {
      waiting_.push_back(request);
    }
    return;
  }
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), request, RunsBefore), request);
}

size_t Scheduler::VictimIndex() const {
  TANDEM_CHECK(!running_.empty());
  if (policy_ == Policy::kFcfs) return running_.size() - 1;
  size_t worst = 0;
  for (size_t i = 1; i < running_.size(); ++i) {
    if (RunsBefore(running_[worst], running_[i])) worst = i;
  }
  return worst;
}

void Scheduler::AddRunning(Request* request) {
  request->status = RequestStatus::kRunning;
  running_.push_back(request);
}

int Scheduler::NumSeats() const {
  int seats = static_cast<int>(running_.size() + loading_.size());
  for (const Request* r : running_) seats += static_cast<int>(r->fork_children.size());
  return seats;
}

KvFinishAction Scheduler::FinishRequest(Request* request, std::string_view reason) {
  // The connector's promise: its blocks are still allocated while it decides.
  KvFinishAction action = connector_ != nullptr ? connector_->RequestFinished(*request, reason) : KvFinishAction{};
  DetachRequest(request);
  if (!action.keep_blocks) kv_->Free(request->id);
  return action;
}

void Scheduler::FreeKept(const std::string& request_id) { kv_->Free(request_id); }

void Scheduler::DetachRequest(Request* request) {
  if (auto it = std::find(running_.begin(), running_.end(), request); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), request); it != waiting_.end()) waiting_.erase(it);
  if (auto it = std::find(loading_.begin(), loading_.end(), request); it != loading_.end()) loading_.erase(it);
  request->status = RequestStatus::kFinished;
}

void Scheduler::LoadFinished(Request* request, int num_computed_tokens) {
  if (auto it = std::find(loading_.begin(), loading_.end(), request); it != loading_.end()) loading_.erase(it);
  request->num_computed_tokens = num_computed_tokens;
  request->status = RequestStatus::kRunning;
  running_.push_back(request);
}

void Scheduler::Preempt(Request* request) {
  kv_->Free(request->id);
  request->spec_tokens.clear();
  request->num_computed_tokens = 0;
  request->status = RequestStatus::kWaiting;
  Enqueue(request, /*front=*/true);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  int budget = max_num_batched_tokens_;

  // 1. Running requests, oldest first; preempt a victim (VictimIndex) when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* r = running_[i];
    const int remaining =
        static_cast<int>(r->tokens.size() + r->spec_tokens.size()) - r->num_computed_tokens;
    const int n = std::min(remaining, budget);
    // Drafts that do not fit the budget are dropped (vLLM's num_tokens_with_spec).
    r->spec_tokens.resize(static_cast<size_t>(
        std::max(0, n - (static_cast<int>(r->tokens.size()) - r->num_computed_tokens))));
    if (n <= 0) {
      ++i;
      continue;
    }
    bool scheduled = false;
    while (true) {
      if (kv_->AllocateSlots(r->id, r->num_computed_tokens, n)) {
        scheduled = true;
        break;
      }
      // Out of blocks: free the victim (possibly r itself).
      const size_t v = VictimIndex();
      Request* victim = running_[v];
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(v));
      if (v < i) --i;  // (priority) a request already scheduled this step
      // A victim scheduled earlier in this step loses its slot in the batch too.
      out.scheduled.erase(std::remove_if(out.scheduled.begin(), out.scheduled.end(),
                                         [&](const ScheduledRequest& s) {
                                           if (s.request != victim) return false;
                                           budget += s.num_new_tokens;
                                           return true;
                                         }),
                          out.scheduled.end());
      if (hand_back_) {
        out.handed_back.emplace_back(victim, FinishRequest(victim, "stop"));
      } else {
        Preempt(victim);
      }
      ++out.num_preempted;
      if (victim == r) break;
    }
    if (!scheduled) break;  // r itself was preempted: as vLLM, no more running requests this step
    out.scheduled.push_back({r, n});
    budget -= n;
    ++i;
  }

  // 2. Waiting requests, in order, while there is room. Nothing is admitted in a step
  // that had to preempt: the freed blocks go to the requests already running.
  while (out.num_preempted == 0 && !waiting_.empty() && budget > 0) {
    Request* r = waiting_.front();
    // A parallel-sampling request needs seats for the choices it will fork.
    if (NumSeats() + 1 + static_cast<int>(r->fork_children.size()) > max_num_seqs_) break;
    kv::ComputedBlocks hit;
    if (r->num_computed_tokens == 0) hit = kv_->GetComputedBlocks(r->id, r->tokens, r->params.cache_salt);
    const int computed = hit.num_computed_tokens;
    const int external =
        connector_ != nullptr && r->num_computed_tokens == 0 ? connector_->GetNumNewMatchedTokens(*r, computed) : 0;
    if (external > 0) {
      // Slots for every token; the connector fills the `external` ones after the hit.
      const int total = static_cast<int>(r->tokens.size());
      if (!kv_->AllocateSlots(r->id, computed, total - computed, hit)) break;
      waiting_.pop_front();
      r->num_computed_tokens = computed;
      if (r->num_cached_tokens < 0) r->num_cached_tokens = std::min(computed, r->prompt_len);
      r->status = RequestStatus::kWaitingForRemoteKvs;
      connector_->UpdateStateAfterAlloc(*r, computed, external);
      loading_.push_back(r);
      out.loads.push_back(r);
      continue;
    }
    const int remaining = static_cast<int>(r->tokens.size()) - computed;
    if (!enable_chunked_prefill_ && remaining > budget) break;  // the whole prompt or nothing
    const int n = std::min(remaining, budget);
    if (!kv_->AllocateSlots(r->id, computed, n, hit)) break;
    waiting_.pop_front();
    r->num_computed_tokens = computed;
    if (r->num_cached_tokens < 0) r->num_cached_tokens = std::min(computed, r->prompt_len);
    r->status = RequestStatus::kRunning;
    running_.push_back(r);
    out.scheduled.push_back({r, n});
    budget -= n;
  }
  return out;
}

void Scheduler::UpdateAfterForward(const std::vector<ScheduledRequest>& scheduled) {
  for (const ScheduledRequest& s : scheduled) {
    Request* r = s.request;
    if (!r->spec_tokens.empty()) continue;  // its KV counts only once verified
    r->num_computed_tokens += s.num_new_tokens;
    kv_->CacheComputedBlocks(r->id, r->tokens, r->num_computed_tokens);
    if (connector_ != nullptr) connector_->SaveKv(*r);
  }
}

void Scheduler::UpdateAfterVerification(Request* r, int num_true_tokens, bool finishing) {
  r->spec_tokens.clear();
  r->num_computed_tokens += num_true_tokens;
  kv_->CacheComputedBlocks(r->id, r->tokens, r->num_computed_tokens);
  if (connector_ != nullptr) connector_->SaveKv(*r);
  if (!finishing) kv_->FreeTail(r->id, static_cast<int32_t>(r->tokens.size()));  // the rejected drafts' slots
}

LoadOutcome Scheduler::UpdateFromLoad(Request* r, const KvLoadResult& load, bool first_token_ok) {
  const int n_tokens = static_cast<int>(r->tokens.size());
  if (!load.error.ok() && !r->abort_after_load) {
    LoadFinished(r, r->num_computed_tokens);
    return LoadOutcome::kFailed;
  }
  const int loaded = std::min(load.num_loaded_tokens, n_tokens);
  kv_->CacheComputedBlocks(r->id, r->tokens, loaded);
  if (load.counts_as_cached) r->num_cached_tokens = std::max(r->num_cached_tokens, std::min(loaded, r->prompt_len));
  if (loaded < n_tokens || !first_token_ok || r->abort_after_load) {
    // At least the last token is computed here: its logits draw the next token.
    LoadFinished(r, std::min(loaded, n_tokens - 1));
    return r->abort_after_load ? LoadOutcome::kAborted : LoadOutcome::kResumed;
  }
  LoadFinished(r, loaded);
  r->sampler.Skip();  // the producer drew the first token with the request's seed
  return LoadOutcome::kFirstTokenAccepted;
}

}  // namespace tandem
