// EngineImpl: the engine core (see engine.h) — the step loop and the hand-off between
// the callers' threads and the engine thread, nothing else. One step is vLLM v1's
// schedule -> execute -> update:
//   Scheduler::Schedule                 the step's plan (scheduler.h)
//   ExpertParallelCoordinator           the lockstep of an expert-parallel group
//   ModelRunner::Run / Sample           the forward pass; the tokens each request accepts
//   Scheduler::UpdateAfter*             computed tokens, caching, connector saves
//   OutputProcessor::Emit / Finish      emission, stop conditions, the final output
// Requests come in through InputProcessor (the caller's thread), KV sizing is
// NormalizeEngineOptions (kv_cache_utils.h).
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "engine/choice_forker.h"
#include "engine/draft_model_proposer.h"
#include "engine/engine_metrics.h"
#include "engine/expert_parallel_coordinator.h"
#include "engine/input_processor.h"
#include "engine/kv_arena.h"
#include "engine/kv_cache_utils.h"
#include "engine/kv_connector.h"
#include "engine/model_runner.h"
#include "engine/mtp_proposer.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/spec_decode.h"
#include "engine/step_watchdog.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_events.h"
#include "model/model.h"

namespace tandem {
namespace {

class EngineImpl final : public Engine {
 public:
  EngineImpl(const Model& model, const EngineOptions& options, MetricsRegistry* metrics,
             std::unique_ptr<KvArena> arena)
      : model_(model),
        options_(options),
        compute_threads_(std::make_unique<ThreadPool>(options.threads, options.cpu_ids)),
        arena_(std::move(arena)),
        kv_(kv::KvCacheConfig{static_cast<int32_t>(arena_->num_blocks()), options.block_size,
                              options.enable_prefix_caching, KvFingerprint(model, options),
                              KvDtypeName(options.kv_cache_dtype)}),
        runner_(model.config(), model.weights(), compute_threads_.get(), arena_.get(), &kv_,
                UsesMtp(options)),
        scheduler_(&kv_, options.max_num_seqs, options.max_num_batched_tokens,
                   options.scheduling_policy, options.enable_chunked_prefill),
        metrics_(metrics, options.model_name, options.engine_index),
        output_(model.tokenizer(), &metrics_),
        input_(model, options_, arena_->num_blocks() * options.block_size),
        metrics_registry_(metrics),
        watchdog_(options.health_watchdog_s) {
    runner_.set_expert_exchange(options.expert_exchange);
  }

  // Starts speculation, the KV connectors and the step thread.
  Status Start() {
    if (options_.speculative.method != SpeculativeOptions::Method::kNone) {
      std::unique_ptr<DraftModelProposer> draft;
      if (options_.speculative.method == SpeculativeOptions::Method::kDraftModel) {
        // Loaded before the connectors start, so a bad draft has nothing to stop. Its
        // cache holds as many tokens as the target's.
        TANDEM_ASSIGN_OR_RETURN(
            draft, DraftModelProposer::Create(options_.speculative.draft_model, model_, arena_->num_blocks(),
                                              options_.block_size, options_.max_num_batched_tokens,
                                              compute_threads_.get()));
      }
      std::unique_ptr<MtpProposer> mtp;
      if (UsesMtp(options_)) {
        mtp = std::make_unique<MtpProposer>(model_.config(), model_.weights(), compute_threads_.get(),
                                            arena_.get(), &kv_);
      }
      spec_ = std::make_unique<SpecDecoder>(options_.speculative, options_.max_model_len, std::move(draft),
                                            std::move(mtp), metrics_registry_, options_.model_name,
                                            options_.engine_index);
    }
    forker_ = std::make_unique<ChoiceForker>(model_.config().n_vocab, &kv_, arena_.get(), &scheduler_,
                                             spec_.get());
    if (options_.expert_exchange != nullptr) {
      ep_ = std::make_unique<ExpertParallelCoordinator>(options_.expert_exchange, &runner_, &metrics_);
    }
    KvConnectorContext context;
    context.options = &options_;
    context.memory = arena_->memory();
    context.model_fingerprint = KvFingerprint(model_, options_);
    context.kv = &kv_;
    context.metrics = &metrics_;
    context.wake = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      connector_event_ = true;
      cv_.notify_one();
    };
    if (options_.kv_connector_factory) connector_ = options_.kv_connector_factory(context);
    if (connector_) {
      TANDEM_RETURN_IF_ERROR(connector_->Start());
      scheduler_.SetConnector(connector_.get());
      input_.set_connector(connector_.get());
    }
    kv_.set_event_sink(options_.kv_event_sink);
    scheduler_.SetHandBack(options_.recompute_scheduler && options_.kv_transfer.consumer &&
                           !options_.kv_transfer.producer);
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  ~EngineImpl() override { Shutdown(); }

