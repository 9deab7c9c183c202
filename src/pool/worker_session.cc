// One connection of the pool worker: the HELLO handshake, then request frames until the
// connection closes. Also the request handlers (docs/POOL.md "Wire format").
#include <algorithm>
#include <cstring>
#include <map>

#include "common/logging.h"
#include "common/peer_credentials.h"
#include "net/secret_equals.h"
#include "pool/messages.h"
#include "pool/worker_impl.h"

namespace tandem::pool {
namespace {

constexpr auto kPeerIdleTimeout = std::chrono::minutes(5);
constexpr auto kHelloTimeout = std::chrono::seconds(10);
constexpr auto kRemoteGetBudget = std::chrono::seconds(6);
constexpr auto kWriteTimeout = std::chrono::seconds(10);

}  // namespace

struct PoolWorker::Impl::Session {
  bool is_unix = false;
  Role role = Role::kClient;
  std::unordered_map<std::string, uint32_t> pins;  // key -> pins held by this connection
  std::unordered_set<std::string> unsealed;        // allocated here, not yet sealed
};

void PoolWorker::Impl::ServeConnection(net::SocketConnection& conn, bool is_unix) {
  Session s;
  s.is_unix = is_unix;
  // Until HELLO, a short timeout: an unauthenticated connection must not hold one of
  // the max_connections slots (and a thread) for long.
  conn.SetIoTimeout(kHelloTimeout).ok();
  conn.SetSendTimeout(kWriteTimeout).ok();

  FrameHeader h;
  std::string body;
  Status st = RecvFrame(conn, &h, &body, nullptr, kMaxRequestBytes);
  if (!st.ok()) {
    if (st.code() == StatusCode::kInvalidArgument) {  // not our protocol: say so, then close
      SendFrame(conn, {MsgType::kHello, WireStatus(st), 0, 0}, st.message()).ok();
      conn.DrainBeforeClose();
    }
    return;
  }
  auto refuse = [&](const Status& err) {
    FrameHeader r{h.type, WireStatus(err), 0, h.request_id};
    SendFrame(conn, r, err.message()).ok();
    conn.DrainBeforeClose();
  };
  if (h.type != MsgType::kHello)
    return refuse(UnauthenticatedError("the first frame must be HELLO"));
  {
    HelloRequest hello;
    Status parsed = DecodeHelloRequest(body, &hello);
    if (!parsed.ok()) return refuse(parsed);
    if (!config_.auth_token.empty() && !net::SecretEquals(hello.auth_token, config_.auth_token)) {
      TANDEM_LOG(WARNING) << "connection refused: bad auth token";
      return refuse(UnauthenticatedError("bad auth token"));
    }
    // The answer carries the arena's memfd (every tenant's blocks), and abstract
    // sockets have no file permissions: only this user (or root) gets it.
    if (is_unix) {
      if (Status peer = CheckUnixPeerIsOwner(conn.fd()); !peer.ok()) {
        TANDEM_LOG(WARNING) << "connection refused: " << peer.message();
        return refuse(peer);
      }
    }
    if (hello.role > 1) return refuse(InvalidArgumentError("unknown role"));
    s.role = static_cast<Role>(hello.role);
    if ((s.role == Role::kClient) != is_unix) {
      return refuse(PermissionDeniedError(is_unix ? "peers connect over TCP"
                                                  : "clients connect over the local Unix socket"));
    }
    std::string answer = EncodeHelloResponse({arena_->size_bytes(), self_});
    FrameHeader ok{MsgType::kHello, 0, 0, h.request_id};
    if (!SendFrame(conn, ok, answer, is_unix ? arena_->fd() : -1).ok()) return;
  }
  // Peers reconnect on demand, so an idle TCP connection is closed after a while; local
  // clients may idle for as long as they like.
  conn.SetIoTimeout(is_unix ? std::chrono::milliseconds(0) : kPeerIdleTimeout).ok();
  conn.SetSendTimeout(kWriteTimeout).ok();

  while (true) {
    st = RecvFrame(conn, &h, &body, nullptr, kMaxRequestBytes);
    if (!st.ok()) {
      if (st.code() == StatusCode::kInvalidArgument) {
        TANDEM_LOG(WARNING) << "closing connection: " << st.message();
        FrameHeader r{MsgType::kHello, WireStatus(st), 0, 0};
        SendFrame(conn, r, st.message()).ok();
        conn.DrainBeforeClose();
      }
      break;
    }
    if (h.type == MsgType::kFetch && s.role == Role::kPeer) {
      // Objects go from the arena straight to the socket (pinned meanwhile).
      Status fetched = ServeFetch(conn, h.request_id, body);
      if (fetched.code() == StatusCode::kInvalidArgument) {
        SendFrame(conn, {h.type, WireStatus(fetched), 0, h.request_id}, fetched.message()).ok();
        conn.DrainBeforeClose();
        break;
      }
      if (!fetched.ok()) break;
      continue;
    }
    StatusOr<std::string> reply = IsPeerType(h.type) != (s.role == Role::kPeer)
                                      ? StatusOr<std::string>(PermissionDeniedError(
                                            "request type not allowed on this connection"))
                                      : Handle(s, h.type, body);
    FrameHeader r{h.type, 0, 0, h.request_id};
    Status sent;
    if (reply.ok()) {
      sent = SendFrame(conn, r, *reply);
    } else {
      r.status = WireStatus(reply.status());
      sent = SendFrame(conn, r, reply.status().message());
      // A request we could not parse leaves the stream in an unknown state: close.
      if (reply.status().code() == StatusCode::kInvalidArgument) {
        conn.DrainBeforeClose();
        break;
      }
    }
    if (!sent.ok()) break;
  }
  ReleaseSession(s);
}

void PoolWorker::Impl::ReleaseSession(Session& s) {
  for (auto& [key, n] : s.pins) {
    for (uint32_t i = 0; i < n; ++i) table_->Unpin(key);
  }
  for (const auto& key : s.unsealed) table_->Abort(key);
  s.pins.clear();
  s.unsealed.clear();
}

StatusOr<std::string> PoolWorker::Impl::Handle(Session& s, MsgType type, std::string_view body) {
  switch (type) {
    case MsgType::kExist:
      return HandleExist(body);
    case MsgType::kPutAlloc:
      return HandlePutAlloc(s, body);
    case MsgType::kPutSeal:
      return HandlePutSeal(s, body);
    case MsgType::kGet:
      return HandleGet(s, body);
    case MsgType::kRelease:
      return HandleRelease(s, body);
    case MsgType::kSoftPin:
      return HandleSoftPin(body);
    case MsgType::kFetch:
      return InternalError("FETCH is served by ServeFetch");
    case MsgType::kDirPut:
      return HandleDirPut(body, true);
    case MsgType::kDirDel:
      return HandleDirPut(body, false);
    case MsgType::kDirLookup:
      return HandleDirLookup(body);
    case MsgType::kHello:
      return FailedPreconditionError("HELLO sent twice");
  }
  return InvalidArgumentError("unknown request type");
}

std::vector<std::string> PoolWorker::Impl::FindRemoteHolders(const std::vector<std::string>& keys) {
  std::vector<std::string> holders(keys.size());
  auto ring = membership_->ring();
  std::map<std::string, std::vector<size_t>> by_owner;
  for (size_t i = 0; i < keys.size(); ++i) by_owner[ring->Owner(keys[i])].push_back(i);
  auto live_other = [&](const std::string& h) { return h != self_ && membership_->IsLive(h); };
  for (auto& [owner, indices] : by_owner) {
    if (owner == self_) {
      for (size_t i : indices) {
        for (const auto& h : directory_.Lookup(keys[i])) {
          if (live_other(h)) {
            holders[i] = h;
            break;
          }
        }
      }
      continue;
    }
    if (!membership_->IsLive(owner)) continue;  // its directory is gone: a miss
    std::vector<std::string> batch;
    for (size_t i : indices) batch.push_back(keys[i]);
    auto found = peers_->DirLookup(owner, batch);
    if (!found.ok()) {
      TANDEM_LOG(DEBUG) << "directory lookup at " << owner << ": " << found.status().ToString();
      continue;
    }
    for (size_t j = 0; j < indices.size(); ++j) {
      if (live_other((*found)[j])) holders[indices[j]] = (*found)[j];
    }
  }
  return holders;
}

StatusOr<std::string> PoolWorker::Impl::HandleExist(std::string_view body) {
  std::vector<std::string> keys;
  TANDEM_RETURN_IF_ERROR(DecodeKeys(body, &keys));
  std::vector<uint8_t> codes(keys.size(), static_cast<uint8_t>(ExistCode::kAbsent));
  std::vector<std::string> missing;
  std::vector<size_t> missing_index;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (HeldHere(keys[i])) {
      codes[i] = static_cast<uint8_t>(ExistCode::kLocal);
    } else {
      missing.push_back(keys[i]);
      missing_index.push_back(i);
    }
  }
  if (!missing.empty()) {
    auto holders = FindRemoteHolders(missing);
    for (size_t j = 0; j < missing.size(); ++j) {
      if (!holders[j].empty()) codes[missing_index[j]] = static_cast<uint8_t>(ExistCode::kRemote);
    }
  }
  return EncodeCodes(codes);
}

