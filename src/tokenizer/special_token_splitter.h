// SpecialTokenSplitter: cuts the spellings of special tokens out of raw text before
// the SPM/BPE model sees it (llama.cpp's tokenizer_st_partition).
//
// Special tokens are the CONTROL, USER_DEFINED and UNKNOWN ones. They are tried
// longest text first; each one splits every remaining text fragment at all its
// non-overlapping leftmost occurrences. USER_DEFINED tokens are always matched;
// CONTROL and UNKNOWN ones only when `parse_special` is true.
//
// Ownership: borrows the Vocab, which must outlive it.
// Thread safety: immutable after construction; Split may run concurrently.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace tandem {

// A piece of the input: a special token, or a run of raw text.
struct TextFragment {
  int32_t token = -1;  // >= 0: this fragment is that special token
  size_t offset = 0;   // raw text: byte range [offset, offset + length) of the input
  size_t length = 0;
};

class SpecialTokenSplitter {
 public:
  explicit SpecialTokenSplitter(const Vocab& vocab);

  // Fragments of `text` in order; empty for empty text.
  std::vector<TextFragment> Split(std::string_view text, bool parse_special) const;

  // Special token ids in the order they are tried.
  const std::vector<int32_t>& ordered_ids() const { return ordered_ids_; }

 private:
  // Marks, by position in ordered_ids_, each special token that occurs in `text`.
  std::vector<bool> FindPresent(std::string_view text) const;

  const Vocab& vocab_;
  std::vector<int32_t> ordered_ids_;
  // A byte trie over the special token texts: node 0 is the root; edges are keyed by
  // (node << 8 | byte); node_rank_[node] is the position in ordered_ids_ of the token
  // spelled by the path to it, or -1.
  std::unordered_map<uint64_t, int32_t> trie_edges_;
  std::vector<int32_t> node_rank_;
};

}  // namespace tandem
