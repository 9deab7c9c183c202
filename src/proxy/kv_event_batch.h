// KvEventBatch: one message of an engine's KV-event stream, decoded.
//
// The wire format is vLLM's (vllm/distributed/kv_events.py, msgspec array_like
// encoding), which `tandem serve --kv-events-config` publishes too. A ZMQ PUB message is
// three frames [topic, 8-byte big-endian sequence number, payload]; the payload is a
// msgpack array
//   [ts: float, events: [event...], data_parallel_rank: int | nil]
// and each event an array tagged by its first element:
//   ["BlockStored", block_hashes: [hash...], parent_block_hash: hash | nil,
//    token_ids: [int...], block_size: int, lora_id: int | nil, medium: str | nil, ...]
//   ["BlockRemoved", block_hashes: [hash...], medium: str | nil, ...]
//   ["AllBlocksCleared", ...]
// A hash is a bin (Tandem: the 16-byte chained XXH3-128 block hash of src/kv/block_hash.h;
// vLLM: bytes) or, from older vLLM versions, an integer (kept as its 8 big-endian bytes).
// Fields after the ones named are ignored (newer versions append some); events with an
// unknown tag are skipped. BlockStored's token_ids are the tokens of all its blocks in
// order (block_size per block).
//
// Thread safety: value types and a pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::proxy {

// A block hash as the engine sent it (opaque bytes).
using KvBlockHash = std::string;

struct KvEvent {
  enum class Kind { kBlockStored, kBlockRemoved, kAllBlocksCleared };
  Kind kind = Kind::kBlockStored;
  std::vector<KvBlockHash> block_hashes;         // stored / removed
  std::optional<KvBlockHash> parent_block_hash;  // stored: nil for a prompt's first block
  std::vector<int32_t> token_ids;                // stored
  int64_t block_size = 0;                        // stored, tokens per block
  bool has_lora = false;                         // stored: lora_id was not nil
};

struct KvEventBatch {
  double ts = 0;  // seconds since the epoch, the publisher's clock
  std::vector<KvEvent> events;
  std::optional<int64_t> data_parallel_rank;
};

// Decodes a payload. InvalidArgument (saying what is wrong) for malformed msgpack or a
// structure that is not the one above.
StatusOr<KvEventBatch> DecodeKvEventBatch(std::string_view payload);

}  // namespace tandem::proxy
