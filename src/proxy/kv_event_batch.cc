#include "proxy/kv_event_batch.h"

#include <limits>

#include "common/msgpack_reader.h"

namespace tandem::proxy {
namespace {

StatusOr<KvBlockHash> ReadHash(MsgpackReader& r) {
  TANDEM_ASSIGN_OR_RETURN(MsgpackReader::Type type, r.PeekType());
  if (type == MsgpackReader::Type::kBin) {
    TANDEM_ASSIGN_OR_RETURN(std::string_view bytes, r.ReadBin());
    if (bytes.empty() || bytes.size() > 64) {
      return InvalidArgumentError("block hash of " + std::to_string(bytes.size()) + " bytes");
    }
    return KvBlockHash(bytes);
  }
  if (type == MsgpackReader::Type::kInt) {
    TANDEM_ASSIGN_OR_RETURN(int64_t value, r.ReadInt());
    KvBlockHash out(8, '\0');
    for (int i = 7; i >= 0; --i, value = static_cast<int64_t>(static_cast<uint64_t>(value) >> 8)) {
      out[i] = static_cast<char>(value & 0xff);
    }
    return out;
  }
  return InvalidArgumentError("a block hash must be bin or int");
}

StatusOr<std::vector<KvBlockHash>> ReadHashes(MsgpackReader& r) {
  TANDEM_ASSIGN_OR_RETURN(uint32_t n, r.ReadArrayHeader());
  std::vector<KvBlockHash> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    TANDEM_ASSIGN_OR_RETURN(KvBlockHash h, ReadHash(r));
    out.push_back(std::move(h));
  }
  return out;
}

// Reads one event whose array header (`fields` elements) was read.
StatusOr<std::optional<KvEvent>> ReadEvent(MsgpackReader& r, uint32_t fields) {
  if (fields == 0) return InvalidArgumentError("empty event");
  TANDEM_ASSIGN_OR_RETURN(std::string_view tag, r.ReadStr());
  uint32_t used = 1;
  KvEvent event;
  if (tag == "BlockStored") {
    if (fields < 5)
      return InvalidArgumentError("BlockStored with " + std::to_string(fields) + " fields");
    event.kind = KvEvent::Kind::kBlockStored;
    TANDEM_ASSIGN_OR_RETURN(event.block_hashes, ReadHashes(r));
    if (r.NextIsNil()) {
      TANDEM_RETURN_IF_ERROR(r.ReadNil());
    } else {
      TANDEM_ASSIGN_OR_RETURN(event.parent_block_hash, ReadHash(r));
    }
    TANDEM_ASSIGN_OR_RETURN(uint32_t n, r.ReadArrayHeader());
    event.token_ids.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      TANDEM_ASSIGN_OR_RETURN(int64_t t, r.ReadInt());
      if (t < 0 || t > std::numeric_limits<int32_t>::max()) {
        return InvalidArgumentError("token id " + std::to_string(t) + " out of range");
      }
      event.token_ids.push_back(static_cast<int32_t>(t));
    }
    TANDEM_ASSIGN_OR_RETURN(event.block_size, r.ReadInt());
    if (event.block_size <= 0) return InvalidArgumentError("block_size must be positive");
    used = 5;
    if (fields > 5) {
      event.has_lora = !r.NextIsNil();
      TANDEM_RETURN_IF_ERROR(r.Skip());
      used = 6;
    }
  } else if (tag == "BlockRemoved") {
    if (fields < 2) return InvalidArgumentError("BlockRemoved without block_hashes");
    event.kind = KvEvent::Kind::kBlockRemoved;
    TANDEM_ASSIGN_OR_RETURN(event.block_hashes, ReadHashes(r));
    used = 2;
  } else if (tag == "AllBlocksCleared") {
    event.kind = KvEvent::Kind::kAllBlocksCleared;
  } else {
    for (uint32_t i = 1; i < fields; ++i) TANDEM_RETURN_IF_ERROR(r.Skip());
    return std::optional<KvEvent>();
  }
  for (uint32_t i = used; i < fields; ++i) TANDEM_RETURN_IF_ERROR(r.Skip());  // newer fields
  return std::optional<KvEvent>(std::move(event));
}

}  // namespace

StatusOr<KvEventBatch> DecodeKvEventBatch(std::string_view payload) {
  MsgpackReader r(payload);
  TANDEM_ASSIGN_OR_RETURN(uint32_t fields, r.ReadArrayHeader());
  if (fields < 2) return InvalidArgumentError("an event batch is [ts, events, dp_rank]");
  KvEventBatch batch;
  TANDEM_ASSIGN_OR_RETURN(batch.ts, r.ReadFloat());
  TANDEM_ASSIGN_OR_RETURN(uint32_t n, r.ReadArrayHeader());
  for (uint32_t i = 0; i < n; ++i) {
    TANDEM_ASSIGN_OR_RETURN(uint32_t event_fields, r.ReadArrayHeader());
    auto event = ReadEvent(r, event_fields);
    if (!event.ok()) return event.status().WithContext("event " + std::to_string(i));
    if (*event) batch.events.push_back(std::move(**event));
  }
  if (fields >= 3) {
    if (r.NextIsNil()) {
      TANDEM_RETURN_IF_ERROR(r.ReadNil());
    } else {
      TANDEM_ASSIGN_OR_RETURN(int64_t rank, r.ReadInt());
      batch.data_parallel_rank = rank;
    }
    for (uint32_t i = 3; i < fields; ++i) TANDEM_RETURN_IF_ERROR(r.Skip());
  }
  if (!r.AtEnd()) return InvalidArgumentError("bytes after the event batch");
  return batch;
}

}  // namespace tandem::proxy
