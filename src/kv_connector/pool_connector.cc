#include "kv_connector/pool_connector.h"

#include <algorithm>

#include "common/logging.h"
#include "engine/engine_metrics.h"
#include "engine/request.h"
#include "kv/kv_cache_manager.h"

namespace tandem {
namespace {

constexpr int kLoadWorkers = 2;

}  // namespace

PoolConnector::PoolConnector(KvConnectorContext context)
    : context_(std::move(context)), options_(context_.options->pool), block_size_(context_.options->block_size) {}

PoolConnector::~PoolConnector() { Stop(); }

Status PoolConnector::Start() {
  PoolStoreOptions po;
  po.worker_address = options_.worker_address;
  po.tp_rank = options_.tp_rank;
  po.soft_pin_ttl = std::chrono::seconds(options_.soft_pin_ttl_s);
  store_ = std::make_unique<PoolStore>(po, context_.model_fingerprint, context_.memory);
  EngineMetrics* metrics = context_.metrics;
  store_->SetSaveObserver([metrics](uint64_t stored, uint64_t existing, uint64_t dropped) {
    metrics->AddPoolSaves(stored, existing, dropped);
  });
  if (options_.load && options_.load_async) {
    for (int i = 0; i < kLoadWorkers; ++i) workers_.emplace_back([this] { LoadWorker(); });
  }
  TANDEM_LOG(INFO) << "KV pool connector: save " << (options_.save ? "on" : "off") << ", load "
                   << (options_.load ? (options_.load_async ? "on (async)" : "on") : "off");
  return Status::Ok();
}

void PoolConnector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  for (std::thread& w : workers_) w.join();
  workers_.clear();
}

int PoolConnector::GetNumNewMatchedTokens(const Request& r, int num_computed_tokens) {
  if (!options_.load) return 0;
  if (queried_.insert(r.id).second) context_.metrics->OnExternalQuery(static_cast<int>(r.tokens.size()));
  const std::vector<kv::BlockHash>& hashes = context_.kv->GetBlockHashes(r.id);
  const int first = num_computed_tokens / block_size_;
  // Leave at least the last token to compute (its logits sample the next token).
  const int limit = std::min(static_cast<int>(hashes.size()), (static_cast<int>(r.tokens.size()) - 1) / block_size_);
  if (first >= limit) return 0;
  return store_->Lookup(std::vector<kv::BlockHash>(hashes.begin() + first, hashes.begin() + limit)) * block_size_;
}

void PoolConnector::UpdateStateAfterAlloc(const Request& r, int num_computed_tokens, int num_external_tokens) {
  const int first = num_computed_tokens / block_size_;
  const int n = num_external_tokens / block_size_;
  const std::vector<kv::BlockHash>& hashes = context_.kv->GetBlockHashes(r.id);
  const std::vector<int32_t>& table = context_.kv->GetBlockTable(r.id);
  LoadJob job;
  job.request_id = r.id;
  job.num_computed_tokens = num_computed_tokens;
  job.hashes.assign(hashes.begin() + first, hashes.begin() + first + n);
  job.blocks.assign(table.begin() + first, table.begin() + first + n);
  job.cancel = std::make_shared<std::atomic<bool>>(false);
  to_start_.push_back(std::move(job));
}

PoolConnector::LoadDone PoolConnector::RunLoad(PoolStore& store, const LoadJob& job) {
  LoadDone done;
  done.request_id = job.request_id;
  done.num_computed_tokens = job.num_computed_tokens;
  if (!job.cancel->load()) done.result = store.Load(job.hashes, job.blocks);
  return done;
}

void PoolConnector::StartLoadKv() {
  for (LoadJob& job : to_start_) {
    if (!options_.load_async) {
      done_sync_.push_back(RunLoad(*store_, job));
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    cancels_[job.request_id] = job.cancel;
    queue_.push_back(std::move(job));
    cv_.notify_one();
  }
  to_start_.clear();
}

void PoolConnector::LoadWorker() {
  while (true) {
    LoadJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    LoadDone done = RunLoad(*store_, job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancels_.erase(job.request_id);
      done_.push_back(std::move(done));
    }
    context_.wake();
  }
}

void PoolConnector::CancelLoad(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = cancels_.find(request_id); it != cancels_.end()) it->second->store(true);
}

KvLoadResult PoolConnector::OnLoadDone(const LoadDone& done) {
  const int loaded = done.result.blocks_loaded;
  const PoolLoadResult& r = done.result;
  const int memory = loaded - r.blocks_disk - r.blocks_remote;
  context_.metrics->OnExternalHit(loaded * block_size_, memory, r.blocks_disk, r.blocks_remote);
  if (loaded > 0) {
    TANDEM_LOG(DEBUG) << "request " << done.request_id << ": " << loaded << " blocks from the KV pool ("
                      << memory << " local memory, " << r.blocks_disk << " local disk, " << r.blocks_remote
                      << " remote worker)";
  }
  KvLoadResult out;
  out.request_id = done.request_id;
  out.num_loaded_tokens = done.num_computed_tokens + loaded * block_size_;
  out.counts_as_cached = true;
  // What came from the pool is not saved back.
  int& saved = num_saved_[done.request_id];
  saved = std::max(saved, out.num_loaded_tokens / block_size_);
  return out;
}

void PoolConnector::GetFinished(bool, std::vector<KvLoadResult>* loads, std::vector<std::string>*) {
  std::vector<LoadDone> done;
  done.swap(done_sync_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (LoadDone& d : done_) done.push_back(std::move(d));
    done_.clear();
  }
  for (const LoadDone& d : done) loads->push_back(OnLoadDone(d));
}

void PoolConnector::SaveKv(const Request& r) {
  if (!options_.save) return;
  const std::vector<kv::BlockHash>& hashes = context_.kv->GetBlockHashes(r.id);
  const std::vector<int32_t>& table = context_.kv->GetBlockTable(r.id);
  const int full = std::min({static_cast<int>(hashes.size()), static_cast<int>(table.size()),
                             r.num_computed_tokens / block_size_});
  int& saved = num_saved_[r.id];
  for (int i = saved; i < full; ++i) store_->Save(hashes[i], table[i]);
  saved = std::max(saved, full);
}

KvFinishAction PoolConnector::RequestFinished(const Request& r, std::string_view) {
  queried_.erase(r.id);
  num_saved_.erase(r.id);
  return {};
}

}  // namespace tandem