StatusOr<std::string> PoolWorker::Impl::HandlePutAlloc(Session& s, std::string_view body) {
  std::vector<PutAllocItem> items;
  TANDEM_RETURN_IF_ERROR(DecodePutAllocRequest(body, &items));
  std::vector<PutAllocAnswer> answers(items.size());
  std::vector<std::string> evicted;
  for (size_t i = 0; i < items.size(); ++i) {
    if (disk_ && disk_->Contains(items[i].key)) {  // held on disk: no need to write it again
      answers[i].code = static_cast<uint8_t>(AllocCode::kExists);
      continue;
    }
    AllocCode code = table_->Allocate(items[i].key, items[i].size_bytes, /*primary=*/true,
                                      &answers[i].offset, &evicted);
    if (code == AllocCode::kAllocated) s.unsealed.insert(items[i].key);
    answers[i].code = static_cast<uint8_t>(code);
  }
  QueueDirOps(false, evicted);
  return EncodePutAllocResponse(answers);
}

StatusOr<std::string> PoolWorker::Impl::HandlePutSeal(Session& s, std::string_view body) {
  std::vector<PutSealItem> items;
  TANDEM_RETURN_IF_ERROR(DecodePutSealRequest(body, &items));
  std::vector<uint8_t> codes;
  codes.reserve(items.size());
  std::vector<std::string> sealed;
  for (const auto& [key, commit] : items) {
    if (s.unsealed.erase(key) == 0) {
      codes.push_back(1);  // not allocated by this connection (or sealed already)
      continue;
    }
    if (commit) {
      table_->Seal(key);
      sealed.push_back(key);
    } else {
      table_->Abort(key);
    }
    codes.push_back(0);
  }
  metrics_->puts->Add(static_cast<double>(sealed.size()));
  QueueDirOps(true, sealed);
  return EncodeCodes(codes);
}

