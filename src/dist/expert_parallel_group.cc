#include "dist/expert_parallel_group.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "common/logging.h"
#include "dist/peer_watch.h"
#include "dist/rendezvous_store.h"
#include "net/host_address.h"

namespace tandem::dist {
namespace {

// Gloo's Store over the rendezvous client. Gloo expects failures as exceptions.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(RendezvousStoreClient* client, std::chrono::milliseconds timeout, const std::atomic<bool>* cancel)
      : client_(client), timeout_(timeout), cancel_(cancel) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Status s = client_->Set(key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw std::runtime_error(s.ToString());
  }
  std::vector<char> get(const std::string& key) override {
    auto v = client_->Get(key, timeout_, cancel_);
    if (!v.ok()) throw std::runtime_error(v.status().ToString());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& key : keys) {
      auto v = client_->Get(key, timeout, cancel_);
      if (!v.ok()) throw std::runtime_error(v.status().ToString());
    }
  }

 private:
  RendezvousStoreClient* const client_;
  const std::chrono::milliseconds timeout_;
  const std::atomic<bool>* cancel_;
};

// Slots of this file's all-to-alls (Gloo's own collectives use prefixes below 0x10).
constexpr uint8_t kAllToAllSlotPrefix = 0x21;

std::string LeftMessage(int peer) { return "rank " + std::to_string(peer) + " left the group (its connection closed)"; }

}  // namespace

StatusOr<std::unique_ptr<ExpertParallelGroup>> ExpertParallelGroup::Join(const ExpertParallelOptions& o) {
  if (o.size < 2 || o.rank < 0 || o.rank >= o.size) {
    return InvalidArgumentError("expert-parallel rank " + std::to_string(o.rank) + " of " + std::to_string(o.size));
  }
  std::unique_ptr<ExpertParallelGroup> g(new ExpertParallelGroup(o));
  if (o.rank == 0) {
    auto server = RendezvousStoreServer::Start(o.address, o.store_port);
    if (!server.ok()) return server.status();
    g->store_ = std::move(server).value();
  }
  auto formed = g->Form();
  if (!formed.ok()) return formed.status();
  g->context_ = std::move(formed->context);
  g->watch_ = std::move(formed->watch);
  return g;
}

StatusOr<ExpertParallelGroup::Generation> ExpertParallelGroup::Form() const {
  const ExpertParallelOptions& o = options_;
  auto client = RendezvousStoreClient::Connect(o.address, o.store_port, o.join_timeout, &stopping_);
  if (!client.ok()) return client.status();
  // Every rank that (re)joins takes a ticket; tickets 1..N form generation 0, the next N
  // generation 1, ...: after a failure every surviving rank and the restarted one take
  // one each, so they meet in the same generation (a new rank 0 starts a new store).
  auto ticket = (*client)->Add("tandem-ep/joins", 1);
  if (!ticket.ok()) return ticket.status();
  const int64_t generation = (*ticket - 1) / o.size;
  gloo::transport::tcp::attr attr;
  const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
  const bool by_iface = iface != nullptr && *iface != '\0';
  auto local = by_iface ? InterfaceAddress(iface) : net::RouteSourceAddress(o.address, "--data-parallel-address");
  if (!local.ok()) return local.status();
  if (by_iface) {
    attr.iface = iface;
  } else {
    attr.hostname = *local;
  }
  TANDEM_LOG(INFO) << "expert parallel: rank " << o.rank << " of " << o.size << " joining through " << o.address
                   << ":" << o.store_port << " (Gloo TCP on "
                   << (attr.iface.empty() ? attr.hostname : "interface " + attr.iface) << "), generation "
                   << generation;
  const std::string prefix = "tandem-ep/g" + std::to_string(generation);
  Generation formed;
  try {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    GlooStore store(client->get(), o.join_timeout, &stopping_);
    gloo::rendezvous::PrefixStore prefixed(prefix, store);
    auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
    context->setTimeout(o.join_timeout);
    context->connectFullMesh(prefixed, device);
    context->setTimeout(o.timeout);
    formed.context = std::move(context);
  } catch (const std::exception& e) {
    return UnavailableError(std::string("expert-parallel group: joining failed: ") + e.what());
  }
  auto watch = PeerWatch::Connect(o.rank, o.size, *local, **client, prefix + "/watch", o.join_timeout, &stopping_);
  if (!watch.ok()) return watch.status().WithContext("expert-parallel group: joining failed");
  formed.watch = std::move(watch).value();
  TANDEM_LOG(INFO) << "expert parallel: rank " << o.rank << " of " << o.size << " joined (generation " << generation
                   << ")";
  return formed;
}

