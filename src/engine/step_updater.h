// StepUpdater: the update half of an engine step, and the owner of its requests. It
// holds every Request from its hand-off to the engine thread until its final output is
// delivered, and turns what a step produced into outputs and ends:
//   - the tokens each request accepted (Apply): emitted in order through the output
//     processor, the positions a verification kept counted as computed
//     (Scheduler::UpdateAfterVerification), the speculation metrics told;
//   - a connector's finished loads and the kept blocks it lets go
//     (CollectConnectorResults): the request resumes, continues after the producer's
//     first token, or ends;
//   - aborts (a loading request ends when its load reports, so no load writes into
//     freed blocks), the hand-back of the recompute scheduler, a broken
//     expert-parallel group (FailAll).
// A request ends in one place (Deliver): the scheduler's FinishRequest has run (the
// connector decided while the blocks were allocated), the gauges are published, the
// final output goes out, the caller hears its id released (unless its blocks are kept,
// then when they are freed), and choices it was to fork end with it.
//
// Thread safety: engine thread only; the hooks are called on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "engine/kv_connector.h"
#include "engine/rejection_sampler.h"

namespace tandem {

class OutputProcessor;
class Scheduler;
class SpecDecoder;
struct Request;

class StepUpdater {
 public:
  struct Hooks {
    // A request's id is free for reuse (`family_id`: its n > 1 family, or empty).
    std::function<void(const std::string& id, const std::string& family_id)> released;
    // Publish the engine's gauges (before a final output goes out).
    std::function<void()> publish_gauges;
  };

  // `scheduler` and `output` are borrowed and outlive the updater.
  StepUpdater(int32_t n_vocab, Scheduler* scheduler, OutputProcessor* output, Hooks hooks);
  ~StepUpdater();

  // Borrowed, set once at the engine's start (null = none).
  void set_connector(KvConnector* connector) { connector_ = connector; }
  void set_spec(SpecDecoder* spec) { spec_ = spec; }

  // A request handed over to the engine thread: it joins the table and, unless it
  // waits for a fork (n > 1), the scheduler's queue.
  void Add(std::unique_ptr<Request> request);
  bool empty() const { return requests_.empty(); }
  std::vector<std::string> ids() const;

  // A new step: its emitted-token count starts at 0.
  void BeginStep() { step_tokens_ = 0; }
  // Tokens emitted since BeginStep (the speculation controller's measure).
  int step_tokens() const { return step_tokens_; }

  // The sampling stage's result: `sampled[0, n_plain)` are plain draws, the rest
  // verifications.
  void Apply(const std::vector<SampledTokens>& sampled, size_t n_plain);
  // A request the scheduler handed back (already finished there, `action` its
  // connector's): ends with "stop" / stop_reason "recomputed".
  void HandBack(Request* r, KvFinishAction action);
  // Finishes the request with "abort" (a loading one when its load reports); unknown
  // ids are ignored.
  void Abort(const std::string& id);
  // Every request ends with `error` (a loading one when its load reports).
  void FailAll(const Status& error);
  // Loads the connector finished and kept blocks it lets go (all when `stopping`).
  void CollectConnectorResults(bool stopping);

 private:
  void EmitDraw(const SampledTokens& s);
  void EmitVerified(const SampledTokens& s);
  void Emit(Request* r, int32_t token, const TokenLogprob* lp);
  void OnLoadFinished(const KvLoadResult& load);
  // `stop_reason` (optional) replaces the one the output processor found.
  void Finish(Request* r, const std::string& reason, const Status& error = Status::Ok(),
              const std::string& stop_reason = "");
  void Deliver(Request* r, KvFinishAction action, const std::string& reason, const Status& error,
               const std::string& stop_reason);

  const int32_t n_vocab_;
  Scheduler* scheduler_;
  OutputProcessor* output_;
  Hooks hooks_;
  KvConnector* connector_ = nullptr;
  SpecDecoder* spec_ = nullptr;
  int step_tokens_ = 0;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;  // the request table
};

}  // namespace tandem