  bool ReleaseKvBlocks(const std::string& remote_request_id) override {
    return connector_ != nullptr && connector_->ReleaseKvBlocks(remote_request_id);
  }

  void ResetPrefixCache() override {  // applied by Loop before the next step
    std::lock_guard<std::mutex> lock(mu_);
    reset_prefix_cache_ = true;
    cv_.notify_one();
  }

  int kv_transfer_port() const override { return connector_ ? connector_->kv_transfer_port() : 0; }

  Status AddRequest(EngineRequest request) override {
    TANDEM_ASSIGN_OR_RETURN(ProcessedRequest processed, input_.Process(std::move(request)));
    const int n_choices = static_cast<int>(processed.requests.size());
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return UnavailableError("the engine is shutting down");
    if (live_ids_.count(processed.request_id) || families_.count(processed.request_id)) {
      return AlreadyExistsError("duplicate request id " + processed.request_id);
    }
    if (num_queued_.load() + static_cast<int>(inbox_.size()) + n_choices - 1 >= options_.max_waiting) {
      return ResourceExhaustedError("the server is overloaded: " + std::to_string(options_.max_waiting) +
                                    " requests are already waiting");
    }
    watchdog_.WorkArrived(/*engine_idle=*/inbox_.empty());
    for (std::unique_ptr<Request>& r : processed.requests) {
      r->arrival_seq = next_arrival_seq_++;
      live_ids_.insert(r->id);
      if (n_choices > 1) families_[processed.request_id].push_back(r->id);
      inbox_.push_back(std::move(r));
    }
    cv_.notify_one();
    return Status::Ok();
  }

  void AbortRequest(const std::string& request_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto family = families_.find(request_id); family != families_.end()) {
      aborts_.insert(aborts_.end(), family->second.begin(), family->second.end());  // every choice
    }
    aborts_.push_back(request_id);
    cv_.notify_one();
  }

  EngineSnapshot Snapshot() const override {
    EngineSnapshot s;
    s.num_kept = num_kept_.load();
    s.num_running = num_running_.load();
    s.num_waiting = num_waiting_.load();
    s.kv_cache_usage = kv_usage_.load();
    s.num_kv_blocks = arena_->num_blocks();
    s.max_tokens_in_cache = arena_->num_blocks() * options_.block_size;
    s.compute_threads = compute_threads_->num_threads();
    return s;
  }

  const EngineOptions& options() const override { return options_; }

  EngineHealth Health() const override { return watchdog_.Health(ep_ ? ep_->error() : ""); }

  void Shutdown() override {
    std::lock_guard<std::mutex> once(shutdown_mu_);  // a second call waits for the first
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    // After the step loop: it waited for every load it started. The connector object
    // stays (other threads may still ask it for leases and its port) until destruction.
    if (connector_ && !connector_stopped_) connector_->Stop();
    connector_stopped_ = true;
  }

 private:
  // What the callers handed over since the last step (taken under mu_).
  struct Handoff {
    std::vector<std::unique_ptr<Request>> inbox;
    std::vector<std::string> aborts;
    bool reset_prefix_cache = false;
    bool stopping = false;
  };

  void Loop() {
    bool stop_seen = false;
    while (true) {
      Handoff h = WaitForWork(stop_seen);
      if (h.reset_prefix_cache) kv_.ResetPrefixCache();
      for (std::unique_ptr<Request>& r : h.inbox) {
        Request* raw = r.get();
        requests_[raw->id] = std::move(r);
        if (raw->fork_parent == nullptr) scheduler_.AddRequest(raw);  // else waits for the fork
      }
      if (h.stopping && !stop_seen) {
        stop_seen = true;
        for (auto& [id, r] : requests_) h.aborts.push_back(id);
      }
      for (const std::string& id : h.aborts) Abort(id);
      CollectConnectorResults(stop_seen);
      if (stop_seen && requests_.empty()) {
        if (options_.kv_event_sink) options_.kv_event_sink->EndStep();
        PublishGauges();
        watchdog_.LoopExited();
        return;
      }
      if (options_.fault_step_delay_ms > 0 && scheduler_.has_work()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(options_.fault_step_delay_ms));  // TEST ONLY
      }
      Step();
      watchdog_.StepCompleted();
      if (options_.kv_event_sink) options_.kv_event_sink->EndStep();  // KV events: one batch per step
      PublishGauges();
      metrics_.MaybeLogStats(num_running_.load(), num_waiting_.load(), kv_.usage(), kv_.prefix_cache_stats());
      if (spec_) spec_->MaybeLog();
    }
  }

