// ExpertParallelGroup: the data-parallel ranks of a MoE model that share its experts
// (--enable-expert-parallel), joined over Gloo's TCP transport — the CPU collective
// library PyTorch uses — and the collectives MoeFfn needs (model/expert_exchange.h):
// the counts and rows all-to-alls of dispatch and combine, and the all-reduce the engine
// loops step in lockstep by.
//
// Joining: rank 0 serves the rendezvous store (dist/rendezvous_store.h) on
// address:store_port; each rank binds Gloo's device to the interface named by
// GLOO_SOCKET_IFNAME (vllm-ascend deployments set it), else to its own address on the route to
// `address`, publishes it, and connects to every other rank (a full mesh). A rank that
// starts first waits, logging, up to `join_timeout`.
//
// Failure: a lost peer is seen by the group's PeerWatch (dist/peer_watch.h: a plain
// connection to every rank, which closes when the rank's process ends), which aborts
// the collective in progress; Gloo reports other failures (and a collective past
// `timeout`) by an exception. Either becomes status() (Unavailable) and every later call
// fails at once. The rank then closes its connections, so the ranks waiting on it fail
// too, and starts re-forming the group in the background: every rank takes a new ticket
// at the store (the restarted rank too; a restarted rank 0 serves a new store), and the
// ranks of the next generation connect a new mesh. TryResume, called by the engine loop
// between steps, installs it, so every rank starts the new generation at the same
// collective.
//
// The all-to-alls are this file's own, over Gloo's unbound buffers (point-to-point
// sends and receives), so that the watch can abort their waits; the step all-reduce is
// an all-to-all of one value.
//
// Thread safety: one thread at a time (the engine loop).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "common/status.h"
#include "dist/peer_watch.h"
#include "model/expert_exchange.h"

namespace gloo {
class Context;
}

namespace tandem::dist {

class RendezvousStoreServer;

struct ExpertParallelOptions {
  int rank = 0;
  int size = 1;
  std::string address = "127.0.0.1";  // rank 0's host (--data-parallel-address)
  uint16_t store_port = 0;              // --data-parallel-rpc-port + 1
  std::chrono::milliseconds join_timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // one collective
};

class ExpertParallelGroup final : public ExpertExchange {
 public:
  // Blocks until every rank has joined. Errors: DeadlineExceeded when the store or a
  // rank did not answer within join_timeout, Unavailable when Gloo could not connect.
  static StatusOr<std::unique_ptr<ExpertParallelGroup>> Join(const ExpertParallelOptions& options);
  ~ExpertParallelGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status ExchangeCounts(std::span<const int64_t> send, std::span<int64_t> recv) override;
  Status ExchangeRows(const float* send, std::span<const int64_t> send_rows, float* recv,
                      std::span<const int64_t> recv_rows, int64_t row_floats) override;
  StatusOr<bool> AnyRank(bool local) override;
  Status status() const override { return status_; }
  bool TryResume() override;

 private:
  // One formed group: Gloo's mesh and the watch on the same ranks.
  struct Generation {
    std::shared_ptr<gloo::Context> context;
    std::unique_ptr<PeerWatch> watch;
  };

  explicit ExpertParallelGroup(const ExpertParallelOptions& options);
  // Connects to the store, takes a ticket and joins its generation's full mesh.
  StatusOr<Generation> Form() const;
  template <typename Fn>
  Status Collective(const char* what, Fn&& fn);
  // Rank r sends send_bytes[d] bytes (from send + the sum of the ones before) to each
  // rank d and receives recv_bytes[s] from each rank s, in rank order; throws when a
  // peer is lost or Gloo fails.
  void AllToAll(const char* send, std::span<const size_t> send_bytes, char* recv, std::span<const size_t> recv_bytes,
                uint32_t tag);

  const ExpertParallelOptions options_;
  const int rank_, size_;
  std::unique_ptr<RendezvousStoreServer> store_;  // rank 0
  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<PeerWatch> watch_;
  uint32_t tag_ = 0;
  Status status_;
  // Re-forming after a failure: the background join and its result.
  std::thread rejoin_;
  std::mutex rejoin_mu_;
  bool rejoin_done_ = false;  // guarded by rejoin_mu_
  StatusOr<Generation> rejoined_ = UnavailableError("not re-formed");  // guarded by rejoin_mu_
  bool rejoin_given_up_ = false;
  std::atomic<bool> stopping_{false};  // set by the destructor
};

}  // namespace tandem::dist
