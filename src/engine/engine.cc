// EngineImpl: the step loop of the serving engine (see engine.h).
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/logging.h"
#include "common/metrics.h"
#include "common/thread_pool.h"
#include "engine/draft_model_proposer.h"
#include "engine/engine_metrics.h"
#include "engine/kv_arena.h"
#include "engine/kv_connector.h"
#include "engine/logits_processor.h"
#include "engine/model_runner.h"
#include "engine/mtp_proposer.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/request_validation.h"
#include "engine/scheduler.h"
#include "engine/spec_decode.h"
#include "engine/step_draw.h"
#include "grammar/token_trie.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_events.h"
#include "model/model.h"
#include "model/tokenizer.h"

namespace tandem {
namespace {

bool UsesMtp(const EngineOptions& o) { return o.speculative.method == SpeculativeOptions::Method::kMtp; }

// KV layers per block: the trunk's, plus the NextN block's with MTP speculation.
int KvLayers(const ModelConfig& c, const EngineOptions& o) { return c.n_layers + (UsesMtp(o) ? 1 : 0); }

// The model part of every KV block key, of the PD transfer handshake and of pool keys:
// blocks that carry a NextN layer never mix with blocks that do not (another layout),
// nor blocks of one KV dtype with another's (an fp16 cache keeps the plain fingerprint).
std::string KvFingerprint(const Model& model, const EngineOptions& o) {
  std::string f = UsesMtp(o) ? model.fingerprint() + ":mtp" : model.fingerprint();
  if (o.kv_cache_dtype != KvDtype::kF16) f += std::string(":kv-") + KvDtypeName(o.kv_cache_dtype);
  return f;
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class EngineImpl final : public Engine {
 public:
  EngineImpl(const Model& model, const EngineOptions& options, MetricsRegistry* metrics,
             std::unique_ptr<KvArena> arena)
      : model_(model),
        options_(options),
        pool_(std::make_unique<ThreadPool>(options.threads, options.cpu_ids)),
        arena_owner_(std::move(arena)),
        arena_(*arena_owner_),
        kv_(kv::KvCacheConfig{static_cast<int32_t>(arena_.num_blocks()), options.block_size,
                              options.enable_prefix_caching, KvFingerprint(model, options),
                              KvDtypeName(options.kv_cache_dtype)}),
        runner_(model.config(), model.weights(), pool_.get(), &arena_, &kv_, UsesMtp(options)),
        scheduler_(&kv_, options.max_num_seqs, options.max_num_batched_tokens,
                   options.scheduling_policy),
        output_(model.tokenizer()),
        metrics_(metrics, options.model_name),
        metrics_registry_(metrics),
        rng_(std::random_device{}()) {
    runner_.set_expert_exchange(options.expert_exchange);
  }

  // Starts the KV connectors and the step thread.
  Status Start() {
    if (options_.speculative.method != SpeculativeOptions::Method::kNone) {
      std::unique_ptr<DraftModelProposer> draft;
      if (options_.speculative.method == SpeculativeOptions::Method::kDraftModel) {
        // Loaded before the connectors start, so a bad draft has nothing to stop. Its
        // cache holds as many tokens as the target's.
        TANDEM_ASSIGN_OR_RETURN(draft, DraftModelProposer::Create(options_.speculative.draft_model, model_,
                                                                  arena_.num_blocks(), options_.block_size,
                                                                  options_.max_num_batched_tokens, pool_.get()));
      }
      std::unique_ptr<MtpProposer> mtp;
      if (UsesMtp(options_)) {
        mtp = std::make_unique<MtpProposer>(model_.config(), model_.weights(), pool_.get(), &arena_, &kv_);
      }
      spec_ = std::make_unique<SpecDecoder>(options_.speculative, options_.max_model_len, std::move(draft),
                                            std::move(mtp), metrics_registry_, options_.model_name);
    }
    KvConnectorContext context;
    context.options = &options_;
    context.memory = arena_.memory();
    context.model_fingerprint = KvFingerprint(model_, options_);
    context.kv = &kv_;
    context.metrics = &metrics_;
    context.wake = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      connector_event_ = true;
      cv_.notify_one();
    };
    connector_ = CreateKvConnector(context);
    if (connector_) {
      TANDEM_RETURN_IF_ERROR(connector_->Start());
      scheduler_.SetConnector(connector_.get());
    }
    kv_.set_event_sink(options_.kv_event_sink);  // KV events
    scheduler_.SetHandBack(options_.recompute_scheduler && options_.kv_transfer.consumer &&
                           !options_.kv_transfer.producer);
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  ~EngineImpl() override { Shutdown(); }

  bool ReleaseKvBlocks(const std::string& remote_request_id) override {
    return connector_ != nullptr && connector_->ReleaseKvBlocks(remote_request_id);
  }

  void ResetPrefixCache() override {  // KV events: applied by Loop before the next step
    std::lock_guard<std::mutex> lock(mu_);
    reset_prefix_cache_ = true;
    cv_.notify_one();
  }

  int kv_transfer_port() const override { return connector_ ? connector_->kv_transfer_port() : 0; }

  Status AddRequest(EngineRequest request) override {
    const int n = static_cast<int>(request.prompt_tokens.size());
    const int n_choices = request.params.n;
    if (n_choices < 1)
      return InvalidArgumentError("n must be at least 1, got " + std::to_string(n_choices) + ".");
    if (n_choices > options_.max_num_seqs) {
      // Every choice runs at once (they share the prompt's KV), so n cannot exceed the seats.
      return InvalidArgumentError("n must be at most " + std::to_string(options_.max_num_seqs) +
                                  " (--max-num-seqs), got " + std::to_string(n_choices) + ".");
    }
    if (n_choices > 1 &&
        (request.kv_transfer.do_remote_decode || request.kv_transfer.remote_prefill)) {
      return InvalidArgumentError(
          "n > 1 is not supported with kv_transfer_params (disaggregated prefill); "
          "send n = 1");
    }
    TANDEM_RETURN_IF_ERROR(ValidateEngineRequest(request, model_.config().n_vocab, options_.max_model_len,
                                                 arena_.num_blocks() * options_.block_size));
    if (request.params.priority != 0 &&
        options_.scheduling_policy != EngineOptions::SchedulingPolicy::kPriority) {
      // vLLM's rule and message.
      return InvalidArgumentError("Got priority " + std::to_string(request.params.priority) +
                                  " but Priority scheduling is not enabled.");
    }
    if (connector_) {
      connector_->AcceptRequest(&request.kv_transfer, n);
    } else {
      if (request.kv_transfer.remote_prefill) {
        TANDEM_LOG(WARNING) << "computing the prompt locally instead of pulling it: this instance is not a KV "
                               "consumer (--kv-transfer-config kv_role)";
      }
      request.kv_transfer = {};
    }
    if (request.params.grammar) token_trie();  // built once, outside the lock (~0.5 s for 262k tokens)
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return UnavailableError("the engine is shutting down");
    if (live_ids_.count(request.request_id) || families_.count(request.request_id)) {
      return AlreadyExistsError("duplicate request id " + request.request_id);
    }
    if (num_waiting_.load() + static_cast<int>(inbox_.size()) + n_choices - 1 >=
        options_.max_waiting) {
      return ResourceExhaustedError("the server is overloaded: " + std::to_string(options_.max_waiting) +
                                    " requests are already waiting");
    }
    // Work arriving at an idle engine starts the watchdog's clock afresh (the last step
    // may be long ago); a busy or stuck engine's clock is left alone.
    if (inbox_.empty() && !has_work_.load()) last_progress_ns_.store(SteadyNs());
    has_work_.store(true);
    if (n_choices == 1) {
      live_ids_.insert(request.request_id);
      auto r = std::make_unique<Request>(
          std::move(request), request.params.has_seed ? request.params.sampling.seed : rng_());
      r->max_tokens = std::max(1, std::min(r->params.max_tokens, options_.max_model_len - n));
      r->arrival_seq = next_arrival_seq_++;
      if (r->params.grammar) r->constraint = std::make_unique<GrammarConstraint>(r->params.grammar, token_trie());
      inbox_.push_back(std::move(r));
    } else {
      AddChoicesLocked(std::move(request));
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
    s.num_parked = num_parked_.load();
    s.num_running = num_running_.load();
    s.num_waiting = num_waiting_.load();
    s.kv_cache_usage = kv_usage_.load();
    s.num_kv_blocks = arena_.num_blocks();
    s.max_tokens_in_cache = arena_.num_blocks() * options_.block_size;
    s.compute_threads = pool_->num_threads();
    return s;
  }

  const EngineOptions& options() const override { return options_; }

  EngineHealth Health() const override {
    EngineHealth h;
    if (loop_exited_.load()) {
      h.healthy = false;
      h.reason = "the engine loop has stopped";
      return h;
    }
    {
      std::lock_guard<std::mutex> lock(ep_mu_);
      if (!ep_error_.empty()) {
        h.healthy = false;
        h.reason = ep_error_;
        return h;
      }
    }
    const int64_t now = SteadyNs();
    h.seconds_since_step = static_cast<double>(now - last_progress_ns_.load()) / 1e9;
    if (has_work_.load() && h.seconds_since_step > options_.health_watchdog_s) {
      h.healthy = false;
      char why[160];
      std::snprintf(why, sizeof(why),
                    "the engine loop has not completed a step for %.1f s with work queued "
                    "(watchdog %.1f s)",
                    h.seconds_since_step, options_.health_watchdog_s);
      h.reason = why;
    }
    return h;
  }

  void Shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ && !thread_.joinable() && !connector_) return;
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    // After the step loop: it waited for every load it started.
    if (connector_) connector_->Stop();
    connector_.reset();
  }

 private:
  void Loop() {
    bool stop_seen = false;
    bool reset_prefix_cache = false;
    std::vector<std::string> aborts;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        auto ready = [&] {
          return (stopping_ && !stop_seen) || !inbox_.empty() || !aborts_.empty() || connector_event_ ||
                 reset_prefix_cache_ || scheduler_.has_work();
        };
        const auto deadline = connector_ ? connector_->NextDeadline() : std::nullopt;
        if (options_.expert_exchange != nullptr) {
          // Lockstep: while any rank of the group has a batch this rank steps without
          // waiting (it runs the dummy batch). When none has, every rank looks again
          // after a pause that grows from 1 ms to 20 ms while the group stays idle: a new
          // request waits at most that long for the others, and an idle group costs
          // ~50 all-reduces a second. A broken group is polled the same way for its
          // re-forming (TryResume).
          if (ep_group_idle_ || !ExpertParallelLive()) {
            cv_.wait_for(lock, ep_poll_, ready);
            ep_poll_ = std::min(ep_poll_ * 2, kExpertParallelMaxPoll);
          } else {
            ep_poll_ = std::chrono::milliseconds(1);
          }
        } else if (deadline) {
          cv_.wait_until(lock, *deadline + std::chrono::milliseconds(1), ready);
        } else {
          cv_.wait(lock, ready);
        }
        connector_event_ = false;
        reset_prefix_cache = std::exchange(reset_prefix_cache_, false);
        for (auto& r : inbox_) {
          Request* raw = r.get();
          requests_[raw->id] = std::move(r);
          if (raw->fork_parent == nullptr) scheduler_.AddRequest(raw);  // else waits for the fork
        }
        inbox_.clear();
        aborts.swap(aborts_);
        if (stopping_ && !stop_seen) {
          stop_seen = true;
          for (auto& [id, r] : requests_) aborts.push_back(id);
        }
      }
      if (reset_prefix_cache) kv_.ResetPrefixCache();
      for (const std::string& id : aborts) {
        auto it = requests_.find(id);
        if (it == requests_.end()) continue;
        Request* r = it->second.get();
        if (r->status == RequestStatus::kWaitingForRemoteKvs) {
          // The load writes into the request's blocks: they are freed when it is reported.
          r->abort_after_load = true;
          connector_->CancelLoad(r->id);
        } else {
          Finish(r, "abort");
        }
      }
      aborts.clear();
      CollectConnectorResults(stop_seen);
      if (stop_seen && requests_.empty()) {
        if (options_.kv_event_sink) options_.kv_event_sink->EndStep();
        PublishGauges();
        loop_exited_.store(true);
        return;
      }
      if (options_.fault_step_delay_ms > 0 && scheduler_.has_work()) {
        std::this_thread::sleep_for(
            std::chrono::milliseconds(options_.fault_step_delay_ms));  // TEST ONLY
      }
      Step();
      last_progress_ns_.store(SteadyNs());
      if (options_.kv_event_sink) options_.kv_event_sink->EndStep();  // KV events: one batch per step
      PublishGauges();
      metrics_.MaybeLogStats(scheduler_.num_running(), scheduler_.num_waiting(), kv_.usage(), kv_.prefix_cache_stats());
      if (spec_) spec_->MaybeLog();
    }
  }

