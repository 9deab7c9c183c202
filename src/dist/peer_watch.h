// PeerWatch: a plain TCP connection from this rank of an expert-parallel group to every
// other rank, and a thread that watches them, so that a rank that is gone is seen at
// once: its process ended (the kernel closes its sockets) or its host stopped answering
// (TCP keepalive, about 11 s). Nothing is sent on these connections; their closing is
// the message, and a rank that leaves the group on purpose (a failed collective, a
// shutdown) closes its own so that the others stop too.
//
// Why beside Gloo's own connections: Gloo's TCP pair, when its connection fails, fails
// the operations it has not started but not one it is in the middle of (a send half
// written to a peer that was killed), so a collective would wait out its timeout
// (dist/expert_parallel_group.cc aborts its waits from OnLost instead).
//
// Joining: each rank listens on its own address (port 0), publishes host:port in the
// rendezvous store under `<key_prefix>/<rank>`, connects to every lower rank (sending
// its rank, 4 bytes) and accepts every higher one.
//
// Thread safety: lost_peer, Arm and Disarm from any thread; the callback runs on the
// watch's thread (or on Arm's caller when a peer is already gone), under the watch's
// lock: it must not call back into the watch.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "net/unique_fd.h"

namespace tandem::net {
class SocketConnection;
}

namespace tandem::dist {

class RendezvousStoreClient;

class PeerWatch {
 public:
  // Errors: DeadlineExceeded (a rank did not publish or connect within `timeout`),
  // Cancelled (`cancel` was set), Unavailable (a listen or connect failed).
  static StatusOr<std::unique_ptr<PeerWatch>> Connect(int rank, int size, const std::string& host,
                                                      RendezvousStoreClient& store, const std::string& key_prefix,
                                                      std::chrono::milliseconds timeout,
                                                      const std::atomic<bool>* cancel = nullptr);
  // Closes every connection (the other ranks see this rank leave) and joins the thread.
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // The first rank found gone, or -1 while every one is connected.
  int lost_peer() const;
  // Calls `on_lost(rank)` once when a rank is found gone, until Disarm. Returns false
  // (and registers nothing) when one already is.
  bool Arm(std::function<void(int)> on_lost);
  void Disarm();

 private:
  PeerWatch(int rank, std::vector<std::unique_ptr<net::SocketConnection>> peers, std::vector<int> peer_ranks,
            net::UniqueFd wake);
  void Run();
  void Lost(int peer);

  const int rank_;
  const std::vector<std::unique_ptr<net::SocketConnection>> peers_;
  const std::vector<int> peer_ranks_;  // peers_[i] is rank peer_ranks_[i]
  const net::UniqueFd wake_;           // eventfd: the destructor ends the thread
  mutable std::mutex mu_;
  int lost_ = -1;                       // guarded by mu_
  std::function<void(int)> on_lost_;  // guarded by mu_
  std::thread thread_;
};

// The IPv4 address of network interface `name` (GLOO_SOCKET_IFNAME).
StatusOr<std::string> InterfaceAddress(const std::string& name);

}  // namespace tandem::dist
