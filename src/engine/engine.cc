// EngineImpl: the engine core (see engine.h) — the step loop and the hand-off between
// the callers' threads and the engine thread, nothing else. One step is vLLM v1's
// schedule -> execute -> update:
//   Scheduler::Schedule                 the step's plan (scheduler.h)
//   ExpertParallelCoordinator           the lockstep of an expert-parallel group
//   ModelRunner::Run / Sample           the forward pass; the tokens each request accepts
//   Scheduler::UpdateAfterForward       computed tokens, caching, connector saves
//   StepUpdater                         the accepted tokens emitted (OutputProcessor),
//                                       verifications, finishes, connector results
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
#include "engine/engine_metrics.h"
#include "engine/expert_parallel_coordinator.h"
#include "engine/input_processor.h"
#include "engine/kv_arena.h"
#include "engine/kv_cache_utils.h"
#include "engine/kv_connector.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/spec_decode.h"
#include "engine/step_updater.h"
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
        watchdog_(options.health_watchdog_s),
        updater_(model.config().n_vocab, &scheduler_, &output_,
                 {[this](const std::string& id, const std::string& family_id) { Release(id, family_id); },
                  [this] { PublishGauges(); }}) {
    runner_.set_expert_exchange(options.expert_exchange);
  }

  // Starts speculation, the KV connectors and the step thread.
  Status Start() {
    if (options_.speculative.method != SpeculativeOptions::Method::kNone) {
      // Before the connectors start, so a bad draft model has nothing to stop.
      TANDEM_ASSIGN_OR_RETURN(spec_, SpecDecoder::Create(options_, model_, arena_.get(), &kv_,
                                                         compute_threads_.get(), metrics_registry_));
    }
    updater_.set_spec(spec_.get());
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
      updater_.set_connector(connector_.get());
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
      for (std::unique_ptr<Request>& r : h.inbox) updater_.Add(std::move(r));
      if (h.stopping && !stop_seen) {
        stop_seen = true;
        for (std::string& id : updater_.ids()) h.aborts.push_back(std::move(id));
      }
      for (const std::string& id : h.aborts) updater_.Abort(id);
      updater_.CollectConnectorResults(stop_seen);
      if (stop_seen && updater_.empty()) {
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
    updater_.BeginStep();
    metrics_.OnPreemptions(plan.num_preempted);
    for (auto& [r, action] : plan.handed_back) updater_.HandBack(r, std::move(action));
    if (!plan.loads.empty()) {
      connector_->StartLoadKv();
      updater_.CollectConnectorResults(false);  // loads done in the step (the pool's synchronous mode)
    }
    PublishGauges();  // the plan's running / waiting, before any of the step's outputs goes out
    if (ep_ && !ep_->Lockstep(!plan.scheduled.empty())) return updater_.FailAll(ep_->status());
    if (plan.scheduled.empty()) return;
    StepLogits logits = runner_.Run(plan.scheduled);
    if (ep_ && !ep_->AfterForward()) return updater_.FailAll(ep_->status());  // outputs not to be trusted
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
    updater_.Apply(runner_.Sample(inputs, model_.tokenizer()), n_plain);
    if (spec_ && !logits.has_prompt_tokens) {
      spec_->OnDecodeStep(!verifying.empty(), updater_.step_tokens(),
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count());
    }
  }


  // A request's id is free again (StepUpdater's hook).
  void Release(const std::string& id, const std::string& family_id) {
    std::lock_guard<std::mutex> lock(mu_);
    live_ids_.erase(id);
    if (auto family = families_.find(family_id); family != families_.end()) {
      std::erase(family->second, id);
      if (family->second.empty()) families_.erase(family);
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
  StepUpdater updater_;  // owns every request from its hand-off until its final output
  // Declared after the arena and the cache: stopped, and destroyed, before them.
  std::unique_ptr<KvConnector> connector_;
  bool connector_stopped_ = false;                 // guarded by shutdown_mu_
  std::unique_ptr<SpecDecoder> spec_;              // --speculative-config (else null)
  std::unique_ptr<ChoiceForker> forker_;
  std::unique_ptr<ExpertParallelCoordinator> ep_;  // --enable-expert-parallel (else null)

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
