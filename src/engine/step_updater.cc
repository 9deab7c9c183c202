#include "engine/step_updater.h"

#include <algorithm>
#include <utility>

#include "common/logging.h"
#include "engine/kv_connector.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/spec_decode.h"

namespace tandem {

StepUpdater::StepUpdater(int32_t n_vocab, Scheduler* scheduler, OutputProcessor* output, Hooks hooks)
    : n_vocab_(n_vocab), scheduler_(scheduler), output_(output), hooks_(std::move(hooks)) {}

StepUpdater::~StepUpdater() = default;

void StepUpdater::Add(std::unique_ptr<Request> request) {
  Request* r = request.get();
  requests_[r->id] = std::move(request);
  if (r->fork_parent == nullptr) scheduler_->AddRequest(r);  // else waits for the fork
}

std::vector<std::string> StepUpdater::ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  return ids;
}

void StepUpdater::HandBack(Request* r, KvFinishAction action) {
  TANDEM_LOG(INFO) << "request " << r->id << " preempted: handing it back to be recomputed elsewhere";
  Deliver(r, std::move(action), "stop", Status::Ok(), "recomputed");
}

void StepUpdater::Apply(const std::vector<SampledTokens>& sampled, size_t n_plain) {
  for (size_t k = 0; k < sampled.size(); ++k) {
    if (k < n_plain) {
      EmitDraw(sampled[k]);
    } else {
      EmitVerified(sampled[k]);
    }
  }
}

// A plain draw: one token, or the end of a used-up script.
void StepUpdater::EmitDraw(const SampledTokens& s) {
  if (s.tokens.empty()) return Finish(s.r, "stop");
  Emit(s.r, s.tokens[0], s.logprobs.empty() ? nullptr : &s.logprobs[0]);
}

// A verification (spec_decode.h): its accepted tokens go out as one output, as
// vLLM's; the positions they hold count as computed.
void StepUpdater::EmitVerified(const SampledTokens& s) {
  Request* r = s.r;
  int emitted = 0;
  EmitResult end;
  for (size_t i = 0; i < s.tokens.size() && end.finish_reason.empty(); ++i, ++emitted) {
    ++step_tokens_;
    end = output_->Emit(*r, s.tokens[i], s.logprobs.empty() ? nullptr : &s.logprobs[i]);
  }
  // The positions of the last token and the accepted drafts hold true tokens' KV (a
  // script used up at the next row: the last emitted token's too, run as a draft).
  const bool script_end = end.finish_reason.empty() && s.script_done;
  if (script_end) end.finish_reason = "stop";
  const bool finishing = !end.finish_reason.empty();
  scheduler_->UpdateAfterVerification(r, emitted + (script_end ? 1 : 0), finishing);
  const int accepted = std::min(s.num_accepted, emitted);
  spec_->OnVerified(finishing ? nullptr : r, s.num_drafts, accepted);
  if (finishing) return Finish(r, end.finish_reason, end.error);
  output_->Send(*r);
}

// Emits one token; the request ends when the token ends it, else the delta goes out.
void StepUpdater::Emit(Request* r, int32_t token, const TokenLogprob* lp) {
  ++step_tokens_;
  EmitResult e = output_->Emit(*r, token, lp);
  if (!e.finish_reason.empty()) return Finish(r, e.finish_reason, e.error);
  output_->Send(*r);
}

void StepUpdater::Abort(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request* r = it->second.get();
  if (r->status == RequestStatus::kWaitingForRemoteKvs) {
    // The load writes into the request's blocks: they are freed when it is reported.
    r->abort_after_load = true;
    connector_->CancelLoad(r->id);
  } else {
    Finish(r, "abort");
  }
}

// The expert-parallel group broke: no step can run any more, so every request ends
// with the group's error (a loading one when its load reports).
void StepUpdater::FailAll(const Status& error) {
  for (const std::string& id : ids()) {
    auto it = requests_.find(id);  // finishing one may have finished others (n > 1)
    if (it == requests_.end()) continue;
    Request* r = it->second.get();
    if (r->status == RequestStatus::kWaitingForRemoteKvs) {
      if (!r->abort_after_load) connector_->CancelLoad(r->id);
      r->abort_after_load = true;
    } else {
      Finish(r, "error", error);
    }
  }
}

void StepUpdater::Finish(Request* r, const std::string& reason, const Status& error, const std::string& stop_reason) {
  Deliver(r, scheduler_->FinishRequest(r, reason), reason, error, stop_reason);
}

// The end of a request the scheduler has finished (`action`: what its connector did
// with its blocks): its final output, then it is gone. n > 1: choices not forked yet
// end with the one that was to fork them.
void StepUpdater::Deliver(Request* r, KvFinishAction action, const std::string& reason, const Status& error,
                          const std::string& stop_reason) {
  const std::vector<Request*> unforked = std::exchange(r->fork_children, {});
  if (r->fork_parent != nullptr) std::erase(r->fork_parent->fork_children, r);
  if (spec_) spec_->OnFinished(r->id);
  hooks_.publish_gauges();  // the blocks are free before the client hears the request is done
  output_->Finish(*r, reason, error, stop_reason, std::move(action.kv_transfer_params));
  // A kept request keeps its id (and its blocks) until the connector frees them.
  if (!action.keep_blocks) hooks_.released(r->id, r->family_id);
  const std::string id = r->id;
  requests_.erase(id);  // r is gone
  for (Request* c : unforked) {
    c->fork_parent = nullptr;
    Finish(c, reason, error, stop_reason);
  }
}

// Loads the connectors finished (the requests resume or end) and kept blocks they let go.
void StepUpdater::CollectConnectorResults(bool stopping) {
  if (!connector_) return;
  std::vector<KvLoadResult> loads;
  std::vector<std::string> freeable;
  connector_->GetFinished(stopping, &loads, &freeable);
  for (const KvLoadResult& load : loads) OnLoadFinished(load);
  if (freeable.empty()) return;
  for (const std::string& id : freeable) {
    scheduler_->FreeKept(id);
    hooks_.released(id, "");
  }
  hooks_.publish_gauges();
}

void StepUpdater::OnLoadFinished(const KvLoadResult& load) {
  auto it = requests_.find(load.request_id);
  if (it == requests_.end()) return;
  Request* r = it->second.get();
  // Go on after the first token another engine drew only when this request would not
  // have drawn it differently.
  const int32_t token = load.first_token;
  const bool first_token_ok = token >= 0 && token < n_vocab_ && output_->CanContinueAfter(*r, token);
  switch (scheduler_->UpdateFromLoad(r, load, first_token_ok)) {
    case LoadOutcome::kResumed:
      return;
    case LoadOutcome::kFailed:
      return Finish(r, "error", load.error);
    case LoadOutcome::kAborted:
      return Finish(r, "abort");
    case LoadOutcome::kFirstTokenAccepted:
      hooks_.publish_gauges();  // it is running before its client sees a token
      return Emit(r, token, nullptr);
  }
}

}  // namespace tandem
