// EngineImpl: the step loop of the serving engine (see engine.h).
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/logging.h"
#include "common/metrics.h"
#include "common/thread_pool.h"
#include "engine/engine_metrics.h"
#include "engine/kv_arena.h"
#include "engine/logits_processor.h"
#include "engine/output_processor.h"
#include "engine/pool_connector.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_cache_manager.h"
#include "model/forward.h"
#include "model/model.h"
#include "transfer/lease_table.h"
#include "transfer/transfer_client.h"
#include "transfer/transfer_server.h"
#include "transfer/transport.h"

namespace tandem {
namespace {

class EngineImpl final : public Engine {
 public:
  EngineImpl(const Model& model, const EngineOptions& options, MetricsRegistry* metrics,
             std::unique_ptr<KvArena> arena)
      : model_(model),
        options_(options),
        pool_(std::make_unique<ThreadPool>(options.threads, options.cpu_ids)),
        forward_(model.config(), model.weights(), pool_.get()),
        arena_owner_(std::move(arena)),
        arena_(*arena_owner_),
        kv_(kv::KvCacheConfig{static_cast<int32_t>(arena_.num_blocks()), options.block_size,
                              options.enable_prefix_caching, model.fingerprint(), "f16"}),
        scheduler_(&kv_, options.max_num_seqs, options.max_num_batched_tokens),
        output_(model.tokenizer()),
        metrics_(metrics, options.model_name),
        rng_(std::random_device{}()) {}