bool ExpertParallelGroup::TryResume() {
  if (status_.ok()) return false;
  {
    std::lock_guard<std::mutex> lock(rejoin_mu_);
    if (!rejoin_done_) return false;
  }
  rejoin_.join();
  rejoin_done_ = false;
  if (!rejoined_.ok()) {
    // Nobody came back within the join timeout: the group stays broken.
    TANDEM_LOG(ERROR) << "expert parallel: rank " << rank_ << " could not re-form the group: "
                      << rejoined_.status().message() << "; restart the ranks";
    rejoin_given_up_ = true;
    return false;
  }
  context_ = std::move(rejoined_->context);
  watch_ = std::move(rejoined_->watch);
  rejoined_ = UnavailableError("taken");
  tag_ = 0;  // a new generation counts its collectives from 0 on every rank (tags must match)
  status_ = Status::Ok();
  return true;
}

ExpertParallelGroup::ExpertParallelGroup(const ExpertParallelOptions& options)
    : options_(options), rank_(options.rank), size_(options.size) {}

ExpertParallelGroup::~ExpertParallelGroup() {
  stopping_ = true;  // ends a re-forming join's waits
  if (rejoin_.joinable()) rejoin_.join();
}

template <typename Fn>
Status ExpertParallelGroup::Collective(const char* what, Fn&& fn) {
  if (!status_.ok()) return status_;
  std::string error;
  if (const int lost = watch_->lost_peer(); lost >= 0) {
    error = LeftMessage(lost);
  } else {
    try {
      fn(tag_++);
      return status_;
    } catch (const std::exception& e) {
      error = e.what();
      // Gloo may see the closed connection first; say which rank it was when the watch knows.
      const int gone = watch_->lost_peer();
      if (gone >= 0 && error.find("left the group") == std::string::npos) error = LeftMessage(gone) + ": " + error;
    }
  }
  status_ = UnavailableError(std::string("expert-parallel group (rank ") + std::to_string(rank_) + " of " +
                             std::to_string(size_) + "): " + what + " failed: " + error);
  TANDEM_LOG(ERROR) << status_.message();
  // Closing every connection (the watch's too) fails the collectives the other ranks wait
  // in at once (a rank may not talk to the one that left in this collective), so the
  // whole group stops rather than each rank waiting out its timeout. Then re-form it in
  // the background (TryResume installs it at a step boundary).
  context_.reset();
  watch_.reset();
  if (!rejoin_given_up_ && !rejoin_.joinable()) {
    rejoin_ = std::thread([this] {
      auto formed = Form();
      std::lock_guard<std::mutex> lock(rejoin_mu_);
      rejoined_ = std::move(formed);
      rejoin_done_ = true;
    });
  }
  return status_;
}

