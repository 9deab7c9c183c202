#include "transfer/transfer_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/logging.h"
#include "common/peer_credentials.h"
#include "transfer/wire.h"

namespace tandem::transfer {
namespace {

Status SendFrame(Connection& conn, FrameType type, const std::string& payload) {
  uint8_t header[kHeaderBytes];
  EncodeHeader(type, static_cast<uint32_t>(payload.size()), header);
  const void* parts[2] = {header, payload.data()};
  const size_t sizes[2] = {kHeaderBytes, payload.size()};
  return conn.Send(parts, sizes, payload.empty() ? 1 : 2);
}

Status RecvFrame(Connection& conn, FrameHeader* header, std::vector<uint8_t>* payload) {
  uint8_t raw[kHeaderBytes];
  TANDEM_RETURN_IF_ERROR(conn.Recv(raw, kHeaderBytes));
  TANDEM_ASSIGN_OR_RETURN(*header, DecodeHeader(raw));
  if (header->type == FrameType::kBlocks) return DataLossError("kv transfer: unexpected BLOCKS frame");
  payload->resize(header->payload_bytes);
  if (header->payload_bytes > 0) TANDEM_RETURN_IF_ERROR(conn.Recv(payload->data(), payload->size()));
  return Status::Ok();
}

StatusOr<int> Listen(const TransferServerOptions& options, bool unix_socket, int* port) {
  int fd;
  if (unix_socket) {
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return InternalError(std::string("socket: ") + std::strerror(errno));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string name = UnixSocketName(*port);
    std::memcpy(addr.sun_path, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
      const int e = errno;
      close(fd);
      return UnavailableError("kv transfer: cannot bind unix socket @" + name.substr(1) + ": " + std::strerror(e));
    }
  } else {
    const bool v6 = options.bind_host.find(':') != std::string::npos;
    fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return InternalError(std::string("socket: ") + std::strerror(errno));
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage storage{};
    socklen_t len;
    if (v6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
      a->sin6_family = AF_INET6;
      a->sin6_port = htons(static_cast<uint16_t>(*port));
      if (inet_pton(AF_INET6, options.bind_host.c_str(), &a->sin6_addr) != 1) {
        close(fd);
        return InvalidArgumentError("kv transfer: bad bind address " + options.bind_host);
      }
      len = sizeof(*a);
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&storage);
      a->sin_family = AF_INET;
      a->sin_port = htons(static_cast<uint16_t>(*port));
      if (inet_pton(AF_INET, options.bind_host.c_str(), &a->sin_addr) != 1) {
        close(fd);
        return InvalidArgumentError("kv transfer: bad bind address " + options.bind_host);
      }
      len = sizeof(*a);
    }
    if (bind(fd, reinterpret_cast<sockaddr*>(&storage), len) != 0) {
      const int e = errno;
      close(fd);
      return UnavailableError("kv transfer: cannot listen on " + options.bind_host + ":" + std::to_string(*port) +
                              ": " + std::strerror(e));
    }
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
    *port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                     : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  if (listen(fd, 128) != 0) {
    const int e = errno;
    close(fd);
    return UnavailableError(std::string("kv transfer: listen: ") + std::strerror(e));
  }
  return fd;
}

// Compares without an early exit, so the token cannot be found byte by byte from timings.
bool SameToken(const std::string& given, const std::string& token) {
  if (given.size() != token.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ token[i]);
  return diff == 0;
}

}  // namespace

TransferServer::TransferServer(TransferServerOptions options, KvMemory memory, LeaseTable* leases,
                               std::string model_fingerprint)
    : options_(std::move(options)), memory_(memory), leases_(leases), fingerprint_(std::move(model_fingerprint)) {}

TransferServer::~TransferServer() { Stop(); }

Status TransferServer::Start() {
  port_ = options_.port;
  TANDEM_ASSIGN_OR_RETURN(int tcp_fd, Listen(options_, false, &port_));
  listen_fds_.push_back(tcp_fd);
  acceptors_.emplace_back([this, tcp_fd] { AcceptLoop(tcp_fd, false); });
  if (options_.enable_unix_socket && memory_.fd >= 0) {
    StatusOr<int> unix_fd = Listen(options_, true, &port_);
    if (unix_fd.ok()) {
      listen_fds_.push_back(*unix_fd);
      acceptors_.emplace_back([this, fd = *unix_fd] { AcceptLoop(fd, true); });
    } else {
      TANDEM_LOG(WARNING) << unix_fd.status().message() << "; same-host pulls will use TCP";
    }
  }
  TANDEM_LOG(INFO) << "KV transfer server on " << options_.bind_host << ":" << port_
                   << (listen_fds_.size() > 1 ? " (and the same-host unix socket)" : "");
  return Status::Ok();
}

void TransferServer::Stop() {
  if (stopping_.exchange(true)) return;
  for (int fd : listen_fds_) shutdown(fd, SHUT_RDWR);
  for (auto& t : acceptors_) t.join();
  for (int fd : listen_fds_) close(fd);
  std::unique_lock<std::mutex> lock(mu_);
  for (Connection* c : live_) c->Shutdown();
  idle_cv_.wait(lock, [&] { return num_connections_ == 0; });
}

void TransferServer::AcceptLoop(int listen_fd, bool unix_socket) {
  while (!stopping_.load()) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (stopping_.load()) return;
      if (errno == EMFILE || errno == ENFILE) {
        usleep(10000);
        continue;
      }
      return;
    }
    if (unix_socket) {
      // Abstract sockets have no file permissions; the memfd it hands out is the whole
      // KV arena, so only this user (or root) may have it (common/peer_credentials.h).
      if (Status peer = CheckUnixPeerIsOwner(fd); !peer.ok()) {
        stats_.errors.fetch_add(1);
        TANDEM_LOG(WARNING) << "kv transfer: refusing a same-host peer: " << peer.message();
        close(fd);
        continue;
      }
    } else {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      const int buf = 4 << 20;
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    }
    std::unique_ptr<Connection> conn = MakeSocketConnection(fd, options_.socket);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.load() || num_connections_ >= options_.max_connections) {
      TANDEM_LOG(WARNING) << "kv transfer: refusing a connection (" << num_connections_ << " open)";
      continue;  // conn closes here
    }
    ++num_connections_;
    live_.insert(conn.get());
    std::thread([this, c = std::move(conn), unix_socket]() mutable {
      Serve(*c, unix_socket);
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(c.get());
      c.reset();
      --num_connections_;
      idle_cv_.notify_all();
    }).detach();
  }
}

