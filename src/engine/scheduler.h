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
// After the step's forward pass the scheduler takes its output (vLLM's
// update_from_output): the computed tokens of each request, the caching of its computed
// blocks and the connector's saves (UpdateAfterForward; UpdateAfterVerification for a
// request with drafts, by the tokens it accepted), the connector's load results
// (UpdateFromLoad), and the end of a request (FinishRequest: the connector decides
// while its blocks are still allocated whether it keeps them).
//
// Ownership: the engine core owns every Request (its request table) from admission
// until the request's final output is delivered; the scheduler borrows the pointers in
// its queues. A pointer it returns (scheduled, loads, handed_back) is valid until the
// engine core finishes that request, which it does only after FinishRequest (or, for a
// handed-back request, after Schedule) took it out of every queue.
//
// Without chunked prefill (--no-enable-chunked-prefill) a waiting request is admitted
// only when the rest of its prompt fits the step's remaining budget, so every prompt
// runs in one step (vLLM's rule; the options ensure the budget holds max_model_len).
//
// Thread safety: engine thread only.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kv_connector.h"
#include "engine/request.h"
#include "kv/kv_cache_manager.h"

namespace tandem {

struct ScheduledRequest {
  Request* request;
  int num_new_tokens;  // tokens to run this step, starting at request->num_computed_tokens
};

// What a finished load did to its request (UpdateFromLoad).
enum class LoadOutcome {
  kResumed,             // it runs from the loaded tokens on
  kFailed,              // the load failed (policy "fail"): the engine finishes it with the error
  kAborted,             // it was aborted while loading: the engine finishes it with "abort"
  kFirstTokenAccepted,  // it runs on after the producer's first token, which the engine emits
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  // Admitted requests whose KV beyond the local prefix hit a connector loads
  // (KvConnector::GetNumNewMatchedTokens > 0): their blocks are allocated,
  // num_computed_tokens is the local prefix hit, UpdateStateAfterAlloc was called, and
  // they wait (counted against max_num_seqs, using no token budget) until LoadFinished().
  std::vector<Request*> loads;
  // Preempted running requests handed back instead of re-queued (SetHandBack): each was
  // finished with reason "stop" (FinishRequest: the connector's action is here, the
  // blocks it did not keep are free) and is in no queue; the engine delivers its end.
  std::vector<std::pair<Request*, KvFinishAction>> handed_back;
  int num_preempted = 0;
};

class Scheduler {
 public:
  using Policy = EngineOptions::SchedulingPolicy;
  Scheduler(kv::KvCacheManager* kv, int max_num_seqs, int max_num_batched_tokens,
            Policy policy = Policy::kFcfs, bool enable_chunked_prefill = true);

  // To the back of the waiting queue (fcfs), or at its (priority, arrival_seq) place.
  void AddRequest(Request* request);
  // A forked choice of a parallel-sampling request (its blocks already allocated, its
  // prompt computed): runs from the next step on. Its seat was reserved when its
  // parent was admitted (a parent counts 1 + fork_children.size() against max_num_seqs).
  void AddRunning(Request* request);
  // The request is done for `reason` ("stop", "length", "abort", "error"): the
  // connector's RequestFinished runs while its blocks are still allocated, then the
  // request leaves every queue and its blocks are freed, unless the connector keeps
  // them (a producer's prompt kept for a decode instance; FreeKept frees them later).
  KvFinishAction FinishRequest(Request* request, std::string_view reason = "stop");
  // Frees the blocks of a request whose connector kept them (KvConnector::GetFinished).
  void FreeKept(const std::string& request_id);

  SchedulerOutput Schedule();

  // ---- The step's output ----
  // After the forward pass of `plan`: each scheduled request without drafts computed its
  // tokens; its full blocks are cached and the connector saves them.
  void UpdateAfterForward(const std::vector<ScheduledRequest>& scheduled);
  // A request with drafts kept `num_true_tokens` of the positions it ran (its last token
  // and the drafts it accepted): they count as computed, are cached and saved; unless it
  // is `finishing`, the rejected drafts' slots are freed.
  void UpdateAfterVerification(Request* request, int num_true_tokens, bool finishing);
  // A load listed in SchedulerOutput::loads is over (`load`): the request runs from the
  // tokens it brought, or after the producer's first token when `first_token_ok` (the
  // request would have drawn it so) and the load brought the whole prompt.
  LoadOutcome UpdateFromLoad(Request* request, const KvLoadResult& load, bool first_token_ok);

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
  // Out of every queue, blocks kept.
  void DetachRequest(Request* request);
  // The load of `request` is over: it runs from `num_computed_tokens`.
  void LoadFinished(Request* request, int num_computed_tokens);
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
  bool enable_chunked_prefill_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // arrival (admission) order
  std::vector<Request*> loading_;  // admitted, waiting for a connector's load
  KvConnector* connector_ = nullptr;
  bool hand_back_ = false;
};

}  // namespace tandem
