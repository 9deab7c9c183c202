#include "proxy/prefix_index.h"

#include <algorithm>
#include <functional>
#include <map>

namespace tandem::proxy {

uint64_t TokenBlockDigest(std::span<const int32_t> tokens) {
  // splitmix64 finalizer over a running state: cheap, and every token moves every bit.
  uint64_t h = 0x9e3779b97f4a7c15ull ^ tokens.size();
  for (int32_t t : tokens) {
    uint64_t z = h + 0x9e3779b97f4a7c15ull + static_cast<uint32_t>(t);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    h = z ^ (z >> 31);
  }
  return h;
}

size_t PrefixIndex::EdgeHasher::operator()(const Edge& e) const {
  return std::hash<std::string>()(e.parent) ^ (e.digest * 0x9e3779b97f4a7c15ull);
}

void PrefixIndex::Apply(int instance, const KvEventBatch& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const KvEvent& event : batch.events) {
    switch (event.kind) {
      case KvEvent::Kind::kBlockStored:
        StoreLocked(instance, event);
        break;
      case KvEvent::Kind::kBlockRemoved:
        for (const KvBlockHash& h : event.block_hashes) RemoveLocked(instance, h);
        break;
      case KvEvent::Kind::kAllBlocksCleared:
        DropLocked(instance);
        break;
    }
  }
}

void PrefixIndex::Apply(int instance, const KvEvent& event) {
  KvEventBatch batch;
  batch.events.push_back(event);
  Apply(instance, batch);
}

void PrefixIndex::DropInstance(int instance) {
  std::lock_guard<std::mutex> lock(mu_);
  DropLocked(instance);
}

void PrefixIndex::StoreLocked(int instance, const KvEvent& event) {
  const size_t n = event.block_hashes.size();
  if (event.has_lora) return;  // see the header: LoRA chains are not matched
  if (event.block_size <= 0 ||
      event.token_ids.size() != n * static_cast<size_t>(event.block_size)) {
    rejected_ += n;
    return;
  }
  Instance& inst = instances_[instance];
  inst.block_size = event.block_size;
  KvBlockHash parent = event.parent_block_hash.value_or(KvBlockHash());
  for (size_t i = 0; i < n; ++i) {
    const KvBlockHash& hash = event.block_hashes[i];
    auto it = blocks_.find(hash);
    if (it == blocks_.end()) {
      if (blocks_.size() >= max_blocks_) {
        rejected_ += n - i;
        return;  // the rest chains off this block: none of it can be matched
      }
      std::span<const int32_t> tokens(event.token_ids.data() + i * event.block_size,
                                      static_cast<size_t>(event.block_size));
      Edge edge{parent, TokenBlockDigest(tokens)};
      it = blocks_.emplace(hash, Block{edge, {}}).first;
      edges_[edge].push_back(hash);
    }
    std::vector<int>& holders = it->second.holders;
    if (std::find(holders.begin(), holders.end(), instance) == holders.end()) {
      holders.push_back(instance);
    }
    inst.blocks.insert(hash);
    parent = hash;
  }
}

void PrefixIndex::RemoveLocked(int instance, const KvBlockHash& hash) {
  auto it = blocks_.find(hash);
  if (it == blocks_.end()) return;
  std::vector<int>& holders = it->second.holders;
  holders.erase(std::remove(holders.begin(), holders.end(), instance), holders.end());
  if (auto inst = instances_.find(instance); inst != instances_.end())
    inst->second.blocks.erase(hash);
  if (!holders.empty()) return;
  auto edge = edges_.find(it->second.edge);
  if (edge != edges_.end()) {
    std::vector<KvBlockHash>& hashes = edge->second;
    hashes.erase(std::remove(hashes.begin(), hashes.end(), hash), hashes.end());
    if (hashes.empty()) edges_.erase(edge);
  }
  blocks_.erase(it);
}

void PrefixIndex::DropLocked(int instance) {
  auto it = instances_.find(instance);
  if (it == instances_.end()) return;
  std::unordered_set<KvBlockHash> blocks = std::move(it->second.blocks);
  instances_.erase(it);
  for (const KvBlockHash& hash : blocks) RemoveLocked(instance, hash);
}

std::vector<PrefixIndex::Match> PrefixIndex::MatchPrefix(std::span<const int32_t> tokens) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Instances grouped by block size (one group in a homogeneous cluster).
  std::map<int64_t, std::vector<int>> by_block_size;
  for (const auto& [id, inst] : instances_) {
    if (!inst.blocks.empty()) by_block_size[inst.block_size].push_back(id);
  }
  std::vector<Match> out;
  for (const auto& [block_size, members] : by_block_size) {
    std::vector<int> alive = members;                     // held every block so far
    std::vector<KvBlockHash> frontier = {KvBlockHash()};  // hashes matched at the last depth
    for (size_t depth = 0; (depth + 1) * block_size <= tokens.size(); ++depth) {
      const uint64_t digest =
          TokenBlockDigest(tokens.subspan(depth * block_size, static_cast<size_t>(block_size)));
      std::vector<KvBlockHash> next;
      std::vector<int> held;
      for (const KvBlockHash& parent : frontier) {
        auto edge = edges_.find(Edge{parent, digest});
        if (edge == edges_.end()) continue;
        for (const KvBlockHash& hash : edge->second) {
          const std::vector<int>& holders = blocks_.at(hash).holders;
          bool useful = false;
          for (int id : holders) {
            if (std::find(alive.begin(), alive.end(), id) == alive.end()) continue;
            useful = true;
            if (std::find(held.begin(), held.end(), id) == held.end()) held.push_back(id);
          }
          if (useful) next.push_back(hash);
        }
      }
      // Instances that dropped out of the walk here keep their count.
      for (int id : alive) {
        if (std::find(held.begin(), held.end(), id) == held.end() && depth > 0) {
          out.push_back({id, static_cast<int64_t>(depth) * block_size});
        }
      }
      alive = std::move(held);
      frontier = std::move(next);
      if (alive.empty()) break;
      if ((depth + 2) * block_size > tokens.size()) {
        for (int id : alive) out.push_back({id, static_cast<int64_t>(depth + 1) * block_size});
        alive.clear();
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Match& a, const Match& b) {
    return a.cached_tokens != b.cached_tokens ? a.cached_tokens > b.cached_tokens
                                              : a.instance < b.instance;
  });
  return out;
}

size_t PrefixIndex::num_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_.size();
}

size_t PrefixIndex::num_blocks(int instance) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = instances_.find(instance);
  return it == instances_.end() ? 0 : it->second.blocks.size();
}

int64_t PrefixIndex::block_size(int instance) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = instances_.find(instance);
  return it == instances_.end() ? 0 : it->second.block_size;
}

uint64_t PrefixIndex::num_rejected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rejected_;
}

}  // namespace tandem::proxy
