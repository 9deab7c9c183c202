#include "pool/hash_ring.h"

#include <xxhash.h>

#include <algorithm>

namespace tandem::pool {

HashRing::HashRing(std::vector<std::string> members) : members_(std::move(members)) {
  std::sort(members_.begin(), members_.end());
  members_.erase(std::unique(members_.begin(), members_.end()), members_.end());
  for (uint32_t m = 0; m < members_.size(); ++m) {
    for (int v = 0; v < kVirtualNodes; ++v) {
      std::string point = members_[m] + "#" + std::to_string(v);
      points_.emplace_back(XXH3_64bits(point.data(), point.size()), m);
    }
  }
  std::sort(points_.begin(), points_.end());
}

const std::string& HashRing::Owner(std::string_view key) const {
  static const std::string kNone;
  if (points_.empty()) return kNone;
  uint64_t h = XXH3_64bits(key.data(), key.size());
  auto it = std::lower_bound(points_.begin(), points_.end(), std::make_pair(h, uint32_t{0}));
  if (it == points_.end()) it = points_.begin();
  return members_[it->second];
}

}  // namespace tandem::pool