  // The wait policy: until something is handed over or there is work, a connector's
  // deadline passes, or (expert parallelism) the group's poll interval ends.
  Handoff WaitForWork(bool stop_seen) {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] {
      return (stopping_ && !stop_seen) || !inbox_.empty() || !aborts_.empty() || connector_event_ ||
             reset_prefix_cache_ || scheduler_.has_work();
    };
    const auto deadline = connector_ ? connector_->NextDeadline() : std::nullopt;
    if (ep_) {
      if (std::optional<std::chrono::milliseconds> poll = ep_->NextPoll()) cv_.wait_for(lock, *poll, ready);
    } else if (deadline) {
      cv_.wait_until(lock, *deadline + std::chrono::milliseconds(1), ready);
    } else {
      cv_.wait(lock, ready);
    }
    connector_event_ = false;
    Handoff h;
    h.inbox.swap(inbox_);
    h.aborts.swap(aborts_);
    h.reset_prefix_cache = std::exchange(reset_prefix_cache_, false);
    h.stopping = stopping_;
    return h;
  }

  void Step() {
    const auto step_start = std::chrono::steady_clock::now();  // drafting counts in the step's time
    if (ep_) ep_->BeforeStep();
    if (spec_) spec_->Propose(scheduler_.running());
    SchedulerOutput plan = scheduler_.Schedule();
    if (spec_) spec_->AfterSchedule(plan.scheduled);
    step_tokens_ = 0;
    metrics_.OnPreemptions(plan.num_preempted);
    for (auto& [r, action] : plan.handed_back) {
      TANDEM_LOG(INFO) << "request " << r->id << " preempted: handing it back to be recomputed elsewhere";
      Deliver(r, std::move(action), "stop", Status::Ok(), "recomputed");
    }
    if (!plan.loads.empty()) {
      connector_->StartLoadKv();
      CollectConnectorResults(false);  // loads done in the step (the pool's synchronous mode)
    }
    if (ep_ && !ep_->Lockstep(!plan.scheduled.empty())) return FailAll(ep_->status());
    if (plan.scheduled.empty()) return;
    StepLogits logits = runner_.Run(plan.scheduled);
    if (ep_ && !ep_->AfterForward()) return FailAll(ep_->status());  // the outputs are not to be trusted
    if (spec_) spec_->AfterForward(plan.scheduled, logits);  // MTP rows before any block is cached
    scheduler_.UpdateAfterForward(plan.scheduled);
    forker_->BeginStep();
    std::vector<SampleInput> inputs;     // requests without drafts (and forked choices) first
    std::vector<SampleInput> verifying;  // then requests with drafts
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      Request* r = plan.scheduled[i].request;
      metrics_.OnTokensComputed(logits.prompt_tokens[i]);
      if (logits.first_row[i] == nullptr) continue;  // its chunk ends inside the prompt
      if (!r->spec_tokens.empty()) {
        verifying.push_back({r, logits.first_row[i], r->spec_tokens});
        continue;
      }
      inputs.push_back({r, logits.first_row[i], {}});
      if (!r->fork_children.empty() && r->num_computed_tokens == static_cast<int>(r->tokens.size())) {
        forker_->Fork(r, logits.first_row[i], &inputs);  // the prompt is done: n > 1 forks here
      }
    }
    const size_t n_plain = inputs.size();
    inputs.insert(inputs.end(), verifying.begin(), verifying.end());
    std::vector<SampledTokens> sampled = runner_.Sample(inputs, model_.tokenizer());
    for (size_t k = 0; k < sampled.size(); ++k) {
      if (k < n_plain) {
        EmitDraw(sampled[k]);
      } else {
        EmitVerified(sampled[k]);
      }
    }
    if (spec_ && !logits.has_prompt_tokens) {
      spec_->OnDecodeStep(!verifying.empty(), step_tokens_,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count());
    }
  }

  // A plain draw: one token, or the end of a used-up script.
  void EmitDraw(const SampledTokens& s) {
    if (s.tokens.empty()) return Finish(s.r, "stop");
    Emit(s.r, s.tokens[0], s.logprobs.empty() ? nullptr : &s.logprobs[0]);
  }

  // A verification (spec_decode.h): its accepted tokens go out as one output, as
  // vLLM's; the positions they hold count as computed.
  void EmitVerified(const SampledTokens& s) {
    Request* r = s.r;
    int emitted = 0;
    EmitResult end;
    for (size_t i = 0; i < s.tokens.size() && end.finish_reason.empty(); ++i, ++emitted) {
      ++step_tokens_;
      end = output_.Emit(*r, s.tokens[i], s.logprobs.empty() ? nullptr : &s.logprobs[i]);
    }
    // The positions of the last token and the accepted drafts hold true tokens' KV (a
    // script used up at the next row: the last emitted token's too, run as a draft).
    const bool script_end = end.finish_reason.empty() && s.script_done;
    if (script_end) end.finish_reason = "stop";
    const bool finishing = !end.finish_reason.empty();
    scheduler_.UpdateAfterVerification(r, emitted + (script_end ? 1 : 0), finishing);
    const int accepted = std::min(s.num_accepted, emitted);
    spec_->OnVerified(finishing ? nullptr : r, s.num_drafts, accepted);
    if (finishing) return Finish(r, end.finish_reason, end.error);
    output_.Send(*r);
  }

  // Emits one token; the request ends when the token ends it, else the delta goes out.
  void Emit(Request* r, int32_t token, const TokenLogprob* lp) {
    ++step_tokens_;
    EmitResult e = output_.Emit(*r, token, lp);
    if (!e.finish_reason.empty()) return Finish(r, e.finish_reason, e.error);
    output_.Send(*r);
  }

  void Abort(const std::string& id) {
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
  void FailAll(const Status& error) {
    std::vector<std::string> ids;
    for (auto& [id, r] : requests_) ids.push_back(id);
    for (const std::string& id : ids) {
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

  // `stop_reason` (optional) replaces the one the output processor found.
  void Finish(Request* r, const std::string& reason, const Status& error = Status::Ok(),
              const std::string& stop_reason = "") {
    Deliver(r, scheduler_.FinishRequest(r, reason), reason, error, stop_reason);
  }

  // The end of a request the scheduler has finished (`action`: what its connector did
  // with its blocks): its final output, then it is gone. n > 1: choices not forked yet
  // end with the one that was to fork them.
  void Deliver(Request* r, KvFinishAction action, const std::string& reason, const Status& error,
               const std::string& stop_reason) {
    const std::vector<Request*> unforked = std::exchange(r->fork_children, {});
    if (r->fork_parent != nullptr) std::erase(r->fork_parent->fork_children, r);
    if (spec_) spec_->OnFinished(r->id);
    PublishGauges();  // the blocks are free before the client hears the request is done
    output_.Finish(*r, reason, error, stop_reason, std::move(action.kv_transfer_params));
    if (!action.keep_blocks) {
      // A kept request keeps its id (and its blocks) until the connector frees them.
      std::lock_guard<std::mutex> lock(mu_);
      live_ids_.erase(r->id);
      if (auto family = families_.find(r->family_id); family != families_.end()) {
        std::erase(family->second, r->id);
        if (family->second.empty()) families_.erase(family);
      }
    }
    const std::string id = r->id;
    requests_.erase(id);  // r is gone
    for (Request* c : unforked) {
      c->fork_parent = nullptr;
      Finish(c, reason, error, stop_reason);
    }
  }

  // Loads the connectors finished (the requests resume or end) and kept blocks they let go.
  void CollectConnectorResults(bool stopping) {
    if (!connector_) return;
    std::vector<KvLoadResult> loads;
    std::vector<std::string> freeable;
    connector_->GetFinished(stopping, &loads, &freeable);
    for (const KvLoadResult& load : loads) OnLoadFinished(load);
    if (freeable.empty()) return;
    for (const std::string& id : freeable) scheduler_.FreeKept(id);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const std::string& id : freeable) live_ids_.erase(id);
    }
    PublishGauges();
  }

  void OnLoadFinished(const KvLoadResult& load) {
    auto it = requests_.find(load.request_id);
    if (it == requests_.end()) return;
    Request* r = it->second.get();
    // Go on after the first token another engine drew only when this request would not
    // have drawn it differently.
    const int32_t token = load.first_token;
    const bool first_token_ok = token >= 0 && token < model_.config().n_vocab && output_.CanContinueAfter(*r, token);
    switch (scheduler_.UpdateFromLoad(r, load, first_token_ok)) {
      case LoadOutcome::kResumed:
        return;
      case LoadOutcome::kFailed:
        return Finish(r, "error", load.error);
      case LoadOutcome::kAborted:
        return Finish(r, "abort");
      case LoadOutcome::kFirstTokenAccepted:
        return Emit(r, token, nullptr);
    }
  }

  // vLLM's definitions: running = in the model's batches; waiting = queued, or waiting
  // for a connector's load.
  void PublishGauges() {
    const int running = scheduler_.num_running();
    const int waiting = scheduler_.num_waiting() + scheduler_.num_loading();
    num_running_.store(running);
    num_waiting_.store(waiting);
    num_queued_.store(scheduler_.num_waiting());
    kv_usage_.store(kv_.usage());
    watchdog_.SetHasWork(scheduler_.has_work());
    num_kept_.store(connector_ ? connector_->num_kept() : 0);
    metrics_.SetGauges(running, waiting, kv_.usage(), kv_.prefix_cache_stats());
  }

  const Model& model_;
  const EngineOptions options_;
  std::unique_ptr<ThreadPool> compute_threads_;  // the forward's and the sampler's threads
  std::unique_ptr<KvArena> arena_;
  kv::KvCacheManager kv_;
  ModelRunner runner_;
  Scheduler scheduler_;
  EngineMetrics metrics_;
  OutputProcessor output_;
  InputProcessor input_;
  MetricsRegistry* metrics_registry_;  // may be null
  StepWatchdog watchdog_;
  // Engine thread: every request from its hand-off until its final output.
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  // Declared after the arena and the cache: stopped, and destroyed, before them.
  std::unique_ptr<KvConnector> connector_;
  bool connector_stopped_ = false;                 // guarded by shutdown_mu_
  std::unique_ptr<SpecDecoder> spec_;              // --speculative-config (else null)
  std::unique_ptr<ChoiceForker> forker_;
  std::unique_ptr<ExpertParallelCoordinator> ep_;  // --enable-expert-parallel (else null)
  int step_tokens_ = 0;                            // tokens emitted in the current step

  std::mutex shutdown_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Request>> inbox_;  // guarded by mu_
  std::vector<std::string> aborts_;              // guarded by mu_
  std::unordered_set<std::string> live_ids_;     // guarded by mu_
  // n > 1: the client's request id -> its live choices' ids (AbortRequest, duplicates).
  std::unordered_map<std::string, std::vector<std::string>> families_;  // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
  bool connector_event_ = false;                 // guarded by mu_
  bool reset_prefix_cache_ = false;              // guarded by mu_
  uint64_t next_arrival_seq_ = 0;                // guarded by mu_
  // Published by the engine thread (PublishGauges) for Snapshot and the queue bound.
  std::atomic<int> num_kept_{0};
  std::atomic<int> num_running_{0};
  std::atomic<int> num_waiting_{0};
  std::atomic<int> num_queued_{0};  // the scheduler's waiting queue (AddRequest's bound)
  std::atomic<double> kv_usage_{0};
  std::thread thread_;
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::Create(const Model& model, const EngineOptions& options_in,
                                                 MetricsRegistry* metrics) {
  EngineOptions options = options_in;
  TANDEM_ASSIGN_OR_RETURN(KvCacheSpec spec, NormalizeEngineOptions(model, &options));
  const bool shared = options.kv_transfer.producer && options.kv_transfer.same_host_shm;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<KvArena> arena,
                          KvArena::Create(spec.num_blocks, spec.n_layers, options.block_size, spec.key_row_bytes,
                                          spec.value_row_bytes, options.kv_cache_dtype, shared));
  auto engine = std::make_unique<EngineImpl>(model, options, metrics, std::move(arena));
  TANDEM_LOG(INFO) << "compute threads: " << engine->Snapshot().compute_threads
                   << (options.threads > 0 ? " (--threads)" : " (one per core available)");
  TANDEM_RETURN_IF_ERROR(engine->Start());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace tandem
