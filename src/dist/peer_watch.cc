#include "dist/peer_watch.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/logging.h"
#include "dist/rendezvous_store.h"
#include "net/host_address.h"
#include "net/socket_connection.h"
#include "net/socket_listener.h"

namespace tandem::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds Remaining(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// A host that stops answering is given up after 5 s idle + 3 probes 2 s apart.
void KeepAlive(int fd) {
  const int on = 1, idle = 5, interval = 2, count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

std::array<uint8_t, 4> RankBytes(int rank) {
  const auto r = static_cast<uint32_t>(rank);
  return {static_cast<uint8_t>(r), static_cast<uint8_t>(r >> 8), static_cast<uint8_t>(r >> 16),
          static_cast<uint8_t>(r >> 24)};
}

}  // namespace

StatusOr<std::unique_ptr<PeerWatch>> PeerWatch::Connect(int rank, int size, const std::string& host,
                                                        RendezvousStoreClient& store, const std::string& key_prefix,
                                                        milliseconds timeout, const std::atomic<bool>* cancel) {
  const Clock::time_point deadline = Clock::now() + timeout;
  auto listener = net::SocketListener::ListenTcp(host, 0);
  if (!listener.ok()) return listener.status().WithContext("expert-parallel peer watch on " + host);
  TANDEM_RETURN_IF_ERROR(
      store.Set(key_prefix + "/" + std::to_string(rank), host + ":" + std::to_string((*listener)->port())));
  std::vector<std::unique_ptr<net::SocketConnection>> conns;
  std::vector<int> ranks;
  // Lower ranks listen already (they published after listening): connect to each.
  for (int peer = 0; peer < rank; ++peer) {
    auto address = store.Get(key_prefix + "/" + std::to_string(peer), Remaining(deadline), cancel);
    if (!address.ok()) return address.status();
    const size_t colon = address->rfind(':');
    if (colon == std::string::npos) return InvalidArgumentError("expert-parallel peer watch: address " + *address);
    const int port = std::atoi(address->c_str() + colon + 1);
    auto conn = net::ConnectTcp(address->substr(0, colon), static_cast<uint16_t>(port),
                                {.timeout = std::min(Remaining(deadline), milliseconds(10000))});
    if (!conn.ok()) {
      return conn.status().WithContext("expert-parallel peer watch: rank " + std::to_string(peer) + " at " + *address);
    }
    const auto me = RankBytes(rank);
    TANDEM_RETURN_IF_ERROR((*conn)->Send(me.data(), me.size()));
    conns.push_back(std::move(conn).value());
    ranks.push_back(peer);
  }
  // Higher ranks connect here and say who they are.
  while (static_cast<int>(conns.size()) < size - 1) {
    if (cancel != nullptr && cancel->load()) return CancelledError("expert-parallel peer watch: cancelled");
    if (Clock::now() >= deadline) {
      return DeadlineExceededError("expert-parallel peer watch: rank " + std::to_string(rank) + " waited " +
                                   std::to_string(timeout.count()) + " ms for the higher ranks to connect");
    }
    auto fd = (*listener)->Accept(std::min(Remaining(deadline), milliseconds(200)));
    if (!fd.ok()) {
      if (fd.status().code() == StatusCode::kDeadlineExceeded) continue;
      return fd.status().WithContext("expert-parallel peer watch");
    }
    auto conn = std::make_unique<net::SocketConnection>(std::move(fd).value());
    TANDEM_RETURN_IF_ERROR(conn->SetIoTimeout(std::max(Remaining(deadline), milliseconds(1))));
    std::array<uint8_t, 4> b{};
    TANDEM_RETURN_IF_ERROR(conn->Recv(b.data(), b.size()));
    const int peer = static_cast<int>(b[0] | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24));
    if (peer <= rank || peer >= size || std::find(ranks.begin(), ranks.end(), peer) != ranks.end()) {
      TANDEM_LOG(WARNING) << "expert-parallel peer watch: rank " << rank << " refused a connection saying rank "
                          << peer;
      continue;
    }
    TANDEM_RETURN_IF_ERROR(conn->SetIoTimeout(milliseconds(0)));
    conns.push_back(std::move(conn));
    ranks.push_back(peer);
  }
  net::UniqueFd wake(::eventfd(0, EFD_CLOEXEC));
  if (!wake.valid()) return UnavailableError(std::string("eventfd: ") + std::strerror(errno));
  for (auto& c : conns) KeepAlive(c->fd());
  return std::unique_ptr<PeerWatch>(new PeerWatch(rank, std::move(conns), std::move(ranks), std::move(wake)));
}

PeerWatch::PeerWatch(int rank, std::vector<std::unique_ptr<net::SocketConnection>> peers, std::vector<int> peer_ranks,
                     net::UniqueFd wake)
    : rank_(rank), peers_(std::move(peers)), peer_ranks_(std::move(peer_ranks)), wake_(std::move(wake)) {
  thread_ = std::thread([this] { Run(); });
}

PeerWatch::~PeerWatch() {
  const uint64_t one = 1;
  if (::write(wake_.get(), &one, sizeof(one)) != sizeof(one)) {
    TANDEM_LOG(ERROR) << "expert-parallel peer watch: eventfd write: " << std::strerror(errno);
  }
  thread_.join();
}  // peers_ close here

void PeerWatch::Run() {
  std::vector<pollfd> fds;
  for (const auto& c : peers_) fds.push_back({.fd = c->fd(), .events = POLLIN, .revents = 0});
  fds.push_back({.fd = wake_.get(), .events = POLLIN, .revents = 0});
  while (true) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      TANDEM_LOG(ERROR) << "expert-parallel peer watch: poll: " << std::strerror(errno);
      return;
    }
    if (fds.back().revents != 0) return;  // the destructor
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char c;
      const ssize_t got = ::recv(fds[i].fd, &c, 1, MSG_DONTWAIT);
      if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR))) continue;  // nothing is sent here
      Lost(peer_ranks_[i]);
      return;
    }
  }
}

void PeerWatch::Lost(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (lost_ >= 0) return;
  lost_ = peer;
  TANDEM_LOG(WARNING) << "expert parallel: rank " << rank_ << ": rank " << peer
                      << " left the group (its connection closed)";
  if (on_lost_) on_lost_(peer);
}

int PeerWatch::lost_peer() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

bool PeerWatch::Arm(std::function<void(int)> on_lost) {
  std::lock_guard<std::mutex> lock(mu_);
  if (lost_ >= 0) return false;
  on_lost_ = std::move(on_lost);
  return true;
}

void PeerWatch::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  on_lost_ = nullptr;
}

StatusOr<std::string> InterfaceAddress(const std::string& name) {
  StatusOr<std::string> found = net::InterfaceIpv4Address({.name = name});
  if (!found.ok() && found.status().code() == StatusCode::kNotFound) {
    return InvalidArgumentError("GLOO_SOCKET_IFNAME=" + name + ": no IPv4 address on that interface");
  }
  return found;
}

}  // namespace tandem::dist