std::vector<bool> PoolWorker::Impl::FetchReplicas(const std::string& holder,
                                                  const std::vector<std::string>& keys) {
  std::vector<bool> ok(keys.size(), false);
  for (size_t start = 0; start < keys.size(); start += kMaxFetchKeys) {
    std::vector<std::string> chunk(keys.begin() + start,
                                   keys.begin() + std::min(keys.size(), start + kMaxFetchKeys));
    auto fetched = peers_->Fetch(holder, chunk);
    if (!fetched.ok()) {
      TANDEM_LOG(DEBUG) << "fetch from " << holder << ": " << fetched.status().ToString();
      metrics_->remote_get_failures->Add(static_cast<double>(chunk.size()));
      break;  // the holder is unreachable: the rest are misses too
    }
    std::vector<std::string> evicted;
    for (size_t j = 0; j < chunk.size(); ++j) {
      const auto& data = fetched->objects[j];
      if (!data || data->empty()) continue;
      uint64_t offset = 0;
      AllocCode code =
          table_->Allocate(chunk[j], data->size(), /*primary=*/false, &offset, &evicted);
      if (code == AllocCode::kAllocated) {
        std::memcpy(arena_->base() + offset, data->data(), data->size());
        table_->Seal(chunk[j]);
        metrics_->remote_gets->Add();
        ok[start + j] = true;
      } else if (code == AllocCode::kExists) {
        ok[start + j] = true;  // another request fetched (or a client put) it meanwhile
      }
    }
    QueueDirOps(false, evicted);
  }
  return ok;
}

