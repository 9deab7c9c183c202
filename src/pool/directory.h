// Directory: the directory entries this worker owns on the ring — key -> the workers
// holding the data (docs/POOL.md "Placement").
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tandem::pool {

class Directory {
 public:
  void Put(const std::string& holder, const std::vector<std::string>& keys);
  void Del(const std::string& holder, const std::vector<std::string>& keys);
  // Holders of `key`, most recently announced first.
  std::vector<std::string> Lookup(const std::string& key) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::vector<std::string>> holders_;
};

}  // namespace tandem::pool
