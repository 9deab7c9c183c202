#include "dist/rendezvous_store.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <span>

#include "common/logging.h"
#include "net/framed_socket.h"

namespace tandem::dist {
namespace {

constexpr uint8_t kOpSet = 1, kOpGet = 2, kOpAdd = 3;
constexpr uint8_t kFound = 0, kMissing = 1;
constexpr uint32_t kMaxBody = 16u << 20;
constexpr size_t kHeader = 8;

std::array<uint8_t, kHeader> Header(uint8_t op, uint8_t status, size_t key_len, size_t value_len) {
  std::array<uint8_t, kHeader> h{};
  h[0] = op;
  h[1] = status;
  h[2] = static_cast<uint8_t>(key_len);
  h[3] = static_cast<uint8_t>(key_len >> 8);
  for (int i = 0; i < 4; ++i) h[4 + i] = static_cast<uint8_t>(value_len >> (8 * i));
  return h;
}

uint32_t KeyLen(std::span<const uint8_t> h) { return h[2] | (uint32_t{h[3]} << 8); }
uint32_t ValueLen(std::span<const uint8_t> h) {
  return h[4] | (uint32_t{h[5]} << 8) | (uint32_t{h[6]} << 16) | (uint32_t{h[7]} << 24);
}

StatusOr<uint32_t> BodyLength(std::span<const uint8_t> h) {
  const uint64_t n = uint64_t{KeyLen(h)} + ValueLen(h);
  if (n > kMaxBody) return InvalidArgumentError("rendezvous store: a frame of " + std::to_string(n) + " bytes");
  return static_cast<uint32_t>(n);
}

Status Send(net::Connection& conn, uint8_t op, uint8_t status, std::string_view key, std::string_view value) {
  if (key.size() > 0xffff) return InvalidArgumentError("rendezvous store: key of " + std::to_string(key.size()) + " bytes");
  const auto h = Header(op, status, key.size(), value.size());
  const std::string_view parts[] = {key, value};
  return net::SendFrame(conn, h, parts);
}

}  // namespace

StatusOr<std::unique_ptr<RendezvousStoreServer>> RendezvousStoreServer::Start(const std::string& host,
                                                                              uint16_t port) {
  auto listener = net::SocketListener::ListenTcp(host, port, {.tcp_nodelay = true});
  if (!listener.ok()) {
    return listener.status().WithContext("expert-parallel rendezvous store on " + host + ":" + std::to_string(port));
  }
  return std::unique_ptr<RendezvousStoreServer>(new RendezvousStoreServer(std::move(listener).value()));
}

RendezvousStoreServer::RendezvousStoreServer(std::unique_ptr<net::SocketListener> listener)
    : listener_(std::move(listener)) {
  accept_ = std::thread([this] { AcceptLoop(); });
}

RendezvousStoreServer::~RendezvousStoreServer() {
  listener_->Shutdown();
  accept_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& c : conns_) c->Shutdown();
  }
  for (auto& t : threads_) t.join();
}

void RendezvousStoreServer::AcceptLoop() {
  while (true) {
    auto fd = listener_->Accept();
    if (!fd.ok()) {
      if (fd.status().code() == StatusCode::kCancelled) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    conns_.push_back(std::make_unique<net::SocketConnection>(std::move(fd).value()));
    net::SocketConnection* conn = conns_.back().get();
    threads_.emplace_back([this, conn] { Serve(conn); });
  }
}

void RendezvousStoreServer::Serve(net::SocketConnection* conn) {
  std::array<uint8_t, kHeader> h{};
  std::string body;
  while (net::RecvFrame(*conn, h, BodyLength, kMaxBody, &body).ok()) {
    const std::string key = body.substr(0, KeyLen(h));
    Status sent;
    if (h[0] == kOpSet) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        values_[key] = body.substr(KeyLen(h));
      }
      sent = Send(*conn, kOpSet, kFound, {}, {});
    } else if (h[0] == kOpAdd) {
      const std::string delta = body.substr(KeyLen(h));
      std::string value;
      {
        std::lock_guard<std::mutex> lock(mu_);
        const int64_t now = std::strtoll(values_[key].c_str(), nullptr, 10) + std::strtoll(delta.c_str(), nullptr, 10);
        value = values_[key] = std::to_string(now);
      }
      sent = Send(*conn, kOpAdd, kFound, {}, value);
    } else if (h[0] == kOpGet) {
      std::string value;
      bool found = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = values_.find(key);
        if (it != values_.end()) {
          value = it->second;
          found = true;
        }
      }
      sent = Send(*conn, kOpGet, found ? kFound : kMissing, {}, value);
    } else {
      TANDEM_LOG(WARNING) << "expert-parallel rendezvous store: unknown op " << int{h[0]} << "; closing the connection";
      return;
    }
    if (!sent.ok()) return;
  }
}

