#include "transfer/transfer_server.h"

#include <unistd.h>

#include "common/logging.h"
#include "net/framed_socket.h"
#include "net/secret_equals.h"
#include "transfer/wire.h"

namespace tandem::transfer {
namespace {

// Both listeners of a server: TCP (tuned for bulk sends), and the same-host Unix socket,
// which hands out the whole KV arena's memfd and so serves only this user (or root).
StatusOr<std::unique_ptr<net::SocketListener>> Listen(const TransferServerOptions& options,
                                                      bool unix_socket, int port) {
  StatusOr<std::unique_ptr<net::SocketListener>> listener =
      unix_socket
          ? net::SocketListener::ListenUnix(UnixSocketName(port), {.require_owner_peer = true})
          : net::SocketListener::ListenTcp(options.bind_host, static_cast<uint16_t>(port),
                                           {.tcp_nodelay = true, .tcp_send_buffer_bytes = 4 << 20});
  if (!listener.ok()) return listener.status().WithContext("kv transfer");
  return listener;
}

}  // namespace

TransferServer::TransferServer(TransferServerOptions options, KvMemory memory, LeaseTable* leases,
                               std::string model_fingerprint)
    : options_(std::move(options)), memory_(memory), leases_(leases), fingerprint_(std::move(model_fingerprint)) {}

TransferServer::~TransferServer() { Stop(); }

Status TransferServer::Start() {
  if (options_.port < 0 || options_.port > 65535) {
    return InvalidArgumentError("kv transfer: bad port " + std::to_string(options_.port));
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<net::SocketListener> tcp,
                          Listen(options_, false, options_.port));
  port_ = tcp->port();
  listeners_.push_back(std::move(tcp));
  if (options_.enable_unix_socket && memory_.fd >= 0) {
    StatusOr<std::unique_ptr<net::SocketListener>> unix_listener = Listen(options_, true, port_);
    if (unix_listener.ok()) {
      listeners_.push_back(std::move(unix_listener).value());
    } else {
      TANDEM_LOG(WARNING) << unix_listener.status().message() << "; same-host pulls will use TCP";
    }
  }
  for (auto& listener : listeners_)
    acceptors_.emplace_back([this, l = listener.get()] { AcceptLoop(*l); });
  TANDEM_LOG(INFO) << "KV transfer server on " << options_.bind_host << ":" << port_
                   << (listeners_.size() > 1 ? " (and the same-host unix socket)" : "");
  return Status::Ok();
}

void TransferServer::Stop() {
  if (stopping_.exchange(true)) return;
  for (auto& listener : listeners_) listener->Shutdown();
  for (auto& t : acceptors_) t.join();
  listeners_.clear();
  std::unique_lock<std::mutex> lock(mu_);
  for (Connection* c : live_) c->Shutdown();
  idle_cv_.wait(lock, [&] { return num_connections_ == 0; });
}

void TransferServer::AcceptLoop(net::SocketListener& listener) {
  const bool unix_socket = listener.is_unix();
  while (!stopping_.load()) {
    StatusOr<net::UniqueFd> fd = listener.Accept();
    if (!fd.ok()) {
      switch (fd.status().code()) {
        case StatusCode::kCancelled:
          return;
        case StatusCode::kDeadlineExceeded:
          continue;
        case StatusCode::kResourceExhausted:
          usleep(10000);
          continue;
        case StatusCode::kPermissionDenied:
          // Abstract sockets have no file permissions; the memfd it hands out is the whole
          // KV arena, so only this user (or root) may have it (common/peer_credentials.h).
          stats_.errors.fetch_add(1);
          TANDEM_LOG(WARNING) << "kv transfer: refusing a same-host peer: "
                              << fd.status().message();
          continue;
        default:
          TANDEM_LOG(WARNING) << "kv transfer: accept: " << fd.status().message();
          return;
      }
    }
    auto conn = std::make_unique<net::SocketConnection>(std::move(fd).value());
    (void)conn->SetIoTimeout(options_.socket.io_timeout);
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
    std::string payload;
    Status s = RecvControlFrame(*conn, &header, &payload);
    if (!s.ok()) {
      // A closed or idle connection is normal; anything else is worth a line.
      if (s.code() == StatusCode::kDataLoss || s.code() == StatusCode::kFailedPrecondition) {
        stats_.errors.fetch_add(1);
        TANDEM_LOG(WARNING) << "kv transfer: dropping a connection: " << s.message();
        (void)SendControlFrame(*conn, FrameType::kError, EncodeError(s));
      }
      break;
    }
    if (header.type == FrameType::kHello) {
      StatusOr<std::string> token = DecodeDone(net::AsBytes(payload));
      if (!authenticated && (!token.ok() || !net::SecretEquals(*token, options_.auth_token))) {
        stats_.errors.fetch_add(1);
        TANDEM_LOG(WARNING) << "kv transfer: refusing a peer with a wrong auth token";
        (void)SendControlFrame(*conn, FrameType::kError,
                               EncodeError(UnauthenticatedError("wrong kv transfer auth token")));
        break;
      }
      authenticated = true;
      if (!SendControlFrame(*conn, FrameType::kAck, "").ok()) break;
      continue;
    }
    if (!authenticated) {
      stats_.errors.fetch_add(1);
      (void)SendControlFrame(*conn, FrameType::kError,
                             EncodeError(UnauthenticatedError(
                                 "this kv transfer server requires an auth token (HELLO)")));
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
        (void)SendControlFrame(*conn, FrameType::kError, EncodeError(s));
        if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded) break;
      }
    } else if (header.type == FrameType::kDone) {
      StatusOr<std::string> id = DecodeDone(net::AsBytes(payload));
      if (!id.ok()) {
        (void)SendControlFrame(*conn, FrameType::kError, EncodeError(id.status()));
        break;
      }
      if (pinned && *id == pinned_id) {
        leases_->Unpin(pinned_id);
        pinned = false;
      }
      leases_->Release(*id);
      if (!SendControlFrame(*conn, FrameType::kAck, "").ok()) break;
    } else {
      (void)SendControlFrame(
          *conn, FrameType::kError,
          EncodeError(InvalidArgumentError("unexpected frame type " +
                                           std::to_string(static_cast<int>(header.type)))));
      break;
    }
  }
  if (pinned) leases_->Unpin(pinned_id);
}

Status TransferServer::HandlePull(Connection& conn, const std::string& payload, bool shm,
                                  bool* pinned, std::string* pinned_id) {
  TANDEM_ASSIGN_OR_RETURN(PullRequest pull, DecodePull(net::AsBytes(payload)));
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
    Status s = net::SendFrame(conn, header, body, memory_.fd);
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
  return SendControlFrame(conn, FrameType::kPullEnd, "");
}

}  // namespace tandem::transfer
