// TokenTrie: the byte strings of a vocabulary's tokens in a trie laid out in preorder,
// the form the token masker walks (a failed byte skips a whole subtree in one jump).
//
// Tokens with an empty byte string (control, unused tokens) are not in the trie; the
// end-of-generation ids are kept apart (the masker allows them where the grammar may
// end). Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::grammar {

class TokenTrie {
 public:
  // `pieces[id]` = the bytes token `id` decodes to ("" = never allowed by a grammar).
  // `eog_ids` = the end-of-generation tokens.
  TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog_ids);

  int32_t vocab_size() const { return vocab_size_; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

  // Nodes 1..num_nodes()-1 in preorder; node 0 is the root (no byte).
  int32_t num_nodes() const { return static_cast<int32_t>(byte_.size()); }
  uint8_t byte(int32_t node) const { return byte_[node]; }
  int32_t depth(int32_t node) const { return depth_[node]; }
  int32_t subtree_end(int32_t node) const { return end_[node]; }  // first node after the subtree
  // Tokens whose bytes end at `node`.
  const int32_t* tokens_begin(int32_t node) const { return tokens_.data() + token_start_[node]; }
  const int32_t* tokens_end(int32_t node) const { return tokens_.data() + token_start_[node + 1]; }
  int32_t max_depth() const { return max_depth_; }

 private:
  int32_t vocab_size_;
  std::vector<int32_t> eog_ids_;
  std::vector<uint8_t> byte_;
  std::vector<int32_t> depth_;
  std::vector<int32_t> end_;
  std::vector<int32_t> token_start_;  // [num_nodes + 1]
  std::vector<int32_t> tokens_;
  int32_t max_depth_ = 0;
};

}  // namespace tandem::grammar
