// PoolConnector: the KV pool (docs/POOL.md; vLLM-Ascend's AscendStoreConnector) as a
// KvConnector, over a PoolStore.
//
// Save: after every forward pass, the request's new full blocks go to the pool
// (write-behind, never blocking the step). Load: a waiting request whose local prefix
// hit ends before its prompt does asks the pool for the longest run of the following
// block keys; those blocks are loaded into its blocks, in the step (`load_async` false)
// or on a worker thread, and count as prefix-cache hits. The pool is an optimisation:
// a miss, a dead worker or a malformed object only means computing the tokens here.
//
// Thread safety: as KvConnector; the load worker (async mode) runs its own thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine/kv_connector.h"
#include "kv_connector/pool_store.h"

namespace tandem {

class PoolConnector final : public KvConnector {
 public:
  explicit PoolConnector(KvConnectorContext context);
  ~PoolConnector() override;

  Status Start() override;
  void Stop() override;
  void AcceptRequest(KvTransferRequest*, int) const override {}

  int GetNumNewMatchedTokens(const Request& r, int num_computed_tokens) override;
  void UpdateStateAfterAlloc(const Request& r, int num_computed_tokens, int num_external_tokens) override;
  KvFinishAction RequestFinished(const Request& r, std::string_view reason) override;

  void StartLoadKv() override;
  void SaveKv(const Request& r) override;
  void GetFinished(bool stopping, std::vector<KvLoadResult>* loads, std::vector<std::string>* freeable) override;
  void CancelLoad(const std::string& request_id) override;

 private:
  struct LoadJob {
    std::string request_id;
    int num_computed_tokens = 0;  // the local prefix hit; the load's blocks follow it
    std::vector<kv::BlockHash> hashes;
    std::vector<int32_t> blocks;  // same length
    std::shared_ptr<std::atomic<bool>> cancel;
  };
  struct LoadDone {
    std::string request_id;
    int num_computed_tokens = 0;
    PoolLoadResult result;
  };

  void LoadWorker();
  static LoadDone RunLoad(PoolStore& store, const LoadJob& job);
  KvLoadResult OnLoadDone(const LoadDone& done);

  const KvConnectorContext context_;
  const PoolOptions& options_;
  const int block_size_;
  std::unique_ptr<PoolStore> store_;

  // Engine thread.
  std::unordered_set<std::string> queried_;           // counted in the external queries
  std::unordered_map<std::string, int> num_saved_;    // leading full blocks handed to the pool
  std::vector<LoadJob> to_start_;
  std::vector<LoadDone> done_sync_;                   // loads run in the step

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<LoadJob> queue_;                         // guarded by mu_
  std::vector<LoadDone> done_;                        // guarded by mu_
  std::unordered_map<std::string, std::shared_ptr<std::atomic<bool>>> cancels_;  // guarded by mu_
  bool stopping_ = false;                             // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace tandem
