// HashRing: the consistent-hash ring that places each key's directory entry on one
// worker (docs/POOL.md "Placement"): 64 virtual nodes per worker at
// XXH3_64("ADDR#i"), a key at XXH3_64(key), owner = first point clockwise. Every worker
// builds the same ring from the same member set.
//
// Thread safety: immutable after construction (share it as shared_ptr<const HashRing>).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::pool {

class HashRing {
 public:
  static constexpr int kVirtualNodes = 64;
  explicit HashRing(std::vector<std::string> members);

  // The owner of `key`, or "" when the ring is empty.
  const std::string& Owner(std::string_view key) const;
  const std::vector<std::string>& members() const { return members_; }  // sorted
  bool empty() const { return members_.empty(); }

 private:
  std::vector<std::string> members_;
  std::vector<std::pair<uint64_t, uint32_t>> points_;  // (hash, member index), sorted
};

}  // namespace tandem::pool
