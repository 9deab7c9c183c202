// PdConnector: prefill/decode disaggregation (docs/KV_TRANSFER.md; vLLM's
// MooncakeConnector) as a KvConnector.
//
// Producer (kv_producer / kv_both): a finished do_remote_decode request's prompt blocks
// are kept under a lease (transfer::LeaseTable) instead of freed, and the final output
// carries the kv_transfer_params a decode instance needs; the transfer server serves
// them; the blocks are freed when the decoder is done (DONE), the proxy aborts, or the
// lease expires.
// Consumer (kv_consumer / kv_both): a request with remote_prefill has its prompt's blocks
// (beyond the local prefix hit) pulled from the producer by a pull worker. A failed pull
// releases the producer's lease and either recomputes the prompt here
// (kv_load_failure_policy "recompute") or fails the request ("fail"). A request is
// pulled at most once: after a preemption it recomputes.
//
// Thread safety: as KvConnector. Pull workers run their own threads; ReleaseKvBlocks and
// kv_transfer_port may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine/kv_connector.h"
#include "transfer/transfer_client.h"

namespace tandem {
namespace transfer {
class LeaseTable;
class TransferServer;
class Transport;
}  // namespace transfer

class PdConnector final : public KvConnector {
 public:
  explicit PdConnector(KvConnectorContext context);
  ~PdConnector() override;

  Status Start() override;
  void Stop() override;
  void AcceptRequest(KvTransferRequest* kv_transfer, int n_prompt) const override;

  int GetNumNewMatchedTokens(const Request& r, int num_computed_tokens) override;
  void UpdateStateAfterAlloc(const Request& r, int num_computed_tokens, int num_external_tokens) override;
  KvFinishAction RequestFinished(const Request& r, std::string_view reason) override;

  void StartLoadKv() override;
  void SaveKv(const Request&) override {}
  void GetFinished(bool stopping, std::vector<KvLoadResult>* loads, std::vector<std::string>* freeable) override;
  void CancelLoad(const std::string& request_id) override;

  std::optional<std::chrono::steady_clock::time_point> NextDeadline() const override;
  bool ReleaseKvBlocks(const std::string& remote_request_id) override;
  int kv_transfer_port() const override;
  int num_kept() const override { return num_kept_; }

 private:
  // One pull, or (empty remote_block_ids) only a release of the producer's lease.
  struct PullJob {
    std::string request_id;
    transfer::PullSpec spec;
    std::shared_ptr<std::atomic<bool>> cancel;
  };
  struct PullDone {
    std::string request_id;
    Status status;
    transfer::PullResult result;
    double seconds = 0;
  };
  // A consumer request from admission to the end of its pull.
  struct Pull {
    KvTransferParams remote;
    int num_local_tokens = 0;  // the local prefix hit the pull starts after
    int32_t n_prompt = 0;
  };

  void PullWorker();
  void Enqueue(PullJob job);
  void EnqueueRelease(const KvTransferParams& remote);
  KvLoadResult OnPullDone(const PullDone& done);
  std::optional<KvTransferParams> Keep(const Request& r);

  const KvConnectorContext context_;
  const KvTransferOptions& options_;
  const int block_size_;

  // Engine thread.
  std::unordered_map<std::string, Pull> pulls_;        // admitted, pull pending or running
  std::vector<PullJob> to_start_;                      // UpdateStateAfterAlloc -> StartLoadKv
  std::unordered_set<std::string> pulled_;             // pull attempted: never again
  int num_kept_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PullJob> queue_;                          // guarded by mu_
  std::vector<PullDone> done_;                         // guarded by mu_
  std::unordered_map<std::string, std::shared_ptr<std::atomic<bool>>> cancels_;  // guarded by mu_
  bool stopping_ = false;                              // guarded by mu_
  std::vector<std::thread> workers_;

  std::unique_ptr<transfer::LeaseTable> leases_;
  std::unique_ptr<transfer::TransferServer> server_;
  std::unique_ptr<transfer::Transport> transport_;
  std::unique_ptr<transfer::TransferClient> client_;
};

}  // namespace tandem