void TransferServer::Serve(Connection& conn_ref, bool unix_socket) {
  Connection* conn = &conn_ref;
  bool pinned = false;
  std::string pinned_id;
  bool authenticated = options_.auth_token.empty();
  while (!stopping_.load()) {
    FrameHeader header;
    std::vector<uint8_t> payload;
    Status s = RecvFrame(*conn, &header, &payload);
    if (!s.ok()) {
      // A closed or idle connection is normal; anything else is worth a line.
      if (s.code() == StatusCode::kDataLoss || s.code() == StatusCode::kFailedPrecondition) {
        stats_.errors.fetch_add(1);
        TANDEM_LOG(WARNING) << "kv transfer: dropping a connection: " << s.message();
        (void)SendFrame(*conn, FrameType::kError, EncodeError(s));
      }
      break;
    }
    if (header.type == FrameType::kHello) {
      StatusOr<std::string> token = DecodeDone(payload);
      if (!authenticated && (!token.ok() || !SameToken(*token, options_.auth_token))) {
        stats_.errors.fetch_add(1);
        TANDEM_LOG(WARNING) << "kv transfer: refusing a peer with a wrong auth token";
        (void)SendFrame(*conn, FrameType::kError, EncodeError(UnauthenticatedError("wrong kv transfer auth token")));
        break;
      }
      authenticated = true;
      if (!SendFrame(*conn, FrameType::kAck, "").ok()) break;
      continue;
    }
    if (!authenticated) {
      stats_.errors.fetch_add(1);
      (void)SendFrame(*conn, FrameType::kError,
                      EncodeError(UnauthenticatedError("this kv transfer server requires an auth token (HELLO)")));
      break;
    }
    if (header.type == FrameType::kPull || header.type == FrameType::kShmPull) {
      const bool shm = header.type == FrameType::kShmPull;
      if (shm && !unix_socket) {
        s = InvalidArgumentError("SHM_PULL is only served on the unix socket");
      } else if (pinned) {
        s = FailedPreconditionError("a pull is already in progress on this connection");
      } else {
        s = HandlePull(*conn, payload, shm, &pinned, &pinned_id);
      }
      if (!s.ok()) {
        stats_.errors.fetch_add(1);
        TANDEM_LOG(WARNING) << "kv transfer: pull failed: " << s.message();
        (void)SendFrame(*conn, FrameType::kError, EncodeError(s));
        if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded) break;
      }
    } else if (header.type == FrameType::kDone) {
      StatusOr<std::string> id = DecodeDone(payload);
      if (!id.ok()) {
        (void)SendFrame(*conn, FrameType::kError, EncodeError(id.status()));
        break;
      }
      if (pinned && *id == pinned_id) {
        leases_->Unpin(pinned_id);
        pinned = false;
      }
      leases_->Release(*id);
      if (!SendFrame(*conn, FrameType::kAck, "").ok()) break;
    } else {
      (void)SendFrame(*conn, FrameType::kError,
                      EncodeError(InvalidArgumentError("unexpected frame type " +
                                                       std::to_string(static_cast<int>(header.type)))));
      break;
    }
  }
  if (pinned) leases_->Unpin(pinned_id);
}

