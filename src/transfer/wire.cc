#include "transfer/wire.h"

#include <cstring>

#include "common/little_endian.h"

namespace tandem::transfer {
namespace {

using little_endian::Append;
using little_endian::Load;
using little_endian::Store;

void PutStr(std::string* s, std::string_view v) {
  Append<uint16_t>(s, static_cast<uint16_t>(v.size()));
  s->append(v.substr(0, 0xFFFF));
}

// Sequential, bounds-checked reads from a payload.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> data) : data_(data) {}
  bool U16(uint16_t* v) { return Int(v); }
  bool U32(uint32_t* v) { return Int(v); }
  bool U64(uint64_t* v) { return Int(v); }
  bool Str(std::string* v) {
    uint16_t n = 0;
    if (!U16(&n) || data_.size() - pos_ < n) return false;
    v->assign(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return data_.size() - pos_; }

 private:
  template <typename T>
  bool Int(T* v) {
    if (data_.size() - pos_ < sizeof(T)) return false;
    *v = Load<T>(data_.data() + pos_);
    pos_ += sizeof(T);
    return true;
  }
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

Status Malformed(const char* what) { return DataLossError(std::string("kv transfer: malformed ") + what + " frame"); }

}  // namespace

void EncodeHeader(FrameType type, uint32_t payload_bytes, uint8_t out[kHeaderBytes]) {
  Store<uint32_t>(out, kFrameMagic);
  Store<uint16_t>(out + 4, kWireVersion);
  Store<uint16_t>(out + 6, static_cast<uint16_t>(type));
  Store<uint32_t>(out + 8, payload_bytes);
  Store<uint32_t>(out + 12, 0);
}

StatusOr<FrameHeader> DecodeHeader(const uint8_t in[kHeaderBytes]) {
  if (Load<uint32_t>(in) != kFrameMagic) return DataLossError("kv transfer: bad frame magic (not a Tandem KV peer?)");
  const uint16_t version = Load<uint16_t>(in + 4);
  if (version != kWireVersion) {
    return FailedPreconditionError("kv transfer: peer speaks wire version " + std::to_string(version) +
                                   ", this build speaks " + std::to_string(kWireVersion));
  }
  const uint16_t type = Load<uint16_t>(in + 6);
  if (type < 1 || type > 9) return DataLossError("kv transfer: unknown frame type " + std::to_string(type));
  FrameHeader h;
  h.type = static_cast<FrameType>(type);
  h.payload_bytes = Load<uint32_t>(in + 8);
  const uint32_t limit = h.type == FrameType::kBlocks ? kMaxDataPayload : kMaxControlPayload;
  if (h.payload_bytes > limit) {
    return DataLossError("kv transfer: frame of type " + std::to_string(type) + " declares " +
                         std::to_string(h.payload_bytes) + " payload bytes, over the limit " + std::to_string(limit));
  }
  return h;
}

std::string EncodePull(const PullRequest& pull) {
  std::string s;
  PutStr(&s, pull.request_id);
  PutStr(&s, pull.model_fingerprint);
  Append<uint64_t>(&s, pull.k_block_bytes);
  Append<uint64_t>(&s, pull.v_block_bytes);
  Append<uint32_t>(&s, static_cast<uint32_t>(pull.block_ids.size()));
  for (int32_t id : pull.block_ids) Append<uint32_t>(&s, static_cast<uint32_t>(id));
  return s;
}

StatusOr<PullRequest> DecodePull(std::span<const uint8_t> payload) {
  Reader r(payload);
  PullRequest p;
  uint32_t n = 0;
  if (!r.Str(&p.request_id) || !r.Str(&p.model_fingerprint) || !r.U64(&p.k_block_bytes) ||
      !r.U64(&p.v_block_bytes) || !r.U32(&n)) {
    return Malformed("PULL");
  }
  if (r.remaining() != static_cast<size_t>(n) * 4) return Malformed("PULL (block count)");
  p.block_ids.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t id = 0;
    r.U32(&id);
    if (id > 0x7FFFFFFF) return Malformed("PULL (block id)");
    p.block_ids[i] = static_cast<int32_t>(id);
  }
  return p;
}

void EncodeBlocksPrefix(uint32_t first, uint32_t count, uint8_t out[kBlocksPrefixBytes]) {
  Store<uint32_t>(out, first);
  Store<uint32_t>(out + 4, count);
}

Status DecodeBlocksPrefix(const uint8_t in[kBlocksPrefixBytes], uint32_t payload_bytes, uint32_t n_blocks,
                          uint64_t block_bytes, uint32_t* first, uint32_t* count) {
  *first = Load<uint32_t>(in);
  *count = Load<uint32_t>(in + 4);
  if (*count == 0 || *count > kMaxBlocksPerFrame || *first >= n_blocks || *count > n_blocks - *first) {
    return Malformed("BLOCKS (block range)");
  }
  if (static_cast<uint64_t>(payload_bytes) != kBlocksPrefixBytes + block_bytes * *count) {
    return Malformed("BLOCKS (size)");
  }
  return Status::Ok();
}

std::string EncodeDone(std::string_view request_id) {
  std::string s;
  PutStr(&s, request_id);
  return s;
}

StatusOr<std::string> DecodeDone(std::span<const uint8_t> payload) {
  Reader r(payload);
  std::string id;
  if (!r.Str(&id) || r.remaining() != 0) return Malformed("DONE");
  return id;
}

std::string EncodeError(const Status& status) {
  std::string s;
  Append<uint32_t>(&s, static_cast<uint32_t>(status.code()));
  PutStr(&s, status.message());
  return s;
}

Status DecodeError(std::span<const uint8_t> payload) {
  Reader r(payload);
  uint32_t code = 0;
  std::string message;
  if (!r.U32(&code) || !r.Str(&message)) return Malformed("ERROR");
  if (code == 0 || code > static_cast<uint32_t>(StatusCode::kUnauthenticated)) code = static_cast<uint32_t>(StatusCode::kInternal);
  return Status(static_cast<StatusCode>(code), "kv transfer peer: " + message);
}

std::string EncodeShmMap(const ShmMap& map) {
  std::string s;
  Append<uint64_t>(&s, map.map_size);
  Append<uint64_t>(&s, map.keys_offset);
  Append<uint64_t>(&s, map.values_offset);
  Append<uint64_t>(&s, map.arena_id);
  return s;
}

StatusOr<ShmMap> DecodeShmMap(std::span<const uint8_t> payload) {
  Reader r(payload);
  ShmMap m;
  if (!r.U64(&m.map_size) || !r.U64(&m.keys_offset) || !r.U64(&m.values_offset) || !r.U64(&m.arena_id) ||
      r.remaining() != 0) {
    return Malformed("SHM_MAP");
  }
  if (m.keys_offset > m.map_size || m.values_offset > m.map_size) return Malformed("SHM_MAP (offsets)");
  return m;
}

}  // namespace tandem::transfer