  // Starts the transfer server (producer), the pull workers (consumer) and the step thread.
  Status Start() {
    const KvTransferOptions& t = options_.kv_transfer;
    if (t.producer) {
      leases_ = std::make_unique<transfer::LeaseTable>(
          std::chrono::milliseconds(static_cast<int64_t>(t.lease_s * 1000)),
          std::chrono::milliseconds(static_cast<int64_t>(t.lease_cap_s * 1000)), [this] {
            std::lock_guard<std::mutex> lock(mu_);
            lease_event_ = true;
            cv_.notify_one();
          });
      transfer::TransferServerOptions so;
      so.bind_host = t.bind_host;
      so.port = t.port;
      so.enable_unix_socket = t.same_host_shm;
      so.auth_token = t.auth_token;
      transfer_server_ = std::make_unique<transfer::TransferServer>(so, arena_.memory(), leases_.get(),
                                                                    model_.fingerprint());
      TANDEM_RETURN_IF_ERROR(transfer_server_->Start());
    }
    if (t.consumer) {
      transport_ = std::make_unique<transfer::SocketTransport>();
      transfer_client_ = std::make_unique<transfer::TransferClient>(transport_.get(), arena_.memory(),
                                                                    model_.fingerprint(), t.same_host_shm, t.auth_token);
    }
    if (options_.pool.enabled) {
      if (!options_.enable_prefix_caching) {
        TANDEM_LOG(WARNING) << "the KV pool connector needs prefix caching (block hashes); it is off";
      } else {
        PoolConnectorOptions po;
        po.worker_address = options_.pool.worker_address;
        po.tp_rank = options_.pool.tp_rank;
        kv_pool_ = std::make_unique<PoolConnector>(po, model_.fingerprint(), arena_.memory());
        kv_pool_->SetSaveObserver([this](uint64_t stored, uint64_t existing, uint64_t dropped) {
          metrics_.AddPoolSaves(stored, existing, dropped);
        });
        if (options_.pool.load) {
          scheduler_.SetExternalLookup([this](Request* r, int computed) { return PoolLookup(r, computed); });
        }
        TANDEM_LOG(INFO) << "KV pool connector: save " << (options_.pool.save ? "on" : "off") << ", load "
                         << (options_.pool.load ? (options_.pool.load_async ? "on (async)" : "on") : "off");
      }
    }
    if (t.consumer || (kv_pool_ && options_.pool.load_async)) {
      for (int i = 0; i < 2; ++i) pull_workers_.emplace_back([this] { PullWorker(); });
    }
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  ~EngineImpl() override { Shutdown(); }

  bool ReleaseKvBlocks(const std::string& remote_request_id) override {
    return leases_ != nullptr && leases_->Release(remote_request_id);
  }

  int kv_transfer_port() const override { return transfer_server_ ? transfer_server_->port() : 0; }

  Status AddRequest(EngineRequest request) override {
    const int n = static_cast<int>(request.prompt_tokens.size());
    if (n == 0) return InvalidArgumentError("the prompt is empty");
    if (!request.on_output) return InvalidArgumentError("no output callback");
    if (n >= options_.max_model_len) {
      return InvalidArgumentError("This model's maximum context length is " + std::to_string(options_.max_model_len) +
                                  " tokens. However, your request has " + std::to_string(n) +
                                  " input tokens. Please reduce the length of the input messages.");
    }
    for (const auto& [t, bias] : request.params.logit_bias) {
      if (t < 0 || t >= model_.config().n_vocab) {
        return InvalidArgumentError("logit_bias: token id " + std::to_string(t) + " is out of vocabulary range [0, " +
                                    std::to_string(model_.config().n_vocab) + ")");
      }
    }
    for (int32_t t : request.prompt_tokens) {
      if (t < 0 || t >= model_.config().n_vocab) {
        return InvalidArgumentError("token id " + std::to_string(t) + " is out of vocabulary range [0, " +
                                    std::to_string(model_.config().n_vocab) + ")");
      }
    }
    if (static_cast<int64_t>(n) + 1 > arena_.num_blocks() * options_.block_size) {
      return InvalidArgumentError("the prompt of " + std::to_string(n) + " tokens does not fit the KV cache (" +
                                  std::to_string(arena_.num_blocks() * options_.block_size) + " tokens)");
    }
    if (request.remote_prefill && !AcceptRemotePrefill(*request.remote_prefill, n)) request.remote_prefill.reset();
    if (!options_.kv_transfer.producer) request.do_remote_decode = false;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return UnavailableError("the engine is shutting down");
    if (live_ids_.count(request.request_id)) return AlreadyExistsError("duplicate request id " + request.request_id);
    if (num_waiting_.load() + static_cast<int>(inbox_.size()) >= options_.max_waiting) {
      return ResourceExhaustedError("the server is overloaded: " + std::to_string(options_.max_waiting) +
                                    " requests are already waiting");
    }
    live_ids_.insert(request.request_id);
    auto r = std::make_unique<Request>(std::move(request), request.params.has_seed ? request.params.sampling.seed : rng_());
    r->max_tokens = std::max(1, std::min(r->params.max_tokens, options_.max_model_len - n));
    inbox_.push_back(std::move(r));
    cv_.notify_one();
    return Status::Ok();
  }

  void AbortRequest(const std::string& request_id) override {
    std::lock_guard<std::mutex> lock(mu_);
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
    return s;
  }

  const EngineOptions& options() const override { return options_; }

  void Shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ && !thread_.joinable() && pull_workers_.empty() && !transfer_server_) return;
      stopping_ = true;
      cv_.notify_one();
      pull_cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    for (auto& w : pull_workers_) w.join();
    pull_workers_.clear();
    if (transfer_server_) transfer_server_->Stop();
  }

