#include "transfer/transfer_client.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/logging.h"
#include "net/framed_socket.h"
#include "net/socket_address.h"
#include "transfer/wire.h"

namespace tandem::transfer {
namespace {

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// Maps the pages of [p, p + n) in one system call instead of one fault per 4 KiB page
// (a fault costs microseconds in a VM; a 2,000-token pull touches ~9,000 pages on each
// side). Best effort: kernels before 5.14 say EINVAL and the copy faults as usual.
void Populate(const void* p, size_t n, int advice) {
  const uintptr_t page = 4096;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
  (void)madvise(reinterpret_cast<void*>(start), end - start, advice);
}

Status ReadPayload(Connection& conn, const FrameHeader& h, std::string* payload) {
  payload->resize(h.payload_bytes);
  if (h.payload_bytes == 0) return Status::Ok();
  return conn.Recv(payload->data(), payload->size());
}

// Reads the next control frame; an ERROR frame becomes its Status.
Status ExpectFrame(Connection& conn, FrameType want, std::string* payload) {
  FrameHeader h;
  TANDEM_RETURN_IF_ERROR(RecvControlFrame(conn, &h, payload));
  if (h.type == FrameType::kError) return DecodeError(net::AsBytes(*payload));
  if (h.type != want) {
    return DataLossError("kv transfer: expected frame type " + std::to_string(static_cast<int>(want)) + ", got " +
                         std::to_string(static_cast<int>(h.type)));
  }
  return Status::Ok();
}

Status SendDone(Connection& conn, const std::string& id) {
  TANDEM_RETURN_IF_ERROR(SendControlFrame(conn, FrameType::kDone, EncodeDone(id)));
  std::string payload;
  return ExpectFrame(conn, FrameType::kAck, &payload);
}

}  // namespace

TransferClient::TransferClient(Transport* transport, KvMemory dest, std::string model_fingerprint, bool enable_shm,
                               std::string auth_token)
    : transport_(transport),
      dest_(dest),
      fingerprint_(std::move(model_fingerprint)),
      enable_shm_(enable_shm),
      auth_token_(std::move(auth_token)) {}

StatusOr<std::unique_ptr<Connection>> TransferClient::Open(const Endpoint& endpoint) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, transport_->Connect(endpoint));
  if (!auth_token_.empty()) {
    TANDEM_RETURN_IF_ERROR(SendControlFrame(*conn, FrameType::kHello, EncodeDone(auth_token_)));
    std::string payload;
    TANDEM_RETURN_IF_ERROR(ExpectFrame(*conn, FrameType::kAck, &payload));
  }
  return conn;
}

TransferClient::~TransferClient() = default;

TransferClient::Mapping::~Mapping() { munmap(const_cast<uint8_t*>(base), size); }

StatusOr<PullResult> TransferClient::Pull(const PullSpec& spec, const std::atomic<bool>* cancel) {
  if (spec.remote_block_ids.size() != spec.local_block_ids.size()) {
    return InvalidArgumentError("kv transfer: block lists differ in length");
  }
  for (int32_t b : spec.local_block_ids) {
    if (b < 0 || b >= dest_.num_blocks) return InvalidArgumentError("kv transfer: local block out of range");
  }
  if (enable_shm_ && net::IsLoopbackHost(spec.host)) {
    StatusOr<std::unique_ptr<Connection>> conn = Open({spec.host, spec.port, /*unix_socket=*/true});
    if (conn.ok()) {
      StatusOr<PullResult> r = PullShm(**conn, spec);
      // A producer without a shared arena says so; anything else is a real failure.
      if (r.ok() || r.status().code() != StatusCode::kInvalidArgument) return r;
    }
  }
  return PullTcp(spec, cancel);
}

StatusOr<PullResult> TransferClient::PullShm(Connection& conn, const PullSpec& spec) {
  PullRequest pull{spec.remote_request_id, fingerprint_, dest_.k_block_bytes, dest_.v_block_bytes,
                   spec.remote_block_ids};
  TANDEM_RETURN_IF_ERROR(SendControlFrame(conn, FrameType::kShmPull, EncodePull(pull)));
  // SHM_MAP comes with the producer arena's memfd.
  uint8_t raw[kHeaderBytes];
  FrameHeader h;
  std::string payload;
  net::UniqueFd arena_fd;
  auto body_length = [&h](std::span<const uint8_t> bytes) -> StatusOr<uint32_t> {
    TANDEM_ASSIGN_OR_RETURN(h, DecodeHeader(bytes.data()));
    if (h.type == FrameType::kBlocks) return DataLossError("kv transfer: unexpected BLOCKS frame");
    return h.payload_bytes;
  };
  TANDEM_RETURN_IF_ERROR(
      net::RecvFrame(conn, raw, body_length, kMaxControlPayload, &payload, &arena_fd));
  if (h.type == FrameType::kError) return DecodeError(net::AsBytes(payload));
  if (h.type != FrameType::kShmMap) return DataLossError("kv transfer: expected SHM_MAP");
  TANDEM_ASSIGN_OR_RETURN(ShmMap map, DecodeShmMap(net::AsBytes(payload)));
  const uint64_t k = dest_.k_block_bytes;
  const uint64_t v = dest_.v_block_bytes;
  for (int32_t b : spec.remote_block_ids) {
    const uint64_t bb = static_cast<uint64_t>(b);
    if (map.keys_offset + (bb + 1) * k > map.map_size || map.values_offset + (bb + 1) * v > map.map_size) {
      return DataLossError("kv transfer: SHM_MAP does not cover the requested blocks");
    }
  }
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> mapping,
                          MapArena(arena_fd.get(), map.arena_id, map.map_size));
  const uint8_t* base = mapping->base;
  for (size_t i = 0; i < spec.remote_block_ids.size(); ++i) {
    const uint64_t rb = static_cast<uint64_t>(spec.remote_block_ids[i]);
    const uint8_t* src_k = base + map.keys_offset + rb * k;
    const uint8_t* src_v = base + map.values_offset + rb * v;
    uint8_t* dst_k = dest_.BlockK(spec.local_block_ids[i]);
    uint8_t* dst_v = dest_.BlockV(spec.local_block_ids[i]);
    Populate(src_k, k, MADV_POPULATE_READ);
    Populate(src_v, v, MADV_POPULATE_READ);
    Populate(dst_k, k, MADV_POPULATE_WRITE);
    Populate(dst_v, v, MADV_POPULATE_WRITE);
    std::memcpy(dst_k, src_k, k);
    std::memcpy(dst_v, src_v, v);
  }
  TANDEM_RETURN_IF_ERROR(SendDone(conn, spec.remote_request_id));
  return PullResult{true, (k + v) * spec.remote_block_ids.size()};
}

