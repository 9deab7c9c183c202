#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "common/logging.h"
#include "kv/kv_events.h"

namespace tandem::kv {
namespace {

const std::vector<int32_t> kNoBlocks;
const std::vector<BlockHash> kNoHashes;

}  // namespace

KvCacheManager::KvCacheManager(KvCacheConfig config)
    : config_(std::move(config)),
      root_hash_(
          ComputeRootHash(config_.model_fingerprint, config_.block_size_tokens, config_.kv_dtype)),
      pool_(config_.num_blocks) {}

void KvCacheManager::set_event_sink(KvEventSink* sink) {
  event_sink_ = sink;
  pool_.set_event_sink(sink);
}

KvCacheManager::RequestState& KvCacheManager::StateFor(const std::string& request_id,
                                                       std::string_view cache_salt) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) {
    BlockHasher hasher(root_hash_, config_.block_size_tokens, std::string(cache_salt));
    it = requests_.try_emplace(request_id, std::move(hasher)).first;
  }
  return it->second;
}

int32_t KvCacheManager::BlocksFor(int64_t num_tokens) const {
  const int64_t b = config_.block_size_tokens;
  return static_cast<int32_t>((num_tokens + b - 1) / b);
}

ComputedBlocks KvCacheManager::GetComputedBlocks(const std::string& request_id,
                                                 std::span<const int32_t> token_ids,
                                                 std::string_view cache_salt) {
  ComputedBlocks hit;
  if (!config_.enable_prefix_caching) return hit;
  RequestState& state = StateFor(request_id, cache_salt);
  TANDEM_CHECK(state.hasher.extra() == cache_salt)
      << "request " << request_id << " changed its cache salt";
  TANDEM_CHECK(state.block_table.empty())
      << "GetComputedBlocks for request " << request_id << " which already holds blocks";
  state.hasher.Update(token_ids);

  // Leave at least one token to compute: the step needs its logits to sample the next token.
  const size_t max_hit_blocks =
      token_ids.empty() ? 0 : (token_ids.size() - 1) / config_.block_size_tokens;
  const std::vector<BlockHash>& hashes = state.hasher.hashes();
  const size_t limit = std::min(max_hit_blocks, hashes.size());
  for (size_t i = 0; i < limit; ++i) {
    std::optional<int32_t> block = pool_.LookupCached(hashes[i]);
    // Chaining makes a later block's hash imply this whole prefix, but the earlier block may
    // have been evicted on its own; a gap ends the usable hit.
    if (!block) break;
    hit.block_ids.push_back(*block);
  }
  hit.num_computed_tokens = static_cast<int32_t>(hit.block_ids.size()) * config_.block_size_tokens;

  ++stats_.num_requests;
  stats_.queries_tokens += static_cast<int64_t>(token_ids.size());
  stats_.hits_tokens += hit.num_computed_tokens;
  return hit;
}

std::optional<std::vector<int32_t>> KvCacheManager::AllocateSlots(
    const std::string& request_id, int32_t num_computed_tokens, int32_t num_new_tokens,
    const ComputedBlocks& new_computed, int32_t num_lookahead_tokens) {
  TANDEM_CHECK(num_computed_tokens >= 0 && num_new_tokens >= 0 && num_lookahead_tokens >= 0)
      << "computed=" << num_computed_tokens << " new=" << num_new_tokens
      << " lookahead=" << num_lookahead_tokens;
  TANDEM_CHECK(num_computed_tokens >= new_computed.num_computed_tokens)
      << "num_computed_tokens must include the prefix hit";
  RequestState& state = StateFor(request_id);
  const int32_t num_hit_blocks = static_cast<int32_t>(new_computed.block_ids.size());
  if (num_hit_blocks > 0) {
    TANDEM_CHECK(state.block_table.empty())
        << "prefix hit passed for request " << request_id << " which already holds blocks";
    const std::vector<BlockHash>& hashes = state.hasher.hashes();
    TANDEM_CHECK(static_cast<size_t>(num_hit_blocks) <= hashes.size());
    for (int32_t i = 0; i < num_hit_blocks; ++i) {
      // Catches a scheduler that let the pool change between lookup and allocation.
      TANDEM_CHECK(pool_.CachedHash(new_computed.block_ids[i]) == hashes[i])
          << "stale prefix hit: block " << new_computed.block_ids[i] << " was evicted";
    }
  }

  const int64_t total_tokens =
      static_cast<int64_t>(num_computed_tokens) + num_new_tokens + num_lookahead_tokens;
  const int32_t have_blocks = static_cast<int32_t>(state.block_table.size()) + num_hit_blocks;
  const int32_t num_to_allocate = std::max(0, BlocksFor(total_tokens) - have_blocks);

  // Hit blocks that are free would be counted twice: once as reusable, once as free supply.
  int32_t hit_blocks_now_free = 0;
  for (int32_t id : new_computed.block_ids) {
    if (pool_.ref_count(id) == 0) ++hit_blocks_now_free;
  }
  if (num_to_allocate > pool_.num_free() - hit_blocks_now_free) return std::nullopt;

  // Touch before allocating so the hit blocks leave the LRU and cannot be evicted below.
  pool_.Touch(new_computed.block_ids);
  state.block_table.insert(state.block_table.end(), new_computed.block_ids.begin(),
                           new_computed.block_ids.end());
  state.num_cached_blocks += num_hit_blocks;

  std::optional<std::vector<int32_t>> fresh = pool_.Allocate(num_to_allocate);
  TANDEM_CHECK(fresh.has_value()) << "free-block accounting is wrong";
  state.block_table.insert(state.block_table.end(), fresh->begin(), fresh->end());
  return fresh;
}

