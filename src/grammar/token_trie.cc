#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace tandem::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog_ids)
    : vocab_size_(static_cast<int32_t>(pieces.size())), eog_ids_(std::move(eog_ids)) {
  // Sorting the pieces puts every trie node's tokens in preorder: the node for a prefix
  // comes before (or with) the pieces that extend it.
  std::vector<int32_t> order;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (!pieces[id].empty() && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pieces[a] < pieces[b]; });
  byte_.push_back(0);
  depth_.push_back(0);
  std::vector<int32_t> node_tokens_count{0};
  std::vector<int32_t> path{0};  // path[d] = node at depth d of the current piece
  std::string prev;
  std::vector<int32_t> token_node(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const std::string& s = pieces[order[k]];
    size_t common = 0;
    while (common < prev.size() && common < s.size() && prev[common] == s[common]) ++common;
    path.resize(common + 1);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(s[d]));
      depth_.push_back(static_cast<int32_t>(d + 1));
      node_tokens_count.push_back(0);
    }
    token_node[k] = path[s.size()];
    ++node_tokens_count[path[s.size()]];
    max_depth_ = std::max<int32_t>(max_depth_, static_cast<int32_t>(s.size()));
    prev = s;
  }
  const int32_t n = num_nodes();
  token_start_.assign(n + 1, 0);
  for (int32_t i = 0; i < n; ++i) token_start_[i + 1] = token_start_[i] + node_tokens_count[i];
  tokens_.resize(order.size());
  std::vector<int32_t> fill(token_start_.begin(), token_start_.end() - 1);
  for (size_t k = 0; k < order.size(); ++k) tokens_[fill[token_node[k]]++] = order[k];
  // Subtree ends: a node's subtree runs until the next node at the same or lower depth.
  end_.assign(n, n);
  std::vector<int32_t> open;  // nodes whose subtree is still open, by depth
  for (int32_t i = 0; i < n; ++i) {
    while (!open.empty() && depth_[open.back()] >= depth_[i]) {
      end_[open.back()] = i;
      open.pop_back();
    }
    open.push_back(i);
  }
}

}  // namespace tandem::grammar
