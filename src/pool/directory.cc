#include "pool/directory.h"

#include <algorithm>

namespace tandem::pool {

void Directory::Put(const std::string& holder, const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& key : keys) {
    auto& list = holders_[key];
    auto it = std::find(list.begin(), list.end(), holder);
    if (it != list.end()) list.erase(it);
    list.insert(list.begin(), holder);
    if (list.size() > 8) list.pop_back();  // a few holders are enough to find one alive
  }
}

void Directory::Del(const std::string& holder, const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& key : keys) {
    auto it = holders_.find(key);
    if (it == holders_.end()) continue;
    auto& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), holder), list.end());
    if (list.empty()) holders_.erase(it);
  }
}

std::vector<std::string> Directory::Lookup(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = holders_.find(key);
  return it == holders_.end() ? std::vector<std::string>() : it->second;
}

size_t Directory::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return holders_.size();
}

}  // namespace tandem::pool
