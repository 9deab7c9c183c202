#include "dist/expert_parallel_group.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "common/logging.h"
#include "dist/rendezvous_store.h"

namespace tandem::dist {
namespace {

// Gloo's Store over the rendezvous client. Gloo expects failures as exceptions.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(std::unique_ptr<RendezvousStoreClient> client, std::chrono::milliseconds timeout,
            const std::atomic<bool>* cancel)
      : client_(std::move(client)), timeout_(timeout), cancel_(cancel) {}

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
  std::unique_ptr<RendezvousStoreClient> client_;
  const std::chrono::milliseconds timeout_;
  const std::atomic<bool>* cancel_;
};

}  // namespace

StatusOr<std::string> LocalAddressToward(const std::string& host) {
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(9);
  if (::inet_pton(AF_INET, host.c_str(), &peer.sin_addr) != 1) {
    return InvalidArgumentError("--data-parallel-address " + host + " is not an IPv4 address");
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError("socket: " + std::string(std::strerror(errno)));
  sockaddr_in self{};
  socklen_t len = sizeof(self);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return UnavailableError("no route to --data-parallel-address " + host + ": " + std::strerror(err));
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &self.sin_addr, text, sizeof(text));
  return std::string(text);
}

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
  g->context_ = std::move(formed).value();
  return g;
}

StatusOr<std::shared_ptr<gloo::Context>> ExpertParallelGroup::Form() const {
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
  if (iface != nullptr && *iface != '\0') {
    attr.iface = iface;
  } else {
    auto local = LocalAddressToward(o.address);
    if (!local.ok()) return local.status();
    attr.hostname = *local;
  }
  TANDEM_LOG(INFO) << "expert parallel: rank " << o.rank << " of " << o.size << " joining through " << o.address
                   << ":" << o.store_port << " (Gloo TCP on "
                   << (attr.iface.empty() ? attr.hostname : "interface " + attr.iface) << "), generation "
                   << generation;
  try {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    GlooStore store(std::move(client).value(), o.join_timeout, &stopping_);
    gloo::rendezvous::PrefixStore prefixed("tandem-ep/g" + std::to_string(generation), store);
    auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
    context->setTimeout(o.join_timeout);
    context->connectFullMesh(prefixed, device);
    context->setTimeout(o.timeout);
    TANDEM_LOG(INFO) << "expert parallel: rank " << o.rank << " of " << o.size << " joined (generation "
                     << generation << ")";
    return std::shared_ptr<gloo::Context>(std::move(context));
  } catch (const std::exception& e) {
    return UnavailableError(std::string("expert-parallel group: joining failed: ") + e.what());
  }
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
  context_ = std::move(rejoined_).value();
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
  try {
    fn(tag_++);
  } catch (const std::exception& e) {
    status_ = UnavailableError(std::string("expert-parallel group (rank ") + std::to_string(rank_) + " of " +
                               std::to_string(size_) + "): " + what + " failed: " + e.what());
    TANDEM_LOG(ERROR) << status_.message();
    // Closing every connection fails the collectives the other ranks wait in at once
    // (a ring all-reduce may not talk to the rank that left), so the whole group stops
    // rather than each rank waiting out its timeout. Then re-form it in the background
    // (TryResume installs it at a step boundary).
    context_.reset();
    if (!rejoin_given_up_ && !rejoin_.joinable()) {
      rejoin_ = std::thread([this] {
        auto formed = Form();
        std::lock_guard<std::mutex> lock(rejoin_mu_);
        rejoined_ = std::move(formed);
        rejoin_done_ = true;
      });
    }
  }
  return status_;
}

Status ExpertParallelGroup::ExchangeCounts(std::span<const int64_t> send, std::span<int64_t> recv) {
  TANDEM_CHECK(static_cast<int>(send.size()) == size_ && static_cast<int>(recv.size()) == size_);
  std::vector<int64_t> in(send.begin(), send.end());
  return Collective("the counts all-to-all", [&](uint32_t tag) {
    gloo::AlltoallOptions opts(context_);
    opts.setInput(in.data(), in.size());
    opts.setOutput(recv.data(), recv.size());
    opts.setTag(tag);
    gloo::alltoall(opts);
  });
}

Status ExpertParallelGroup::ExchangeRows(const float* send, std::span<const int64_t> send_rows, float* recv,
                                         std::span<const int64_t> recv_rows, int64_t row_floats) {
  std::vector<int64_t> out_elems, in_elems;
  int64_t total_out = 0, total_in = 0;
  for (int64_t r : send_rows) {
    out_elems.push_back(r * row_floats);
    total_out += r * row_floats;
  }
  for (int64_t r : recv_rows) {
    in_elems.push_back(r * row_floats);
    total_in += r * row_floats;
  }
  float dummy_out = 0, dummy_in = 0;  // Gloo wants a buffer even for nothing
  return Collective("the rows all-to-all", [&](uint32_t tag) {
    gloo::AlltoallvOptions opts(context_);
    opts.setInput(total_out > 0 ? const_cast<float*>(send) : &dummy_out, out_elems);
    opts.setOutput(total_in > 0 ? recv : &dummy_in, in_elems);
    opts.setTag(tag);
    gloo::alltoallv(opts);
  });
}

StatusOr<bool> ExpertParallelGroup::AnyRank(bool local) {
  int32_t v = local ? 1 : 0;
  Status s = Collective("the step all-reduce", [&](uint32_t tag) {
    gloo::AllreduceOptions opts(context_);
    opts.setInput(&v, 1);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<int32_t>));
    opts.setTag(tag);
    gloo::allreduce(opts);
  });
  if (!s.ok()) return s;
  return v != 0;
}

}  // namespace tandem::dist
