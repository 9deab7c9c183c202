#include "kv/kv_events.h"

#include <chrono>
#include <type_traits>

#include "common/logging.h"
#include "common/msgpack_writer.h"

namespace tandem::kv {
namespace {

void WriteHash(const BlockHash& hash, MsgpackWriter* out) {
  const std::array<uint8_t, 16> bytes = hash.Bytes();
  out->Bin(bytes);
}

void WriteHashes(const std::vector<BlockHash>& hashes, MsgpackWriter* out) {
  out->ArrayHeader(hashes.size());
  for (const BlockHash& h : hashes) WriteHash(h, out);
}

double SystemClockSeconds() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(since_epoch).count();
}

}  // namespace

void EncodeKvEvent(const KvEvent& event, MsgpackWriter* out) {
  std::visit(
      [out](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, BlockStored>) {
          out->ArrayHeader(8);
          out->Str("BlockStored");
          WriteHashes(e.block_hashes, out);
          if (e.parent_block_hash) {
            WriteHash(*e.parent_block_hash, out);
          } else {
            out->Nil();
          }
          out->ArrayHeader(e.token_ids.size());
          for (int32_t t : e.token_ids) out->Int(t);
          out->Int(e.block_size);
          out->Nil();  // lora_id
          out->Str(e.medium);
          out->Nil();  // lora_name
        } else if constexpr (std::is_same_v<T, BlockRemoved>) {
          out->ArrayHeader(3);
          out->Str("BlockRemoved");
          WriteHashes(e.block_hashes, out);
          out->Str(e.medium);
        } else {
          static_assert(std::is_same_v<T, AllBlocksCleared>);
          out->ArrayHeader(1);
          out->Str("AllBlocksCleared");
        }
      },
      event);
}

std::string EncodeKvEventBatch(double ts_s, std::span<const KvEvent> events,
                               std::optional<int> data_parallel_rank) {
  MsgpackWriter out;
  out.ArrayHeader(3);
  out.Double(ts_s);
  out.ArrayHeader(events.size());
  for (const KvEvent& e : events) EncodeKvEvent(e, &out);
  if (data_parallel_rank) {
    out.Int(*data_parallel_rank);
  } else {
    out.Nil();
  }
  return out.Release();
}

KvEventBatcher::KvEventBatcher(std::optional<int> data_parallel_rank, EmitFn emit, ClockFn clock)
    : data_parallel_rank_(data_parallel_rank),
      emit_(std::move(emit)),
      clock_(clock ? std::move(clock) : ClockFn(SystemClockSeconds)) {
  TANDEM_CHECK(emit_ != nullptr) << "KvEventBatcher needs an emit function";
}

void KvEventBatcher::Record(KvEvent event) { pending_.push_back(std::move(event)); }

void KvEventBatcher::EndStep() {
  if (pending_.empty()) return;
  std::string payload = EncodeKvEventBatch(clock_(), pending_, data_parallel_rank_);
  const size_t num_events = pending_.size();
  pending_.clear();
  emit_(std::move(payload), num_events);
}

}  // namespace tandem::kv