StatusOr<std::unique_ptr<RendezvousStoreClient>> RendezvousStoreClient::Connect(const std::string& host,
                                                                                uint16_t port,
                                                                                std::chrono::milliseconds timeout,
                                                                                const std::atomic<bool>* cancel) {
  const std::string address = host + ":" + std::to_string(port);
  const auto start = std::chrono::steady_clock::now();
  auto last_log = start;
  while (true) {
    auto conn = net::ConnectTcp(host, port, {.timeout = std::chrono::milliseconds(2000)});
    if (conn.ok()) {
      return std::unique_ptr<RendezvousStoreClient>(new RendezvousStoreClient(std::move(conn).value(), address));
    }
    if (conn.status().code() == StatusCode::kInvalidArgument) return conn.status().WithContext(address);
    if (cancel != nullptr && cancel->load()) return CancelledError("rendezvous at " + address + ": cancelled");
    const auto now = std::chrono::steady_clock::now();
    if (now - start >= timeout) {
      return DeadlineExceededError("nothing answered at the expert-parallel rendezvous " + address +
                                   " (--data-parallel-address, --data-parallel-rpc-port + 1; served by data-parallel rank 0) within " +
                                   std::to_string(timeout.count() / 1000) + " s: " + conn.status().message());
    }
    if (now - last_log >= std::chrono::seconds(5)) {
      last_log = now;
      TANDEM_LOG(INFO) << "waiting for the expert-parallel rendezvous at " << address << " (rank 0): "
                       << conn.status().message();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

StatusOr<int> RendezvousStoreClient::Call(uint8_t op, const std::string& key, const std::string& value,
                                          std::string* answer) {
  TANDEM_RETURN_IF_ERROR(Send(*conn_, op, 0, key, value).WithContext("rendezvous store " + address_));
  std::array<uint8_t, kHeader> h{};
  TANDEM_RETURN_IF_ERROR(net::RecvFrame(*conn_, h, BodyLength, kMaxBody, answer).WithContext("rendezvous store " + address_));
  if (h[0] != op) return DataLossError("rendezvous store " + address_ + ": answer to another request");
  return int{h[1]};
}

Status RendezvousStoreClient::Set(const std::string& key, const std::string& value) {
  std::string answer;
  return Call(kOpSet, key, value, &answer).status();
}

StatusOr<int64_t> RendezvousStoreClient::Add(const std::string& key, int64_t delta) {
  std::string answer;
  TANDEM_RETURN_IF_ERROR(Call(kOpAdd, key, std::to_string(delta), &answer).status());
  return static_cast<int64_t>(std::strtoll(answer.c_str(), nullptr, 10));
}

StatusOr<std::string> RendezvousStoreClient::Get(const std::string& key, std::chrono::milliseconds timeout,
                                                 const std::atomic<bool>* cancel) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::string value;
    TANDEM_ASSIGN_OR_RETURN(int status, Call(kOpGet, key, {}, &value));
    if (status == kFound) return value;
    if (cancel != nullptr && cancel->load()) return CancelledError("rendezvous at " + address_ + ": cancelled");
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceededError("expert-parallel rendezvous: no rank published '" + key + "' within " +
                                   std::to_string(timeout.count() / 1000) + " s (is every rank started?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace tandem::dist