StatusOr<std::shared_ptr<TransferClient::Mapping>> TransferClient::MapArena(int fd, uint64_t arena_id,
                                                                            uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mappings_.find(arena_id);
  if (it != mappings_.end() && it->second->size == size) return it->second;
  if (fd < 0) return DataLossError("kv transfer: SHM_MAP came without a file descriptor");
  // Populated once here (the producer's pages exist already; this only maps them): pulls
  // then never fault, and this process's RSS takes its final size at the first pull
  // instead of creeping up as blocks are read for the first time.
  void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    return UnavailableError(std::string("kv transfer: mmap of the producer arena: ") + std::strerror(errno));
  }
  if (mappings_.size() >= kMaxMappings && it == mappings_.end()) mappings_.erase(mappings_.begin());
  auto mapping = std::make_shared<Mapping>(static_cast<const uint8_t*>(p), size);
  mappings_[arena_id] = mapping;
  return mapping;
}

StatusOr<PullResult> TransferClient::PullTcp(const PullSpec& spec, const std::atomic<bool>* cancel) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, Open({spec.host, spec.port, false}));
  PullRequest pull{spec.remote_request_id, fingerprint_, dest_.k_block_bytes, dest_.v_block_bytes,
                   spec.remote_block_ids};
  TANDEM_RETURN_IF_ERROR(SendControlFrame(*conn, FrameType::kPull, EncodePull(pull)));
  const auto n = static_cast<uint32_t>(spec.remote_block_ids.size());
  const uint64_t block_bytes = dest_.k_block_bytes + dest_.v_block_bytes;
  std::vector<bool> got(n, false);
  uint32_t received = 0;
  std::string payload;
  while (true) {
    if (cancel != nullptr && cancel->load()) return CancelledError("kv transfer: the pull was cancelled");
    uint8_t raw[kHeaderBytes];
    TANDEM_RETURN_IF_ERROR(conn->Recv(raw, kHeaderBytes));
    TANDEM_ASSIGN_OR_RETURN(FrameHeader h, DecodeHeader(raw));
    if (h.type == FrameType::kBlocks) {
      uint8_t prefix[kBlocksPrefixBytes];
      if (h.payload_bytes < kBlocksPrefixBytes) return DataLossError("kv transfer: short BLOCKS frame");
      TANDEM_RETURN_IF_ERROR(conn->Recv(prefix, kBlocksPrefixBytes));
      uint32_t first = 0;
      uint32_t count = 0;
      TANDEM_RETURN_IF_ERROR(DecodeBlocksPrefix(prefix, h.payload_bytes, n, block_bytes, &first, &count));
      for (uint32_t i = first; i < first + count; ++i) {
        if (got[i]) return DataLossError("kv transfer: block sent twice");
        TANDEM_RETURN_IF_ERROR(conn->Recv(dest_.BlockK(spec.local_block_ids[i]), dest_.k_block_bytes));
        TANDEM_RETURN_IF_ERROR(conn->Recv(dest_.BlockV(spec.local_block_ids[i]), dest_.v_block_bytes));
        got[i] = true;
        ++received;
      }
      continue;
    }
    TANDEM_RETURN_IF_ERROR(ReadPayload(*conn, h, &payload));
    if (h.type == FrameType::kError) return DecodeError(net::AsBytes(payload));
    if (h.type != FrameType::kPullEnd) return DataLossError("kv transfer: unexpected frame during a pull");
    break;
  }
  if (received != n) {
    return DataLossError("kv transfer: PULL_END after " + std::to_string(received) + " of " + std::to_string(n) +
                         " blocks");
  }
  TANDEM_RETURN_IF_ERROR(SendDone(*conn, spec.remote_request_id));
  return PullResult{false, block_bytes * n};
}

Status TransferClient::Release(const std::string& host, int port, const std::string& remote_request_id) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, Open({host, port, false}));
  return SendDone(*conn, remote_request_id);
}

}  // namespace tandem::transfer
