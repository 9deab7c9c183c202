// KV cache events: what the prefix cache reports to the outside (routers, indexers) when a
// block becomes discoverable, stops being discoverable, or the whole cache is dropped.
// The types and their MessagePack encoding are vLLM's (vllm/distributed/kv_events.py), so
// subscribers written for vLLM (llm-d's kv-cache indexer, Dynamo's KV router, vLLM's own
// examples/online_serving/kv_events_subscriber.py) decode Tandem's events unchanged.
//
// Wire format (docs/KV_EVENTS.md). vLLM declares the events as msgspec Structs with
// array_like=True and tag=True: each struct is a MessagePack array of its fields in
// declaration order, a tagged one (the events) starting with its class name. Fields as of
// vLLM's array-encoded releases (v0.11.1 .. the switch to map encoding, vLLM PR #42892):
//   KVEventBatch      [ts: float64 seconds since the epoch, events: [...],
//                      data_parallel_rank: int | nil]
//   BlockStored       ["BlockStored", block_hashes: [hash...], parent_block_hash: hash | nil,
//                      token_ids: [int...], block_size: int, lora_id: int | nil,
//                      medium: str | nil, lora_name: str | nil]
//   BlockRemoved      ["BlockRemoved", block_hashes: [hash...], medium: str | nil]
//   AllBlocksCleared  ["AllBlocksCleared"]
// Later optional fields (extra_keys, group_idx, kv_cache_spec_*) default to nil and msgspec
// omits trailing defaults (omit_defaults=True), so they are not written; msgspec decoders
// ignore missing defaulted and extra trailing fields. Newer vLLM (after PR #42892, mid-2026)
// writes each event as a map {"type": "BlockStored", "block_hashes": ...} inside the same
// positional batch; llm-d-kv-cache (PR #661) and other consumers accept both forms.
//
// A hash is vLLM's ExternalBlockHash (bytes | int); Tandem writes each kv::BlockHash as bin
// of its 16 canonical bytes (BlockHash::Bytes(), the same bytes as its hex pool key).
// medium is "CPU": Tandem's KV cache lives in host memory, and "CPU" is the medium vLLM's
// own CPU tier reports (CPULoadStoreSpec.medium() in vllm/v1/kv_offload/mediums.py; the GPU
// prefix cache reports "GPU"). lora_id and lora_name are always nil (no adapters).
//
// Thread safety: the event types are values; EncodeKvEventBatch is pure. A KvEventSink is
// called from the engine thread only (see below); KvEventBatcher is not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "kv/block_hash.h"

namespace tandem {
class MsgpackWriter;
}

namespace tandem::kv {

inline constexpr const char* kMediumCpu = "CPU";

// Full blocks that became discoverable in the prefix cache, in sequence order. token_ids
// holds block_hashes.size() * block_size tokens; parent_block_hash is the hash of the block
// before the first one (nil when the first is the sequence's first block).
struct BlockStored {
  std::vector<BlockHash> block_hashes;
  std::optional<BlockHash> parent_block_hash;
  std::vector<int32_t> token_ids;
  int32_t block_size = 0;
  std::string medium = kMediumCpu;
};

// Hashes dropped from the prefix cache (their blocks were reused for other content).
struct BlockRemoved {
  std::vector<BlockHash> block_hashes;
  std::string medium = kMediumCpu;
};

// Every hash was dropped (reset of the prefix cache).
struct AllBlocksCleared {};

using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

// Appends one event as vLLM encodes it (the array form above).
void EncodeKvEvent(const KvEvent& event, MsgpackWriter* out);

// One KVEventBatch: [ts_s, [events...], dp_rank or nil].
std::string EncodeKvEventBatch(double ts_s, std::span<const KvEvent> events,
                               std::optional<int> data_parallel_rank);

// Where the prefix cache reports events. Called on the engine (scheduler) thread, in the
// order the cache changed; implementations must not block (no I/O, no waiting on a
// consumer). EndStep() closes one engine step: the events recorded since the previous
// EndStep() form one batch (none recorded: no batch).
class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void Record(KvEvent event) = 0;
  virtual void EndStep() = 0;
};

// A sink that encodes each step's events as one KVEventBatch and hands the bytes to `emit`
// (e.g. a publisher's non-blocking enqueue) together with the number of events in it.
class KvEventBatcher final : public KvEventSink {
 public:
  using EmitFn = std::function<void(std::string payload, size_t num_events)>;
  using ClockFn = std::function<double()>;  // seconds since the Unix epoch

  // `emit` is required; `clock` defaults to the system clock.
  KvEventBatcher(std::optional<int> data_parallel_rank, EmitFn emit, ClockFn clock = nullptr);

  void Record(KvEvent event) override;
  void EndStep() override;

 private:
  std::optional<int> data_parallel_rank_;
  EmitFn emit_;
  ClockFn clock_;
  std::vector<KvEvent> pending_;
};

}  // namespace tandem::kv