void ExpertParallelGroup::AllToAll(const char* send, std::span<const size_t> send_bytes, char* recv,
                                   std::span<const size_t> recv_bytes, uint32_t tag) {
  TANDEM_CHECK(static_cast<int>(send_bytes.size()) == size_ && static_cast<int>(recv_bytes.size()) == size_);
  TANDEM_CHECK(send_bytes[rank_] == recv_bytes[rank_]);
  std::vector<size_t> send_at(size_), recv_at(size_);
  size_t send_total = 0, recv_total = 0;
  for (int r = 0; r < size_; ++r) {
    send_at[r] = send_total;
    recv_at[r] = recv_total;
    send_total += send_bytes[r];
    recv_total += recv_bytes[r];
  }
  char none = 0;  // Gloo wants a buffer even for nothing
  auto out = context_->createUnboundBuffer(send_total > 0 ? const_cast<char*>(send) : &none,
                                           std::max<size_t>(send_total, 1));
  auto in = context_->createUnboundBuffer(recv_total > 0 ? recv : &none, std::max<size_t>(recv_total, 1));
  gloo::transport::UnboundBuffer* out_buf = out.get();
  gloo::transport::UnboundBuffer* in_buf = in.get();
  if (!watch_->Arm([out_buf, in_buf](int) {
        out_buf->abortWaitSend();
        in_buf->abortWaitRecv();
      })) {
    throw std::runtime_error(LeftMessage(watch_->lost_peer()));
  }
  struct Disarm {
    PeerWatch* watch;
    ~Disarm() { watch->Disarm(); }
  } disarm{watch_.get()};  // before the buffers go
  const uint64_t slot = gloo::Slot::build(kAllToAllSlotPrefix, tag);
  int sends = 0, recvs = 0;
  for (int k = 1; k < size_; ++k) {
    const int to = (rank_ + k) % size_, from = (rank_ + size_ - k) % size_;
    if (send_bytes[to] > 0) {
      out->send(to, slot, send_at[to], send_bytes[to]);
      ++sends;
    }
    if (recv_bytes[from] > 0) {
      in->recv(from, slot, recv_at[from], recv_bytes[from]);
      ++recvs;
    }
  }
  if (send_bytes[rank_] > 0) std::memcpy(recv + recv_at[rank_], send + send_at[rank_], send_bytes[rank_]);
  const std::chrono::milliseconds timeout = context_->getTimeout();
  for (; recvs > 0; --recvs) {
    if (!in->waitRecv(nullptr, timeout)) throw std::runtime_error(LeftMessage(watch_->lost_peer()));
  }
  for (; sends > 0; --sends) {
    if (!out->waitSend(nullptr, timeout)) throw std::runtime_error(LeftMessage(watch_->lost_peer()));
  }
}

Status ExpertParallelGroup::ExchangeCounts(std::span<const int64_t> send, std::span<int64_t> recv) {
  TANDEM_CHECK(static_cast<int>(send.size()) == size_ && static_cast<int>(recv.size()) == size_);
  const std::vector<size_t> bytes(size_, sizeof(int64_t));
  return Collective("the counts all-to-all", [&](uint32_t tag) {
    AllToAll(reinterpret_cast<const char*>(send.data()), bytes, reinterpret_cast<char*>(recv.data()), bytes, tag);
  });
}

Status ExpertParallelGroup::ExchangeRows(const float* send, std::span<const int64_t> send_rows, float* recv,
                                         std::span<const int64_t> recv_rows, int64_t row_floats) {
  std::vector<size_t> out_bytes, in_bytes;
  for (int64_t r : send_rows) out_bytes.push_back(static_cast<size_t>(r * row_floats) * sizeof(float));
  for (int64_t r : recv_rows) in_bytes.push_back(static_cast<size_t>(r * row_floats) * sizeof(float));
  return Collective("the rows all-to-all", [&](uint32_t tag) {
    AllToAll(reinterpret_cast<const char*>(send), out_bytes, reinterpret_cast<char*>(recv), in_bytes, tag);
  });
}

StatusOr<bool> ExpertParallelGroup::AnyRank(bool local) {
  // Every rank sends its flag to every rank; each takes the OR of what it received.
  const std::vector<int32_t> out(size_, local ? 1 : 0);
  std::vector<int32_t> in(size_, 0);
  const std::vector<size_t> bytes(size_, sizeof(int32_t));
  Status s = Collective("the step all-reduce", [&](uint32_t tag) {
    AllToAll(reinterpret_cast<const char*>(out.data()), bytes, reinterpret_cast<char*>(in.data()), bytes, tag);
  });
  if (!s.ok()) return s;
  return std::any_of(in.begin(), in.end(), [](int32_t v) { return v != 0; });
}

}  // namespace tandem::dist