  void Step() {
    const auto step_start = std::chrono::steady_clock::now();  // drafting counts in the step's time
    if (options_.expert_exchange != nullptr && !ExpertParallelLive() && options_.expert_exchange->TryResume()) {
      TANDEM_LOG(INFO) << "expert-parallel group re-formed; serving again";
      std::lock_guard<std::mutex> lock(ep_mu_);
      ep_error_.clear();
      ep_group_idle_ = true;
    }
    if (spec_) spec_->Propose(scheduler_.running());
    SchedulerOutput plan = scheduler_.Schedule();
    if (spec_) spec_->AfterSchedule(plan.scheduled);
    step_tokens_ = 0;
    metrics_.OnPreemptions(plan.num_preempted);
    for (Request* r : plan.handed_back) {
      TANDEM_LOG(INFO) << "request " << r->id << " preempted: handing it back to be recomputed elsewhere";
      Finish(r, "stop", Status::Ok(), "recomputed");
    }
    if (!plan.loads.empty()) {
      connector_->StartLoadKv();
      CollectConnectorResults(false);  // loads done in the step (the pool's synchronous mode)
    }
    if (ExpertParallelLive()) {
      auto any = options_.expert_exchange->AnyRank(!plan.scheduled.empty());
      ep_group_idle_ = any.ok() && !*any;
      if (any.ok() && *any && plan.scheduled.empty()) {
        runner_.RunExpertParallelIdle();  // the other ranks' tokens still need our experts
        metrics_.OnExpertParallelStep(true, runner_.expert_exchange_seconds(), runner_.expert_exchange_bytes_sent());
      }
    }
    if (options_.expert_exchange != nullptr && !options_.expert_exchange->status().ok()) {
      FailExpertParallel();
      return;
    }
    if (plan.scheduled.empty()) return;
    StepLogits logits = runner_.Run(plan.scheduled);
    if (options_.expert_exchange != nullptr) {
      if (!options_.expert_exchange->status().ok()) {
        FailExpertParallel();  // the step's outputs are not to be trusted
        return;
      }
      metrics_.OnExpertParallelStep(false, runner_.expert_exchange_seconds(), runner_.expert_exchange_bytes_sent());
    }
    if (spec_) spec_->AfterForward(plan.scheduled, logits);  // MTP rows before any block is cached
    fork_rows_.clear();
    std::vector<DrawInput> sampling;   // the draws of requests without drafts, in parallel
    std::vector<DrawInput> verifying;  // requests with drafts (their first row)
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      Request* r = plan.scheduled[i].request;
      metrics_.OnTokensComputed(logits.prompt_tokens[i]);
      if (logits.first_row[i] != nullptr) (r->spec_tokens.empty() ? sampling : verifying).push_back({r, logits.first_row[i]});
      if (!r->spec_tokens.empty()) continue;  // its KV counts only once verified (VerifyDrafts)
      r->num_computed_tokens += plan.scheduled[i].num_new_tokens;
      kv_.CacheComputedBlocks(r->id, r->tokens, r->num_computed_tokens);
      if (connector_) connector_->SaveKv(*r);
      if (!r->fork_children.empty() && logits.first_row[i] != nullptr &&
          r->num_computed_tokens == static_cast<int>(r->tokens.size())) {
        ForkChoices(r, logits.first_row[i], &sampling);  // the prompt is done: n > 1 forks here
      }
    }
    for (const StepDraw& d : DrawTokens(sampling, model_.tokenizer(), model_.config().n_vocab, pool_.get())) {
      if (d.token < 0) {
        Finish(d.r, "stop");  // a scripted request whose script is used up
      } else {
        EmitToken(d.r, d.token, d.r->params.logprobs >= 0 ? &d.lp : nullptr);
      }
    }
    // (Requests the loop above finished are gone: only `verifying` is touched from here.)
    for (const DrawInput& v : verifying) VerifyDrafts(v.r, v.logits);
    if (spec_ && !logits.has_prompt_tokens) {
      spec_->OnDecodeStep(!verifying.empty(), step_tokens_,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count());
    }
  }

  bool ExpertParallelLive() const {
    return options_.expert_exchange != nullptr && options_.expert_exchange->status().ok();
  }

  // The expert-parallel group broke (a rank gone, a collective past its timeout): no
  // step can run any more, so every request ends with the group's error.
  void FailExpertParallel() {
    const Status error = options_.expert_exchange->status();
    {
      std::lock_guard<std::mutex> lock(ep_mu_);
      ep_error_ = error.message();
    }
    std::vector<std::string> ids;
    for (auto& [id, r] : requests_) ids.push_back(id);
    for (const std::string& id : ids) {
      auto it = requests_.find(id);  // finishing one may have finished others (n > 1)
      if (it == requests_.end()) continue;
      Request* r = it->second.get();
      if (r->status == RequestStatus::kWaitingForRemoteKvs) {
        if (!r->abort_after_load) connector_->CancelLoad(r->id);
        r->abort_after_load = true;  // its blocks are freed when the load reports
      } else {
        Finish(r, "error", error);
      }
    }
  }

  // Parallel sampling: `r` (choice 0) has just computed its whole prompt; each waiting
  // choice gets the prompt's KV (full blocks shared, the partial one copied) and draws its
  // first token from a copy of the same logits row, in this step's draws. A choice that
  // finds no free block for the copy is queued to compute the prompt itself (prefix
  // caching still shares the full blocks).
  void ForkChoices(Request* r, const float* row, std::vector<DrawInput>* sampling) {
    const int32_t n_vocab = model_.config().n_vocab;
    for (Request* c : std::exchange(r->fork_children, {})) {
      c->fork_parent = nullptr;
      std::optional<kv::KvCacheManager::ForkCopy> copy =
          kv_.Fork(r->id, c->id, r->num_computed_tokens);
      if (!copy) {
        scheduler_.AddRequest(c);
        continue;
      }
      if (copy->copy_from >= 0) arena_.CopyBlock(copy->copy_from, copy->copy_to);
      c->num_computed_tokens = r->num_computed_tokens;
      c->num_cached_tokens = r->num_cached_tokens;
      if (spec_) spec_->OnFork(r->id, c->id);  // MTP: the choice drafts from the prompt's last hidden state
      scheduler_.AddRunning(c);
      fork_rows_.emplace_back(row, row + n_vocab);
      sampling->push_back({c, fork_rows_.back().data()});
    }
  }

  // Queues the n choices of a parallel-sampling request: choice 0 prefills, the others
  // wait for its fork (ForkChoices). Ids and seeds follow vLLM's ParentRequest.
  void AddChoicesLocked(EngineRequest request) {
    const int n_choices = request.params.n;
    const int n = static_cast<int>(request.prompt_tokens.size());
    std::vector<std::string>& family = families_[request.request_id];
    Request* first = nullptr;
    for (int i = 0; i < n_choices; ++i) {
      EngineRequest e;
      e.request_id = std::to_string(i) + "_" + request.request_id;
      e.prompt_tokens = request.prompt_tokens;
      e.params = request.params;
      e.params.n = 1;
      e.on_output = request.on_output;
      const uint64_t seed = request.params.has_seed
                                ? request.params.sampling.seed + static_cast<uint64_t>(i)
                                : rng_();
      auto r = std::make_unique<Request>(std::move(e), seed);
      r->max_tokens = std::max(1, std::min(r->params.max_tokens, options_.max_model_len - n));
      r->arrival_seq = next_arrival_seq_++;
      r->choice_index = i;
      // Each choice walks the grammar on its own (its own constraint state).
      if (r->params.grammar) r->constraint = std::make_unique<GrammarConstraint>(r->params.grammar, token_trie());
      r->family_id = request.request_id;
      if (first == nullptr) {
        first = r.get();
      } else {
        r->fork_parent = first;
        first->fork_children.push_back(r.get());
      }
      family.push_back(r->id);
      live_ids_.insert(r->id);
      inbox_.push_back(std::move(r));
    }
  }

  // Speculative decoding (spec_decode.h): row i of `logits` follows the last token and
  // drafts 1..i. Each row is drawn exactly as a step without drafts would draw it; the
  // token is emitted; a token that differs from the next draft ends the verification.
  void VerifyDrafts(Request* r, float* logits) {
    const std::vector<int32_t> drafts = std::move(r->spec_tokens);
    r->spec_tokens.clear();
    const int32_t n_vocab = model_.config().n_vocab;
    const std::string id = r->id;
    const int base = r->num_computed_tokens;  // the last token's position
    int accepted = 0;
    for (size_t i = 0; i <= drafts.size(); ++i) {
      // Positions base..base+i hold the true tokens' KV: the last token and the drafts
      // accepted so far.
      r->num_computed_tokens = base + 1 + static_cast<int>(i);
      kv_.CacheComputedBlocks(r->id, r->tokens, r->num_computed_tokens);
      if (connector_) connector_->SaveKv(*r);
      StepDraw d = DrawToken(r, logits + static_cast<int64_t>(i) * n_vocab, model_.tokenizer(), n_vocab);
      const bool match = i < drafts.size() && d.token == drafts[i];
      accepted += match;
      if (d.token < 0) {
        Finish(r, "stop");
      } else {
        EmitToken(r, d.token, r->params.logprobs >= 0 ? &d.lp : nullptr, /*send=*/false);
      }
      if (requests_.count(id) == 0) r = nullptr;  // finished (its output went with Finish)
      if (!match || r == nullptr) break;
    }
    if (r != nullptr) SendOutput(r);  // the step's tokens in one output
    spec_->OnVerified(r, static_cast<int>(drafts.size()), accepted);
    if (r != nullptr) kv_.FreeTail(r->id, static_cast<int32_t>(r->tokens.size()));  // the rejected drafts' slots
  }

  // `send` false: the token waits in the request's output for the next TakeOutput (a
  // verification sends the tokens of its step as one output, as vLLM does).
  void EmitToken(Request* r, int32_t token, const TokenLogprob* lp, bool send = true) {
    ++step_tokens_;
    metrics_.OnToken(r);
    const bool constrained = r->constraint != nullptr && r->params.scripted_tokens.empty();
    if (constrained && !model_.tokenizer().IsEog(token) &&
        !r->constraint->Accept(model_.tokenizer().TokenToPiece(token, /*special=*/false))) {
      // Only a token drawn elsewhere (a PD producer without the constraint) can get here.
      return Finish(r, "error", InvalidArgumentError("token " + std::to_string(token) + " does not fit the request's "
                                                     "structured output grammar"));
    }
    if (std::optional<std::string> finish = output_.AppendToken(*r, token, lp)) return Finish(r, *finish);
    if (constrained && r->constraint->Terminated()) return Finish(r, "stop");  // nothing may follow
    if (send) SendOutput(r);
  }

  void SendOutput(Request* r) {
    RequestOutput out = output_.TakeOutput(*r, "");
    out.index = r->choice_index;
    if (!out.new_tokens.empty() || !out.new_text.empty()) r->on_output(out);
  }

  // `stop_reason` (optional) replaces the one the output processor found.
  void Finish(Request* r, const std::string& reason, const Status& error = Status::Ok(),
              const std::string& stop_reason = "") {
    // n > 1: choices not forked yet end with the one that was to fork them.
    const std::vector<Request*> unforked = std::exchange(r->fork_children, {});
    if (r->fork_parent != nullptr) std::erase(r->fork_parent->fork_children, r);
    KvFinishAction action = connector_ ? connector_->RequestFinished(*r, reason) : KvFinishAction{};
    if (action.keep_blocks) {
      scheduler_.DetachRequest(r);
    } else {
      scheduler_.FinishRequest(r);
    }
    RequestOutput out = output_.TakeOutput(*r, reason);
    out.index = r->choice_index;
    out.kv_transfer_params = std::move(action.kv_transfer_params);
    if (!stop_reason.empty()) out.stop_reason = stop_reason;
    if (reason == "error") out.error = error.ok() ? InternalError("the request failed") : error;
    metrics_.OnFinished(*r, reason);
    if (spec_) spec_->OnFinished(r->id);
    TANDEM_LOG(INFO) << "request " << r->id << " finished: reason=" << reason << " prompt_tokens=" << r->prompt_len
                     << " num_computed_tokens=" << (r->prompt_len - std::max(0, r->num_cached_tokens))
                     << " cached_tokens=" << std::max(0, r->num_cached_tokens)
                     << " completion_tokens=" << r->num_output_tokens();
    PublishGauges();  // the blocks are free before the client hears the request is done
    r->on_output(out);
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
    for (const std::string& id : freeable) kv_.Free(id);
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
    const int n_tokens = static_cast<int>(r->tokens.size());
    if (!load.error.ok() && !r->abort_after_load) {
      scheduler_.LoadFinished(r, r->num_computed_tokens);
      return Finish(r, "error", load.error);
    }
    const int loaded = std::min(load.num_loaded_tokens, n_tokens);
    kv_.CacheComputedBlocks(r->id, r->tokens, loaded);
    if (load.counts_as_cached) r->num_cached_tokens = std::max(r->num_cached_tokens, std::min(loaded, r->prompt_len));
    // Go on after the first token another engine drew only when this request would not
    // have drawn it differently (its logprobs, its script).
    const int32_t token = load.first_token;
    const bool continue_after_token = loaded == n_tokens && token >= 0 && token < model_.config().n_vocab &&
                                      r->params.logprobs < 0 && r->params.scripted_tokens.empty() &&
                                      !r->abort_after_load &&
                                      (r->constraint == nullptr || model_.tokenizer().IsEog(token) ||
                                       r->constraint->CanAccept(model_.tokenizer().TokenToPiece(token, false)));
    if (!continue_after_token) {
      // At least the last token is computed here: its logits draw the next token.
      scheduler_.LoadFinished(r, std::min(loaded, n_tokens - 1));
      if (r->abort_after_load) Finish(r, "abort");
      return;
    }
    scheduler_.LoadFinished(r, loaded);
    r->sampler.Skip();  // the producer drew the first token with the request's seed
    EmitToken(r, token, nullptr);
  }

  // The vocabulary's token trie for structured outputs, built on first use (~262k
  // pieces sorted: a fraction of a second, paid by the first constrained request).
  const grammar::TokenTrie& token_trie() {
    std::call_once(trie_once_, [this] {
      const Tokenizer& tok = model_.tokenizer();
      std::vector<std::string> pieces(model_.config().n_vocab);
      for (int32_t id = 0; id < static_cast<int32_t>(pieces.size()); ++id) {
        // Control and unused tokens never appear in constrained text (their piece is "").
        pieces[id] = tok.TokenToPiece(id, /*special=*/false);
      }
      trie_ = std::make_unique<grammar::TokenTrie>(pieces, tok.vocab().eog_ids);
    });
    return *trie_;
  }

  void PublishGauges() {
    num_running_.store(scheduler_.num_running() + scheduler_.num_loading());
    num_waiting_.store(scheduler_.num_waiting());
    kv_usage_.store(kv_.usage());
    has_work_.store(scheduler_.has_work());
    num_parked_.store(connector_ ? connector_->num_kept() : 0);
    metrics_.SetGauges(scheduler_.num_running(), scheduler_.num_waiting(), kv_.usage(), kv_.prefix_cache_stats());
  }

  const Model& model_;
  EngineOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KvArena> arena_owner_;
  KvArena& arena_;
  kv::KvCacheManager kv_;
  ModelRunner runner_;
  Scheduler scheduler_;
  OutputProcessor output_;
  EngineMetrics metrics_;
  MetricsRegistry* metrics_registry_;  // may be null
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;  // engine thread
  // Declared after the arena and the cache: stopped, and destroyed, before them.
  std::unique_ptr<KvConnector> connector_;
  std::unique_ptr<SpecDecoder> spec_;                 // --speculative-config (else null)
  int step_tokens_ = 0;                               // tokens emitted in the current step
  std::vector<std::vector<float>> fork_rows_;  // n > 1: this step's logits copies, [n_vocab] each
  std::once_flag trie_once_;
  std::unique_ptr<grammar::TokenTrie> trie_;          // set once by token_trie()

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
  std::mt19937_64 rng_;                          // guarded by mu_
  uint64_t next_arrival_seq_ = 0;                // guarded by mu_
  std::atomic<int> num_parked_{0};
  std::atomic<int> num_running_{0};
  std::atomic<int> num_waiting_{0};
  // Expert parallelism: whether no rank had a batch at the last step (then the loop
  // polls), and the group's error once it broke (for Health, read by other threads).
  static constexpr std::chrono::milliseconds kExpertParallelMaxPoll{20};
  bool ep_group_idle_ = true;
  std::chrono::milliseconds ep_poll_{1};
  mutable std::mutex ep_mu_;
  std::string ep_error_;
  std::atomic<double> kv_usage_{0};
  // /health's watchdog: steady-clock ns of the last completed step (or of work arriving
  // at an idle engine), whether requests wait or run, whether the loop has returned.
  std::atomic<int64_t> last_progress_ns_{SteadyNs()};
  std::atomic<bool> has_work_{false};
  std::atomic<bool> loop_exited_{false};
  std::thread thread_;
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::Create(const Model& model, const EngineOptions& options_in,
                                                 MetricsRegistry* metrics) {
  EngineOptions options = options_in;
  const ModelConfig& c = model.config();
  if (options.block_size <= 0 || options.block_size > 1024) return InvalidArgumentError("--block-size must be in [1, 1024]");
  if (options.max_model_len <= 0) options.max_model_len = c.context_length;
  if (options.max_model_len > c.context_length) {
    TANDEM_LOG(WARNING) << "--max-model-len " << options.max_model_len << " exceeds the model's context "
                        << c.context_length;
  }
  if (options.max_num_seqs <= 0) return InvalidArgumentError("--max-num-seqs must be positive");
  if (options.max_num_batched_tokens <= 0) return InvalidArgumentError("--max-num-batched-tokens must be positive");
  int64_t num_blocks = options.num_kv_blocks;
  if (UsesMtp(options) && (c.n_nextn_layers == 0 || model.weights().nextn.empty())) {
    return InvalidArgumentError("--speculative-config: an MTP method needs the model's NextN (MTP) layers; " +
                                model.name() + " has none (" + c.arch + ".nextn_predict_layers = " +
                                std::to_string(c.n_nextn_layers) + ")");
  }
  const int kv_layers = KvLayers(c, options);
  if (UsesMtp(options)) {
    TANDEM_LOG(INFO) << "MTP speculation: NextN block 0 drafts up to " << options.speculative.num_speculative_tokens
                     << " tokens; its K/V rows ride in every KV block (KV fingerprint "
                     << KvFingerprint(model, options) << ")"
                     << (c.dsa.n_heads > 0 ? "; the NextN block attends densely (its sparse-attention indexer is "
                                             "not run)"
                                           : "");
  }
  TANDEM_RETURN_IF_ERROR(c.CheckKvDtype(options.kv_cache_dtype));
  const int64_t key_row_bytes = c.KeyRowBytes(options.kv_cache_dtype);
  const int64_t value_row_bytes = c.ValueRowBytes(options.kv_cache_dtype);
  const int64_t block_bytes = kv_layers * (key_row_bytes + value_row_bytes) * options.block_size;
  if (num_blocks <= 0) num_blocks = options.kv_cache_bytes / block_bytes;
  if (num_blocks < 2) {
    return InvalidArgumentError("the KV cache budget of " + std::to_string(options.kv_cache_bytes) +
                                " bytes holds fewer than 2 blocks of " + std::to_string(block_bytes) + " bytes");
  }
  if (num_blocks > (int64_t{1} << 30)) return InvalidArgumentError("too many KV blocks");
  // One sequence of max_model_len tokens must fit the cache, or a lone request could
  // neither run nor be preempted in favour of another (vLLM refuses to start then; we
  // shrink the limit and say so).
  if (static_cast<int64_t>(options.max_model_len) > num_blocks * options.block_size) {
    TANDEM_LOG(WARNING) << "the KV cache holds " << num_blocks * options.block_size
                        << " tokens, fewer than --max-model-len " << options.max_model_len
                        << "; limiting requests to " << num_blocks * options.block_size << " tokens";
    options.max_model_len = static_cast<int>(num_blocks * options.block_size);
  }
  TANDEM_LOG(INFO) << "KV cache: " << KvDtypeName(options.kv_cache_dtype) << ", " << num_blocks
                   << " blocks of " << options.block_size << " tokens (" << block_bytes
                   << " bytes each), " << num_blocks * options.block_size << " tokens fit ("
                   << block_bytes / options.block_size << " bytes per token); prefix caching "
                   << (options.enable_prefix_caching ? "on" : "off");
  const bool shared = options.kv_transfer.producer && options.kv_transfer.same_host_shm;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<KvArena> arena,
                          KvArena::Create(num_blocks, kv_layers, options.block_size, key_row_bytes,
                                          value_row_bytes, options.kv_cache_dtype, shared));
  auto engine = std::make_unique<EngineImpl>(model, options, metrics, std::move(arena));
  TANDEM_LOG(INFO) << "compute threads: " << engine->Snapshot().compute_threads
                   << (options.threads > 0 ? " (--threads)" : " (one per core available)");
  TANDEM_RETURN_IF_ERROR(engine->Start());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace tandem