 private:
  void Loop() {
    bool stop_seen = false;
    std::vector<PullDone> pulls_done;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        auto ready = [&] {
          return (stopping_ && !stop_seen) || !inbox_.empty() || !aborts_.empty() || !pull_done_.empty() ||
                 lease_event_ || scheduler_.has_work();
        };
        const std::optional<transfer::LeaseTable::Clock::time_point> deadline =
            leases_ ? leases_->NextDeadline() : std::nullopt;
        if (deadline) {
          cv_.wait_until(lock, *deadline + std::chrono::milliseconds(1), ready);
        } else {
          cv_.wait(lock, ready);
        }
        lease_event_ = false;
        for (auto& r : inbox_) {
          Request* raw = r.get();
          requests_[raw->id] = std::move(r);
          scheduler_.AddRequest(raw);
        }
        inbox_.clear();
        aborts.swap(aborts_);
        pulls_done.swap(pull_done_);
        if (stopping_ && !stop_seen) {
          stop_seen = true;
          for (auto& [id, r] : requests_) aborts.push_back(id);
        }
      }
      for (const std::string& id : aborts) {
        auto it = requests_.find(id);
        if (it == requests_.end()) continue;
        Request* r = it->second.get();
        if (r->pulling) {
          // The pull writes into the request's blocks: they are freed when it returns.
          r->abort_after_pull = true;
          CancelPull(r->id);
        } else {
          Finish(r, "abort");
        }
      }
      aborts.clear();
      for (PullDone& done : pulls_done) OnPullDone(done);
      pulls_done.clear();
      FreeExpiredLeases(stop_seen);
      if (stop_seen && requests_.empty()) {
        PublishGauges();
        return;
      }
      Step();
      PublishGauges();
      metrics_.MaybeLogStats(scheduler_.num_running(), scheduler_.num_waiting(), kv_.usage(), kv_.prefix_cache_stats());
    }
  }

  void Step() {
    SchedulerOutput plan = scheduler_.Schedule();
    metrics_.OnPreemptions(plan.num_preempted);
    for (Request* r : plan.pulls) StartPull(r);
    if (plan.scheduled.empty()) return;
    const int32_t n_vocab = model_.config().n_vocab;
    std::vector<PagedKvStore> stores;
    stores.reserve(plan.scheduled.size());
    std::vector<ForwardSequence> batch;
    std::vector<bool> samples;
    for (const ScheduledRequest& s : plan.scheduled) {
      Request* r = s.request;
      stores.emplace_back(&arena_, &kv_.GetBlockTable(r->id));
      ForwardSequence seq;
      seq.tokens = r->tokens.data() + r->num_computed_tokens;
      seq.n_tokens = s.num_new_tokens;
      seq.start_pos = r->num_computed_tokens;
      seq.kv = &stores.back();
      seq.want_logits = r->num_computed_tokens + s.num_new_tokens == static_cast<int>(r->tokens.size());
      samples.push_back(seq.want_logits);
      batch.push_back(seq);
      metrics_.OnTokensComputed(r->num_computed_tokens < r->prompt_len
                                    ? std::min(s.num_new_tokens, r->prompt_len - r->num_computed_tokens)
                                    : 0);
    }
    forward_.Run(batch, &logits_);
    // The draws (logits processors, sampling over the whole vocabulary, logprobs) of
    // the requests that sample this step, spread over the compute threads: each reads
    // and writes only its own request's sampler and logits row.
    struct Draw {
      Request* r = nullptr;
      float* logits = nullptr;
      int32_t token = -1;  // -1: a scripted request whose script is used up
      TokenLogprob lp;
    };
    std::vector<Draw> draws;
    int64_t row = 0;
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      if (!samples[i]) continue;
      Draw d;
      d.r = plan.scheduled[i].request;
      d.logits = logits_.data() + row++ * n_vocab;
      draws.push_back(std::move(d));
    }
    auto draw = [&](int, int64_t begin, int64_t end) {
      thread_local std::vector<float> raw;
      for (int64_t k = begin; k < end; ++k) {
        Draw& d = draws[k];
        Request* r = d.r;
        const bool want_logprobs = r->params.logprobs >= 0;
        if (want_logprobs) raw.assign(d.logits, d.logits + n_vocab);
        ApplyLogitsProcessors(*r, model_.tokenizer(), d.logits, n_vocab);
        const std::vector<int32_t>& script = r->params.scripted_tokens;
        if (!script.empty() && r->num_output_tokens() >= static_cast<int>(script.size())) continue;
        d.token =
            script.empty() ? r->sampler.Sample(d.logits, n_vocab) : script[r->num_output_tokens()];
        if (want_logprobs) d.lp = ComputeLogprobs(raw.data(), n_vocab, d.token, r->params.logprobs);
      }
    };
    pool_->ParallelFor(static_cast<int64_t>(draws.size()), 1, draw);
    size_t next_draw = 0;
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      Request* r = plan.scheduled[i].request;
      r->num_computed_tokens += plan.scheduled[i].num_new_tokens;
      kv_.CacheComputedBlocks(r->id, r->tokens, r->num_computed_tokens);
      if (kv_pool_ && options_.pool.save) SaveToPool(r);
      if (!samples[i]) continue;
      Draw& d = draws[next_draw++];
      if (d.token < 0) {
        Finish(r, "stop");
        continue;
      }
      const bool want_logprobs = r->params.logprobs >= 0;
      metrics_.OnToken(r);
      std::optional<std::string> finish =
          output_.AppendToken(*r, d.token, want_logprobs ? &d.lp : nullptr);
      if (finish) {
        Finish(r, *finish);
      } else {
        RequestOutput out = output_.TakeOutput(*r, "");
        if (!out.new_tokens.empty() || !out.new_text.empty()) r->on_output(out);
      }
    }
  }

  void Finish(Request* r, const std::string& reason, const Status& error = Status::Ok()) {
    std::optional<KvTransferParams> parked;
    if (r->do_remote_decode && leases_ && (reason == "stop" || reason == "length")) parked = Park(r);
    if (parked) {
      scheduler_.DetachRequest(r);
    } else {
      scheduler_.FinishRequest(r);
    }
    RequestOutput out = output_.TakeOutput(*r, reason);
    out.kv_transfer_params = std::move(parked);
    if (reason == "error") out.error = error.ok() ? InternalError("the request failed") : error;
    metrics_.OnFinished(*r, reason);
    TANDEM_LOG(INFO) << "request " << r->id << " finished: reason=" << reason << " prompt_tokens=" << r->prompt_len
                     << " num_computed_tokens=" << (r->prompt_len - std::max(0, r->num_cached_tokens))
                     << " cached_tokens=" << std::max(0, r->num_cached_tokens)
                     << " completion_tokens=" << r->num_output_tokens();
    PublishGauges();  // the blocks are free before the client hears the request is done
    r->on_output(out);
    if (!out.kv_transfer_params) {
      // A parked request keeps its id (and its blocks) until its lease ends.
      std::lock_guard<std::mutex> lock(mu_);
      live_ids_.erase(r->id);
    }
    requests_.erase(r->id);
  }

  // ---- PD: producer side ----

  // Parks a finished do_remote_decode request's prompt blocks under a lease; nullopt if
  // that is not possible (the caller frees them as usual).
  std::optional<KvTransferParams> Park(Request* r) {
    const std::vector<int32_t>& table = kv_.GetBlockTable(r->id);
    const int bs = options_.block_size;
    const int n_blocks = (r->prompt_len + bs - 1) / bs;
    if (static_cast<int>(table.size()) < n_blocks || r->num_output_tokens() < 1) return std::nullopt;
    KvTransferParams p;
    p.remote_engine_id = options_.kv_transfer.engine_id;
    p.remote_request_id = r->id;
    p.remote_host = options_.kv_transfer.advertise_host;
    p.remote_port = transfer_server_->port();
    p.remote_block_ids.assign(table.begin(), table.begin() + n_blocks);
    p.remote_block_size = bs;
    p.num_prompt_blocks = n_blocks;
    p.last_token_id = r->tokens[r->prompt_len];
    if (!leases_->Park(r->id, p.remote_block_ids).ok()) return std::nullopt;
    ++parked_;
    num_parked_.store(parked_);
    return p;
  }

  // Frees the blocks of leases that ended (DONE, abort, expiry); all of them when stopping.
  void FreeExpiredLeases(bool all) {
    if (!leases_) return;
    const auto now = all ? transfer::LeaseTable::Clock::time_point::max() : transfer::LeaseTable::Clock::now();
    std::vector<std::string> ids = leases_->TakeFreeable(now);
    if (ids.empty()) return;
    for (const std::string& id : ids) {
      kv_.Free(id);
      --parked_;
    }
    num_parked_.store(parked_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const std::string& id : ids) live_ids_.erase(id);
    }
    PublishGauges();
  }

  // ---- PD: consumer side ----

  struct PullJob {
    std::string request_id;
    transfer::PullSpec spec;     // empty remote_block_ids (and no pool_hashes) = release only
    std::vector<kv::BlockHash> pool_hashes;  // non-empty: a load from the KV pool
    std::vector<int32_t> pool_blocks;
    std::shared_ptr<std::atomic<bool>> cancel;
  };
  struct PullDone {
    std::string request_id;
    Status status;
    transfer::PullResult result;
    bool pool = false;
    PoolLoadResult pool_result;
    double seconds = 0;
  };

  bool AcceptRemotePrefill(const KvTransferParams& p, int n_prompt) const {
    std::string why;
    const int bs = options_.block_size;
    if (!options_.kv_transfer.consumer) {
      why = "this instance is not a KV consumer (--kv-transfer-config kv_role)";
    } else if (p.remote_block_size != bs) {
      why = "remote_block_size " + std::to_string(p.remote_block_size) + " differs from --block-size " +
            std::to_string(bs);
    } else if (p.num_prompt_blocks != (n_prompt + bs - 1) / bs ||
               static_cast<int>(p.remote_block_ids.size()) != p.num_prompt_blocks) {
      why = "the producer's " + std::to_string(p.remote_block_ids.size()) + " blocks do not cover this prompt of " +
            std::to_string(n_prompt) + " tokens";
    } else if (p.remote_host.empty() || p.remote_port <= 0 || p.remote_port > 65535 || p.remote_request_id.empty()) {
      why = "remote_host/remote_port/remote_request_id missing";
    }
    if (why.empty()) return true;
    TANDEM_LOG(WARNING) << "computing the prompt locally instead of pulling it: " << why;
    return false;
  }

  // ---- The KV pool connector ----

  int PoolLookup(Request* r, int computed) {
    const int bs = options_.block_size;
    if (!r->pool_counted) {
      r->pool_counted = true;
      metrics_.OnExternalQuery(static_cast<int>(r->tokens.size()));
    }
    const std::vector<kv::BlockHash>& hashes = kv_.GetBlockHashes(r->id);
    const int first = computed / bs;
    // Leave at least the last token to compute (its logits sample the next token).
    const int limit = std::min(static_cast<int>(hashes.size()), (static_cast<int>(r->tokens.size()) - 1) / bs);
    if (first >= limit) return 0;
    return kv_pool_->Lookup(std::vector<kv::BlockHash>(hashes.begin() + first, hashes.begin() + limit));
  }

  void SaveToPool(Request* r) {
    const std::vector<kv::BlockHash>& hashes = kv_.GetBlockHashes(r->id);
    const std::vector<int32_t>& table = kv_.GetBlockTable(r->id);
    const int full = std::min({static_cast<int>(hashes.size()), static_cast<int>(table.size()),
                               r->num_computed_tokens / options_.block_size});
    for (int i = r->num_pool_saved; i < full; ++i) kv_pool_->Save(hashes[i], table[i]);
    r->num_pool_saved = std::max(r->num_pool_saved, full);
  }

  void StartPoolLoad(Request* r) {
    const int first = r->num_computed_tokens / options_.block_size;
    const std::vector<kv::BlockHash>& hashes = kv_.GetBlockHashes(r->id);
    const std::vector<int32_t>& table = kv_.GetBlockTable(r->id);
    PullJob job;
    job.request_id = r->id;
    job.pool_hashes.assign(hashes.begin() + first, hashes.begin() + first + r->pool_load_blocks);
    job.pool_blocks.assign(table.begin() + first, table.begin() + first + r->pool_load_blocks);
    r->pulling = true;
    if (!options_.pool.load_async) {
      PullDone done;
      done.request_id = r->id;
      done.pool = true;
      const auto t0 = std::chrono::steady_clock::now();
      done.pool_result = kv_pool_->Load(job.pool_hashes, job.pool_blocks);
      done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      OnPullDone(done);
      return;
    }
    job.cancel = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard<std::mutex> lock(mu_);
    pull_cancels_[r->id] = job.cancel;
    pull_queue_.push_back(std::move(job));
    pull_cv_.notify_one();
  }

  void OnPoolLoaded(Request* r, const PullDone& done) {
    const int bs = options_.block_size;
    const int loaded = done.pool_result.blocks_loaded;
    r->pool_load_blocks = 0;
    const int computed = r->num_computed_tokens + loaded * bs;
    metrics_.OnExternalHit(loaded * bs, loaded - done.pool_result.blocks_remote, done.pool_result.blocks_remote);
    if (loaded > 0) {
      TANDEM_LOG(DEBUG) << "request " << r->id << ": " << loaded << " blocks from the KV pool ("
                        << done.pool_result.blocks_remote << " from another node)";
    }
    r->num_cached_tokens = std::max(r->num_cached_tokens, std::min(computed, r->prompt_len));
    r->num_pool_saved = std::max(r->num_pool_saved, computed / bs);
    scheduler_.PullFinished(r, computed);
    kv_.CacheComputedBlocks(r->id, r->tokens, computed);
    if (r->abort_after_pull) Finish(r, "abort");
  }

  void StartPull(Request* r) {
    if (!r->remote_prefill) return StartPoolLoad(r);
    const KvTransferParams& p = *r->remote_prefill;
    const std::vector<int32_t>& table = kv_.GetBlockTable(r->id);
    const int first = r->num_computed_tokens / options_.block_size;  // local prefix hit
    PullJob job;
    job.request_id = r->id;
    job.spec.host = p.remote_host;
    job.spec.port = p.remote_port;
    job.spec.remote_request_id = p.remote_request_id;
    job.spec.remote_block_ids.assign(p.remote_block_ids.begin() + first, p.remote_block_ids.end());
    job.spec.local_block_ids.assign(table.begin() + first, table.begin() + p.num_prompt_blocks);
    job.cancel = std::make_shared<std::atomic<bool>>(false);
    r->pulling = true;
    std::lock_guard<std::mutex> lock(mu_);
    pull_cancels_[r->id] = job.cancel;
    pull_queue_.push_back(std::move(job));
    pull_cv_.notify_one();
  }

  void CancelPull(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = pull_cancels_.find(id); it != pull_cancels_.end()) it->second->store(true);
  }

  void PullWorker() {
    while (true) {
      PullJob job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        pull_cv_.wait(lock, [&] { return !pull_queue_.empty() || stopping_; });
        if (pull_queue_.empty()) return;
        job = std::move(pull_queue_.front());
        pull_queue_.pop_front();
      }
      if (!job.pool_hashes.empty()) {
        PullDone done;
        done.request_id = job.request_id;
        done.pool = true;
        const auto t0 = std::chrono::steady_clock::now();
        if (!job.cancel->load()) done.pool_result = kv_pool_->Load(job.pool_hashes, job.pool_blocks);
        done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard<std::mutex> lock(mu_);
        pull_cancels_.erase(job.request_id);
        pull_done_.push_back(std::move(done));
        cv_.notify_one();
        continue;
      }
      if (job.spec.remote_block_ids.empty()) {  // release only
        Status s = transfer_client_->Release(job.spec.host, job.spec.port, job.spec.remote_request_id);
        if (!s.ok()) TANDEM_LOG(INFO) << "kv transfer: releasing " << job.spec.remote_request_id << ": " << s.message();
        continue;
      }
      const auto t0 = std::chrono::steady_clock::now();
      StatusOr<transfer::PullResult> result =
          job.cancel->load() ? StatusOr<transfer::PullResult>(CancelledError("kv transfer: cancelled"))
                             : transfer_client_->Pull(job.spec, job.cancel.get());
      PullDone done;
      done.request_id = job.request_id;
      done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (result.ok()) {
        done.result = *result;
      } else {
        done.status = result.status();
      }
      std::lock_guard<std::mutex> lock(mu_);
      pull_cancels_.erase(job.request_id);
      pull_done_.push_back(std::move(done));
      cv_.notify_one();
    }
  }

  void OnPullDone(const PullDone& done) {
    auto it = requests_.find(done.request_id);
    if (it == requests_.end()) return;
    Request* r = it->second.get();
    r->pulling = false;
    if (done.pool) return OnPoolLoaded(r, done);
    const KvTransferParams remote = *r->remote_prefill;
    r->remote_prefill.reset();  // from here on (even after a preemption) it computes locally
    metrics_.OnKvPull(done.status.ok(), done.result.bytes, done.seconds);
    if (r->abort_after_pull) {
      if (!done.status.ok()) EnqueueRelease(remote);
      scheduler_.PullFinished(r, r->num_computed_tokens);
      Finish(r, "abort");
      return;
    }
    if (!done.status.ok()) {
      TANDEM_LOG(WARNING) << "request " << r->id << ": pulling " << remote.num_prompt_blocks << " KV blocks from "
                          << remote.remote_host << ":" << remote.remote_port << " failed: " << done.status.message()
                          << (options_.kv_transfer.recompute_on_failure ? "; recomputing the prompt"
                                                                        : "; failing the request");
      EnqueueRelease(remote);
      scheduler_.PullFinished(r, r->num_computed_tokens);  // the local prefix hit stays valid
      if (!options_.kv_transfer.recompute_on_failure) {
        Finish(r, "error", UnavailableError("loading the prompt's KV cache from the prefill instance failed: " +
                                            done.status.message()));
      }
      return;
    }
    TANDEM_LOG(INFO) << "request " << r->id << ": pulled " << done.result.bytes << " bytes of KV in "
                     << static_cast<int>(done.seconds * 1000) << " ms" << (done.result.used_shm ? " (shared memory)" : "");
    const int32_t token = remote.last_token_id;
    const bool continue_after_token = r->params.logprobs < 0 && r->params.scripted_tokens.empty() && token >= 0 &&
                                      token < model_.config().n_vocab;
    kv_.CacheComputedBlocks(r->id, r->tokens, r->prompt_len);
    if (!continue_after_token) {
      // Recompute the last prompt token here, so the first output token gets this
      // engine's logits (logprobs) or script.
      scheduler_.PullFinished(r, r->prompt_len - 1);
      return;
    }
    scheduler_.PullFinished(r, r->prompt_len);
    r->sampler.Skip();  // the producer drew the first token with the request's seed
    metrics_.OnToken(r);
    std::optional<std::string> finish = output_.AppendToken(*r, token, nullptr);
    if (finish) {
      Finish(r, *finish);
    } else {
      RequestOutput out = output_.TakeOutput(*r, "");
      if (!out.new_tokens.empty() || !out.new_text.empty()) r->on_output(out);
    }
  }

  void EnqueueRelease(const KvTransferParams& remote) {
    PullJob job;
    job.spec.host = remote.remote_host;
    job.spec.port = remote.remote_port;
    job.spec.remote_request_id = remote.remote_request_id;
    job.cancel = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard<std::mutex> lock(mu_);
    pull_queue_.push_back(std::move(job));
    pull_cv_.notify_one();
  }

  void PublishGauges() {
    num_running_.store(scheduler_.num_running() + scheduler_.num_pulling());
    num_waiting_.store(scheduler_.num_waiting());
    kv_usage_.store(kv_.usage());
    metrics_.SetGauges(scheduler_.num_running(), scheduler_.num_waiting(), kv_.usage(), kv_.prefix_cache_stats());
    if (leases_) metrics_.SetKvLeases(leases_->size());
  }

  const Model& model_;
  EngineOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  Forward forward_;
  std::unique_ptr<KvArena> arena_owner_;
  KvArena& arena_;
  kv::KvCacheManager kv_;
  Scheduler scheduler_;
  OutputProcessor output_;
  EngineMetrics metrics_;
  std::vector<float> logits_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;  // engine thread
  std::vector<std::string> aborts;                                       // engine thread scratch

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Request>> inbox_;  // guarded by mu_
  std::vector<std::string> aborts_;              // guarded by mu_
  std::unordered_set<std::string> live_ids_;     // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
  bool lease_event_ = false;                     // guarded by mu_
  std::vector<PullDone> pull_done_;              // guarded by mu_
  std::deque<PullJob> pull_queue_;               // guarded by mu_
  std::unordered_map<std::string, std::shared_ptr<std::atomic<bool>>> pull_cancels_;  // guarded by mu_
  std::condition_variable pull_cv_;
  int parked_ = 0;                               // engine thread
  std::atomic<int> num_parked_{0};
  // PD transfer (declared after the arena: destroyed, and stopped, before it).
  std::unique_ptr<transfer::LeaseTable> leases_;
  std::unique_ptr<transfer::TransferServer> transfer_server_;
  std::unique_ptr<transfer::Transport> transport_;
  std::unique_ptr<transfer::TransferClient> transfer_client_;
  std::unique_ptr<PoolConnector> kv_pool_;
  std::vector<std::thread> pull_workers_;
  std::mt19937_64 rng_;                          // guarded by mu_
  std::atomic<int> num_running_{0};
  std::atomic<int> num_waiting_{0};
  std::atomic<double> kv_usage_{0};
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
  const int64_t block_bytes = KvArena::BytesPerToken(c.n_layers, c.kv_dim(), c.v_dim()) * options.block_size;
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
  TANDEM_LOG(INFO) << "KV cache: " << num_blocks << " blocks of " << options.block_size << " tokens ("
                   << block_bytes << " bytes each), " << num_blocks * options.block_size
                   << " tokens max; prefix caching " << (options.enable_prefix_caching ? "on" : "off");
  const bool shared = options.kv_transfer.producer && options.kv_transfer.same_host_shm;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<KvArena> arena,
                          KvArena::Create(num_blocks, c.n_layers, options.block_size, c.kv_dim(), c.v_dim(), shared));
  auto engine = std::make_unique<EngineImpl>(model, options, metrics, std::move(arena));
  TANDEM_RETURN_IF_ERROR(engine->Start());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace tandem