bool PoolWorker::Impl::PromoteFromDisk(const std::string& key, std::vector<std::string>* evicted) {
  if (!disk_) return false;
  std::optional<uint64_t> size = disk_->Size(key);
  if (!size) return false;
  uint64_t offset = 0;
  // A primary again: it was put here, and its directory entry never left.
  if (table_->Allocate(key, *size, /*primary=*/true, &offset, evicted) != AllocCode::kAllocated)
    return false;  // no room now (everything pinned), or another reader promotes it
  Status read = disk_->Read(key, arena_->base() + offset, *size);
  if (!read.ok()) {
    table_->Abort(key);  // a bad file was dropped: the engine recomputes
    if (read.code() == StatusCode::kDataLoss) QueueDirOps(false, {key});
    return false;
  }
  table_->Seal(key);
  metrics_->promotions->Add();
  return true;
}

StatusOr<std::string> PoolWorker::Impl::HandleGet(Session& s, std::string_view body) {
  std::vector<std::string> keys;
  TANDEM_RETURN_IF_ERROR(DecodeKeys(body, &keys));
  std::vector<GetCode> codes(keys.size(), GetCode::kMiss);
  std::vector<std::optional<ObjectLocation>> locs(keys.size());
  std::vector<std::string> missing;
  std::vector<size_t> missing_index;
  std::vector<std::string> evicted;
  for (size_t i = 0; i < keys.size(); ++i) {
    locs[i] = table_->LookupAndPin(keys[i]);
    if (locs[i]) {
      codes[i] = GetCode::kLocalHit;
      ++s.pins[keys[i]];
    } else if (PromoteFromDisk(keys[i], &evicted) && (locs[i] = table_->LookupAndPin(keys[i]))) {
      codes[i] = GetCode::kDiskHit;
      ++s.pins[keys[i]];
    } else {
      missing.push_back(keys[i]);
      missing_index.push_back(i);
    }
  }
  QueueDirOps(false, evicted);
  if (!missing.empty()) {
    auto holders = FindRemoteHolders(missing);
    std::map<std::string, std::vector<size_t>> by_holder;  // holder -> indices into missing
    for (size_t j = 0; j < missing.size(); ++j) {
      if (!holders[j].empty()) by_holder[holders[j]].push_back(j);
    }
    // The remote phase of one GET is bounded (clients wait 15 s per request): holders
    // not reached by then are misses.
    auto deadline = std::chrono::steady_clock::now() + kRemoteGetBudget;
    for (auto& [holder, idx] : by_holder) {
      if (std::chrono::steady_clock::now() > deadline) break;
      std::vector<std::string> batch;
      for (size_t j : idx) batch.push_back(missing[j]);
      auto fetched = FetchReplicas(holder, batch);
      for (size_t b = 0; b < idx.size(); ++b) {
        if (!fetched[b]) continue;
        size_t i = missing_index[idx[b]];
        locs[i] = table_->LookupAndPin(keys[i]);
        if (locs[i]) {
          codes[i] = GetCode::kRemoteHit;
          ++s.pins[keys[i]];
        }
      }
    }
  }
  std::vector<GetAnswer> answers(keys.size());
  double counts[4] = {0, 0, 0, 0};  // by GetCode
  for (size_t i = 0; i < keys.size(); ++i) {
    answers[i].code = static_cast<uint8_t>(codes[i]);
    answers[i].offset = locs[i] ? locs[i]->offset : 0;
    answers[i].size_bytes = locs[i] ? locs[i]->size : 0;
    counts[static_cast<int>(codes[i])] += 1;
  }
  const double local = counts[static_cast<int>(GetCode::kLocalHit)];
  const double disk = counts[static_cast<int>(GetCode::kDiskHit)];
  metrics_->hits_local->Add(local);
  metrics_->hits_disk->Add(disk);
  metrics_->hits_remote->Add(counts[static_cast<int>(GetCode::kRemoteHit)]);
  metrics_->misses->Add(counts[static_cast<int>(GetCode::kMiss)]);
  metrics_->tier_hits[kMemoryTier]->Add(local);
  metrics_->tier_misses[kMemoryTier]->Add(static_cast<double>(keys.size()) - local);
  if (disk_) {
    metrics_->tier_hits[kDiskTier]->Add(disk);
    metrics_->tier_misses[kDiskTier]->Add(static_cast<double>(keys.size()) - local - disk);
  }
  return EncodeGetResponse(answers);
}