Status TransferServer::HandlePull(Connection& conn, const std::vector<uint8_t>& payload, bool shm, bool* pinned,
                                  std::string* pinned_id) {
  TANDEM_ASSIGN_OR_RETURN(PullRequest pull, DecodePull(payload));
  if (pull.model_fingerprint != fingerprint_) {
    return FailedPreconditionError("model mismatch: the producer serves model " + fingerprint_ +
                                   ", the consumer " + pull.model_fingerprint);
  }
  if (pull.k_block_bytes != memory_.k_block_bytes || pull.v_block_bytes != memory_.v_block_bytes) {
    return FailedPreconditionError("KV block geometry mismatch (same --block-size and model on both sides?)");
  }
  for (int32_t b : pull.block_ids) {
    if (b < 0 || b >= memory_.num_blocks) return InvalidArgumentError("block id " + std::to_string(b) + " out of range");
  }
  TANDEM_RETURN_IF_ERROR(leases_->Acquire(pull.request_id, pull.block_ids));
  if (shm) {
    // The reader copies under our pin; DONE (or the connection ending) unpins.
    *pinned = true;
    *pinned_id = pull.request_id;
    stats_.shm_pulls.fetch_add(1);
    ShmMap map{memory_.map_size, memory_.keys_offset, memory_.values_offset, memory_.arena_id};
    const std::string body = EncodeShmMap(map);
    uint8_t header[kHeaderBytes];
    EncodeHeader(FrameType::kShmMap, static_cast<uint32_t>(body.size()), header);
    std::string frame(reinterpret_cast<const char*>(header), kHeaderBytes);
    frame += body;
    Status s = conn.SendWithFd(frame.data(), frame.size(), memory_.fd);
    if (s.ok()) {
      stats_.blocks_sent.fetch_add(pull.block_ids.size());
      stats_.bytes_sent.fetch_add(pull.block_ids.size() * (memory_.k_block_bytes + memory_.v_block_bytes));
    }
    return s;
  }
  stats_.tcp_pulls.fetch_add(1);
  const uint64_t block_bytes = memory_.k_block_bytes + memory_.v_block_bytes;
  const auto n = static_cast<uint32_t>(pull.block_ids.size());
  Status result = Status::Ok();
  for (uint32_t first = 0; first < n && result.ok(); first += kMaxBlocksPerFrame) {
    const uint32_t count = std::min(kMaxBlocksPerFrame, n - first);
    uint8_t header[kHeaderBytes];
    uint8_t prefix[kBlocksPrefixBytes];
    EncodeHeader(FrameType::kBlocks, static_cast<uint32_t>(kBlocksPrefixBytes + block_bytes * count), header);
    EncodeBlocksPrefix(first, count, prefix);
    const void* parts[2 + 2 * kMaxBlocksPerFrame];
    size_t sizes[2 + 2 * kMaxBlocksPerFrame];
    int k = 0;
    parts[k] = header;
    sizes[k++] = kHeaderBytes;
    parts[k] = prefix;
    sizes[k++] = kBlocksPrefixBytes;
    for (uint32_t i = first; i < first + count; ++i) {
      parts[k] = memory_.BlockK(pull.block_ids[i]);
      sizes[k++] = memory_.k_block_bytes;
      parts[k] = memory_.BlockV(pull.block_ids[i]);
      sizes[k++] = memory_.v_block_bytes;
    }
    result = conn.Send(parts, sizes, k);
    if (result.ok()) {
      leases_->Renew(pull.request_id);
      stats_.blocks_sent.fetch_add(count);
      stats_.bytes_sent.fetch_add(block_bytes * count);
    }
  }
  leases_->Unpin(pull.request_id);
  TANDEM_RETURN_IF_ERROR(result);
  return SendFrame(conn, FrameType::kPullEnd, "");
}

}  // namespace tandem::transfer
