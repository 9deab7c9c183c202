// Scheduler: continuous batching with chunked prefill over the paged KV cache
// (vLLM v1's policy).
//
// Each step it spends a token budget (--max-num-batched-tokens): first one token for
// every running request that is decoding (or the next chunk of one still prefilling),
// in arrival order; then it admits waiting requests (prefix-cache hit first, then as
// much of the prompt as the budget allows) while fewer than --max-num-seqs run. When
// the cache has no blocks for a running request, the newest running request is
// preempted by recompute: its blocks are freed and it goes back to the front of the
// waiting queue (its generated tokens are kept and recomputed with the prompt).
// Running out of blocks is expected scarcity, never an error.
//
// Policies (--scheduling-policy, vLLM's): fcfs as above; priority keeps the waiting
// queue ordered by (priority, arrival) — lower priority values first — so admission
// follows it, and the preemption victim is the running request with the largest
// (priority, arrival), which goes back into the queue at its ordered place. Running
// requests are never preempted just to admit a waiting one (as vLLM v1).
//
// Thread safety: engine thread only.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "engine/kv_connector.h"
#include "engine/request.h"
#include "kv/kv_cache_manager.h"

namespace tandem {

struct ScheduledRequest {
  Request* request;
  int num_new_tokens;  // tokens to run this step, starting at request->num_computed_tokens
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  // Admitted requests whose KV beyond the local prefix hit a connector loads
  // (KvConnector::GetNumNewMatchedTokens > 0): their blocks are allocated,
  // num_computed_tokens is the local prefix hit, UpdateStateAfterAlloc was called, and
  // they wait (counted against max_num_seqs, using no token budget) until LoadFinished().
  std::vector<Request*> loads;
  // Preempted running requests handed back instead of re-queued (SetHandBack): their
  // blocks are freed and they are in no queue; the engine finishes them.
  std::vector<Request*> handed_back;
  int num_preempted = 0;
};

class Scheduler {
 public:
  using Policy = EngineOptions::SchedulingPolicy;
  Scheduler(kv::KvCacheManager* kv, int max_num_seqs, int max_num_batched_tokens,
            Policy policy = Policy::kFcfs);

  // To the back of the waiting queue (fcfs), or at its (priority, arrival_seq) place.
  void AddRequest(Request* request);
  // A forked choice of a parallel-sampling request (its blocks already allocated, its
  // prompt computed): runs from the next step on. Its seat was reserved when its
  // parent was admitted (a parent counts 1 + fork_children.size() against max_num_seqs).
  void AddRunning(Request* request);
  // Removes a request from the queues and frees its blocks (finish or abort).
  void FinishRequest(Request* request);
  // Removes a finished request from the queues but keeps its blocks (a producer parks
  // them for a decode instance; the engine frees them by id later).
  void DetachRequest(Request* request);
  // A load listed in SchedulerOutput::loads is over: the request runs from
  // `num_computed_tokens`.
  void LoadFinished(Request* request, int num_computed_tokens);

  SchedulerOutput Schedule();

  // The connector asked, for every admission of a request with no computed tokens,
  // how many tokens beyond the local prefix hit it can load (null = none). Borrowed.
  void SetConnector(KvConnector* connector) { connector_ = connector; }
  // vLLM-Ascend's recompute scheduler on a decode instance: a request preempted for
  // blocks is handed back (SchedulerOutput::handed_back) for another instance to
  // recompute, instead of waiting here to be recomputed.
  void SetHandBack(bool hand_back) { hand_back_ = hand_back; }

  // Running requests, in admission order (the engine proposes their drafts).
  const std::vector<Request*>& running() const { return running_; }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_loading() const { return static_cast<int>(loading_.size()); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }

 private:
  void Preempt(Request* request);
  // Seats taken against max_num_seqs: running and loading requests, plus the choices
  // that running requests will fork.
  int NumSeats() const;
  // Inserts into waiting_ at the request's place under the policy; `front` (fcfs only)
  // puts it first (a preempted request).
  void Enqueue(Request* request, bool front);
  // The running request to preempt when blocks run out.
  size_t VictimIndex() const;

  kv::KvCacheManager* kv_;
  int max_num_seqs_;
  int max_num_batched_tokens_;
  Policy policy_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // arrival (admission) order
  std::vector<Request*> loading_;  // admitted, waiting for a connector's load
  KvConnector* connector_ = nullptr;
  bool hand_back_ = false;
};

}  // namespace tandem