StatusOr<std::string> PoolWorker::Impl::HandleSoftPin(std::string_view body) {
  uint32_t ttl_ms = 0;
  std::vector<std::string> keys;
  TANDEM_RETURN_IF_ERROR(DecodeSoftPinRequest(body, &ttl_ms, &keys));
  auto ttl = std::chrono::milliseconds(ttl_ms != 0 ? ttl_ms : config_.default_kv_soft_pin_ttl_ms);
  std::vector<uint8_t> codes;
  codes.reserve(keys.size());
  for (const auto& key : keys) codes.push_back(table_->SoftPin(key, ttl) ? 0 : 1);
  return EncodeCodes(codes);
}

StatusOr<std::string> PoolWorker::Impl::HandleRelease(Session& s, std::string_view body) {
  std::vector<std::string> keys;
  TANDEM_RETURN_IF_ERROR(DecodeKeys(body, &keys));
  for (const auto& key : keys) {
    auto it = s.pins.find(key);
    if (it == s.pins.end()) continue;  // not pinned by this connection: ignored
    table_->Unpin(key);
    if (--it->second == 0) s.pins.erase(it);
  }
  return std::string();
}

Status PoolWorker::Impl::ServeFetch(net::SocketConnection& conn, uint64_t request_id,
                                    std::string_view body) {
  std::vector<std::string> keys;
  TANDEM_RETURN_IF_ERROR(DecodeKeys(body, &keys, kMaxFetchKeys));
  // Layout per key: u8 found, then (found) u32 length + the bytes, viewed in the arena.
  std::vector<std::string> heads(keys.size());
  std::vector<std::string_view> parts;
  std::vector<const std::string*> pinned;
  uint64_t total = 0;
  std::vector<std::string> evicted;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto loc = table_->LookupAndPin(keys[i]);
    if (!loc && PromoteFromDisk(keys[i], &evicted)) loc = table_->LookupAndPin(keys[i]);
    // Keep the response under the frame limit; what does not fit is reported missing.
    if (loc && total + 5 + loc->size <= kMaxBodyBytes - 5 * keys.size()) {
      heads[i] = EncodeFetchHead(static_cast<uint32_t>(loc->size));
      parts.push_back(heads[i]);
      parts.emplace_back(reinterpret_cast<const char*>(arena_->base() + loc->offset), loc->size);
      pinned.push_back(&keys[i]);
      total += 5 + loc->size;
    } else {
      if (loc) table_->Unpin(keys[i]);
      heads[i] = EncodeFetchHead(std::nullopt);
      parts.push_back(heads[i]);
      total += 1;
    }
  }
  QueueDirOps(false, evicted);
  Status sent = SendFrameParts(conn, {MsgType::kFetch, 0, 0, request_id}, parts);
  for (const std::string* key : pinned) table_->Unpin(*key);
  return sent;
}

StatusOr<std::string> PoolWorker::Impl::HandleDirPut(std::string_view body, bool put) {
  DirUpdateRequest request;
  TANDEM_RETURN_IF_ERROR(DecodeDirUpdateRequest(body, &request));
  TANDEM_RETURN_IF_ERROR(ParseHostPort(request.holder).status());
  put ? directory_.Put(request.holder, request.keys) : directory_.Del(request.holder, request.keys);
  return std::string();
}

StatusOr<std::string> PoolWorker::Impl::HandleDirLookup(std::string_view body) {
  std::vector<std::string> keys;
  TANDEM_RETURN_IF_ERROR(DecodeKeys(body, &keys));
  std::vector<std::string> holders;
  holders.reserve(keys.size());
  for (const auto& key : keys) {
    std::string& found = holders.emplace_back();
    if (HeldHere(key)) {
      found = self_;  // the owner holds it itself
    } else {
      for (const auto& h : directory_.Lookup(key)) {
        if (membership_->IsLive(h)) {
          found = h;
          break;
        }
      }
    }
  }
  return EncodeDirLookupResponse(holders);
}

}  // namespace tandem::pool