void KvCacheManager::CacheComputedBlocks(const std::string& request_id,
                                         std::span<const int32_t> token_ids,
                                         int32_t num_computed_tokens) {
  if (!config_.enable_prefix_caching) return;
  TANDEM_CHECK(num_computed_tokens >= 0 &&
               static_cast<size_t>(num_computed_tokens) <= token_ids.size())
      << "num_computed_tokens=" << num_computed_tokens << " tokens=" << token_ids.size();
  RequestState& state = StateFor(request_id);
  const int32_t num_full = num_computed_tokens / config_.block_size_tokens;
  TANDEM_CHECK(num_full <= static_cast<int32_t>(state.block_table.size()))
      << "request " << request_id << " computed " << num_full << " full blocks but holds "
      << state.block_table.size();
  if (num_full <= state.num_cached_blocks) return;
  state.hasher.Update(token_ids);
  const std::vector<BlockHash>& hashes = state.hasher.hashes();
  const int32_t bs = config_.block_size_tokens;
  std::optional<BlockStored> run;  // consecutive blocks newly registered by this call
  auto flush = [&] {
    if (run) event_sink_->Record(std::move(*run));
    run.reset();
  };
  for (int32_t i = state.num_cached_blocks; i < num_full; ++i) {
    const int32_t block = state.block_table[i];
    const bool was_cached = pool_.CachedHash(block).has_value();
    // False means another request registered the same content first; this block simply
    // stays private to the request and is recycled uncached when freed.
    const bool stored = pool_.CacheFullBlock(block, hashes[i]) && !was_cached;
    if (event_sink_ == nullptr) continue;
    if (!stored) {
      flush();  // a gap: the next stored block starts a new event with its own parent
      continue;
    }
    if (!run) {
      run.emplace();
      run->block_size = bs;
      if (i > 0) run->parent_block_hash = hashes[i - 1];
    }
    run->block_hashes.push_back(hashes[i]);
    run->token_ids.insert(run->token_ids.end(), token_ids.begin() + static_cast<size_t>(i) * bs,
                          token_ids.begin() + static_cast<size_t>(i + 1) * bs);
  }
  if (event_sink_ != nullptr) flush();
  state.num_cached_blocks = num_full;
}

void KvCacheManager::Free(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  const std::vector<int32_t>& table = it->second.block_table;
  std::vector<int32_t> tail_first(table.rbegin(), table.rend());
  pool_.Free(tail_first);
  requests_.erase(it);
}

void KvCacheManager::FreeTail(const std::string& request_id, int32_t num_tokens) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  std::vector<int32_t>& table = it->second.block_table;
  const size_t keep = static_cast<size_t>(std::max(BlocksFor(num_tokens), it->second.num_cached_blocks));
  if (table.size() <= keep) return;
  std::vector<int32_t> tail_first(table.rbegin(), table.rend() - static_cast<std::ptrdiff_t>(keep));
  pool_.Free(tail_first);
  table.resize(keep);
}

std::optional<KvCacheManager::ForkCopy> KvCacheManager::Fork(const std::string& parent_id,
                                                             const std::string& child_id,
                                                             int32_t num_tokens) {
  auto parent = requests_.find(parent_id);
  TANDEM_CHECK(parent != requests_.end()) << "fork of unknown request " << parent_id;
  TANDEM_CHECK(requests_.count(child_id) == 0)
      << "fork into request " << child_id << " which holds blocks";
  const std::vector<int32_t>& table = parent->second.block_table;
  TANDEM_CHECK(num_tokens >= 0 && BlocksFor(num_tokens) <= static_cast<int32_t>(table.size()))
      << "fork of " << num_tokens << " tokens from a request holding " << table.size() << " blocks";
  const int32_t num_full = num_tokens / config_.block_size_tokens;
  const bool partial = num_tokens % config_.block_size_tokens != 0;
  if (partial && pool_.num_free() < 1) return std::nullopt;
  RequestState child(parent->second.hasher);
  child.block_table.assign(table.begin(), table.begin() + num_full);
  child.num_cached_blocks = std::min(parent->second.num_cached_blocks, num_full);
  pool_.Touch(child.block_table);  // in use by the parent: one more reference each
  ForkCopy copy;
  if (partial) {
    std::optional<std::vector<int32_t>> fresh = pool_.Allocate(1);
    TANDEM_CHECK(fresh.has_value()) << "free-block accounting is wrong";
    copy.copy_from = table[num_full];
    copy.copy_to = fresh->front();
    child.block_table.push_back(copy.copy_to);
  }
  requests_.emplace(child_id, std::move(child));
  return copy;
}

const std::vector<int32_t>& KvCacheManager::GetBlockTable(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? kNoBlocks : it->second.block_table;
}

const std::vector<BlockHash>& KvCacheManager::GetBlockHashes(const std::string& request_id) const {
  if (!config_.enable_prefix_caching) return kNoHashes;
  auto it = requests_.find(request_id);
  return it == requests_.end() ? kNoHashes : it->second.hasher.hashes();
}

}  // namespace tandem::kv
