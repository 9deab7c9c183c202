// EngineImpl: the step loop of the serving engine (see engine.h).
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
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
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_cache_manager.h"
#include "model/forward.h"
#include "model/model.h"

namespace tandem {
namespace {

class EngineImpl final : public Engine {
 public:
  EngineImpl(const Model& model, const EngineOptions& options, MetricsRegistry* metrics, int64_t num_blocks)
      : model_(model),
        options_(options),
        pool_(std::make_unique<ThreadPool>(options.threads, options.cpu_ids)),
        forward_(model.config(), model.weights(), pool_.get()),
        arena_(num_blocks, model.config().n_layers, options.block_size, model.config().kv_dim(),
               model.config().v_dim()),
        kv_(kv::KvCacheConfig{static_cast<int32_t>(num_blocks), options.block_size,
                              options.enable_prefix_caching, model.fingerprint(), "f16"}),
        scheduler_(&kv_, options.max_num_seqs, options.max_num_batched_tokens),
        output_(model.tokenizer()),
        metrics_(metrics, options.model_name),
        rng_(std::random_device{}()) {
    thread_ = std::thread([this] { Loop(); });
  }

  ~EngineImpl() override { Shutdown(); }

  Status AddRequest(EngineRequest request) override {
    const int n = static_cast<int>(request.prompt_tokens.size());
    if (n == 0) return InvalidArgumentError("the prompt is empty");
    if (!request.on_output) return InvalidArgumentError("no output callback");
    if (n >= options_.max_model_len) {
      return InvalidArgumentError("This model's maximum context length is " + std::to_string(options_.max_model_len) +
                                  " tokens. However, your request has " + std::to_string(n) +
                                  " input tokens. Please reduce the length of the input messages.");
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
      if (stopping_ && !thread_.joinable()) return;
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !aborts_.empty() || scheduler_.has_work(); });
        for (auto& r : inbox_) {
          Request* raw = r.get();
          requests_[raw->id] = std::move(r);
          scheduler_.AddRequest(raw);
        }
        inbox_.clear();
        aborts.swap(aborts_);
        if (stopping_) {
          for (auto& [id, r] : requests_) aborts.push_back(id);
        }
      }
      for (const std::string& id : aborts) {
        auto it = requests_.find(id);
        if (it != requests_.end()) Finish(it->second.get(), "abort");
      }
      aborts.clear();
      if (stopping_ && requests_.empty()) {
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
    int64_t row = 0;
    std::vector<float> raw;
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      Request* r = plan.scheduled[i].request;
      r->num_computed_tokens += plan.scheduled[i].num_new_tokens;
      kv_.CacheComputedBlocks(r->id, r->tokens, r->num_computed_tokens);
      if (!samples[i]) continue;
      float* l = logits_.data() + row++ * n_vocab;
      const bool want_logprobs = r->params.logprobs >= 0;
      if (want_logprobs) raw.assign(l, l + n_vocab);
      ApplyLogitsProcessors(*r, model_.tokenizer(), l, n_vocab);
      const std::vector<int32_t>& script = r->params.scripted_tokens;
      if (!script.empty() && r->num_output_tokens() >= static_cast<int>(script.size())) {
        Finish(r, "stop");
        continue;
      }
      const int32_t token = script.empty() ? r->sampler.Sample(l, n_vocab) : script[r->num_output_tokens()];
      TokenLogprob lp;
      if (want_logprobs) lp = ComputeLogprobs(raw.data(), n_vocab, token, r->params.logprobs);
      metrics_.OnToken(r);
      std::optional<std::string> finish = output_.AppendToken(*r, token, want_logprobs ? &lp : nullptr);
      if (finish) {
        Finish(r, *finish);
      } else {
        RequestOutput out = output_.TakeOutput(*r, "");
        if (!out.new_tokens.empty() || !out.new_text.empty()) r->on_output(out);
      }
    }
  }

  void Finish(Request* r, const std::string& reason) {
    scheduler_.FinishRequest(r);
    RequestOutput out = output_.TakeOutput(*r, reason);
    metrics_.OnFinished(*r, reason);
    TANDEM_LOG(INFO) << "request " << r->id << " finished: reason=" << reason << " prompt_tokens=" << r->prompt_len
                     << " num_computed_tokens=" << (r->prompt_len - std::max(0, r->num_cached_tokens))
                     << " cached_tokens=" << std::max(0, r->num_cached_tokens)
                     << " completion_tokens=" << r->num_output_tokens();
    PublishGauges();  // the blocks are free before the client hears the request is done
    r->on_output(out);
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_ids_.erase(r->id);
    }
    requests_.erase(r->id);
  }

  void PublishGauges() {
    num_running_.store(scheduler_.num_running());
    num_waiting_.store(scheduler_.num_waiting());
    kv_usage_.store(kv_.usage());
    metrics_.SetGauges(scheduler_.num_running(), scheduler_.num_waiting(), kv_.usage(), kv_.prefix_cache_stats());
  }

  const Model& model_;
  EngineOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  Forward forward_;
  KvArena arena_;
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
  return std::unique_ptr<Engine>(new EngineImpl(model, options, metrics, num_blocks));
}

}  // namespace tandem
