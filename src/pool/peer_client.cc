#include "pool/peer_client.h"

#include "pool/messages.h"

namespace tandem::pool {

StatusOr<std::unique_ptr<net::SocketConnection>> PeerClient::Connect(const std::string& peer) {
  TANDEM_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(peer));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<net::SocketConnection> conn,
                          net::ConnectTcp(hp.host, hp.port, {.timeout = options_.connect_timeout}));
  TANDEM_RETURN_IF_ERROR(conn->SetIoTimeout(options_.io_timeout));
  std::string hello = EncodeHelloRequest({options_.auth_token, static_cast<uint8_t>(Role::kPeer)});
  TANDEM_RETURN_IF_ERROR(SendFrame(*conn, {MsgType::kHello, 0, 0, 0}, hello));
  FrameHeader h;
  std::string body;
  TANDEM_RETURN_IF_ERROR(RecvFrame(*conn, &h, &body));
  TANDEM_RETURN_IF_ERROR(StatusFromResponse(h, body));
  return conn;
}

void PeerClient::Reset(const std::string& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.erase(peer);
  down_until_.erase(peer);
}

StatusOr<std::string> PeerClient::Call(const std::string& peer, MsgType type, std::string body) {
  std::unique_ptr<net::SocketConnection> conn;
  uint64_t request_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto down = down_until_.find(peer);
    if (down != down_until_.end()) {
      if (std::chrono::steady_clock::now() < down->second) {
        return UnavailableError("pool worker " + peer + " is down (recent failure)");
      }
      down_until_.erase(down);
    }
    auto& idle = idle_[peer];
    if (!idle.empty()) {
      conn = std::move(idle.back());
      idle.pop_back();
    }
    request_id = next_request_id_++;
  }
  auto attempt = [&](net::SocketConnection& c) -> StatusOr<std::string> {
    TANDEM_RETURN_IF_ERROR(SendFrame(c, {type, 0, 0, request_id}, body));
    FrameHeader h;
    std::string reply;
    TANDEM_RETURN_IF_ERROR(RecvFrame(c, &h, &reply));
    if (h.request_id != request_id || h.type != type) return DataLossError("mismatched response");
    TANDEM_RETURN_IF_ERROR(StatusFromResponse(h, reply));
    return reply;
  };
  StatusOr<std::string> result = UnavailableError("no connection");
  if (conn != nullptr) {
    result = attempt(*conn);
    // A pooled connection may have been closed by the peer meanwhile: retry once fresh.
    if (!result.ok() && result.status().code() == StatusCode::kUnavailable) conn.reset();
  }
  if (conn == nullptr) {
    auto fresh = Connect(peer);
    if (fresh.ok()) {
      conn = std::move(fresh).value();
      result = attempt(*conn);
    } else {
      result = fresh.status();
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (result.ok()) {
    auto& idle = idle_[peer];
    if (idle.size() < options_.max_idle_per_peer) idle.push_back(std::move(conn));
  } else {
    StatusCode code = result.status().code();
    if (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
        code == StatusCode::kDataLoss) {
      down_until_[peer] = std::chrono::steady_clock::now() + options_.down_backoff;
      idle_.erase(peer);
    }
  }
  return result;
}

Status PeerClient::DirPut(const std::string& peer, const std::string& holder,
                          const std::vector<std::string>& keys) {
  return Call(peer, MsgType::kDirPut, EncodeDirUpdateRequest({holder, keys})).status();
}

Status PeerClient::DirDel(const std::string& peer, const std::string& holder,
                          const std::vector<std::string>& keys) {
  return Call(peer, MsgType::kDirDel, EncodeDirUpdateRequest({holder, keys})).status();
}

StatusOr<std::vector<std::string>> PeerClient::DirLookup(const std::string& peer,
                                                         const std::vector<std::string>& keys) {
  TANDEM_ASSIGN_OR_RETURN(std::string reply, Call(peer, MsgType::kDirLookup, EncodeKeys(keys)));
  std::vector<std::string> holders;
  TANDEM_RETURN_IF_ERROR(DecodeDirLookupResponse(reply, keys.size(), &holders));
  return holders;
}

StatusOr<PeerClient::Fetched> PeerClient::Fetch(const std::string& peer,
                                                const std::vector<std::string>& keys) {
  if (keys.size() > kMaxFetchKeys) return InvalidArgumentError("too many keys in one fetch");
  Fetched out;
  TANDEM_ASSIGN_OR_RETURN(out.buffer, Call(peer, MsgType::kFetch, EncodeKeys(keys)));
  TANDEM_RETURN_IF_ERROR(DecodeFetchResponse(out.buffer, keys.size(), &out.objects));
  return out;
}

}  // namespace tandem::pool
