#include "tokenizer/special_token_splitter.h"

#include <algorithm>

namespace tandem {
namespace {

bool IsSpecialType(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUserDefined ||
         type == TokenType::kUnknown;
}

bool NeedsParseSpecial(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUnknown;
}

}  // namespace

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) : vocab_(vocab) {
  for (int32_t id = 0; id < vocab_.size(); ++id) {
    if (IsSpecialType(vocab_.types[id])) ordered_ids_.push_back(id);
  }
  // Longest first. std::sort (not stable_sort) on the ascending ids, as llama.cpp,
  // so that equal-length tokens are tried in the same order as there.
  std::sort(ordered_ids_.begin(), ordered_ids_.end(), [&](int32_t a, int32_t b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });

  node_rank_.push_back(-1);
  for (size_t rank = 0; rank < ordered_ids_.size(); ++rank) {
    int32_t node = 0;
    for (char c : vocab_.tokens[ordered_ids_[rank]]) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto [it, inserted] = trie_edges_.try_emplace(key, static_cast<int32_t>(node_rank_.size()));
      if (inserted) node_rank_.push_back(-1);
      node = it->second;
    }
    node_rank_[node] = static_cast<int32_t>(rank);
  }
}

std::vector<bool> SpecialTokenSplitter::FindPresent(std::string_view text) const {
  std::vector<bool> present(ordered_ids_.size(), false);
  for (size_t start = 0; start < text.size(); ++start) {
    int32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]);
      const auto it = trie_edges_.find(key);
      if (it == trie_edges_.end()) break;
      node = it->second;
      if (node_rank_[node] >= 0) present[node_rank_[node]] = true;
    }
  }
  return present;
}

std::vector<TextFragment> SpecialTokenSplitter::Split(std::string_view text,
                                                      bool parse_special) const {
  std::vector<TextFragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});

  // A token absent from the whole text cannot be in any fragment of it: skipping
  // those keeps the cost independent of the vocab's number of special tokens.
  const std::vector<bool> present = FindPresent(text);
  std::vector<TextFragment> next;
  for (size_t rank = 0; rank < ordered_ids_.size(); ++rank) {
    if (!present[rank]) continue;
    const int32_t id = ordered_ids_[rank];
    if (!parse_special && NeedsParseSpecial(vocab_.types[id])) continue;
    const std::string_view special = vocab_.tokens[id];

    next.clear();
    for (const TextFragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
        continue;
      }
      const size_t end = fragment.offset + fragment.length;
      size_t pos = fragment.offset;
      while (true) {
        const size_t match = text.substr(0, end).find(special, pos);
        if (match == std::string_view::npos) break;
        if (match > pos) next.push_back({-1, pos, match - pos});
        next.push_back({id, 0, 0});
        pos = match + special.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace tandem
