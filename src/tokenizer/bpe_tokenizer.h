// BpeTokenizer: byte-level BPE (GGUF tokenizer model "gpt2"; qwen2, llama3, gpt-2),
// identical to llama.cpp's llm_tokenizer_bpe.
//
// The pre-tokenizer splits the text into byte-encoded words; within each word the
// adjacent pair with the lowest merge rank is merged repeatedly (ties: leftmost).
// Each resulting symbol becomes its token; a symbol that is not a token falls back
// to its single bytes where those are tokens (and is dropped otherwise, as in
// llama.cpp).
//
// Ownership: borrows the Vocab and TokenMap, which must outlive it; the merge ranks
// are views into vocab.merges.
// Thread safety: immutable after construction; Encode may run concurrently.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_map.h"
#include "tokenizer/vocab.h"

namespace tandem {

class BpeTokenizer {
 public:
  BpeTokenizer(const Vocab& vocab, const TokenMap& token_to_id, PreTokenizer::Options options);

  // Appends the ids of `text`, a fragment without special tokens.
  void Encode(std::string_view text, std::vector<int32_t>* out) const;

  // Rank of merging `left` and `right` (lower merges first), or -1.
  int32_t MergeRank(std::string_view left, std::string_view right) const;

  const PreTokenizer::Options& options() const { return options_; }

 private:
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  const Vocab& vocab_;
  const TokenMap& token_to_id_;
  const PreTokenizer::Options options_;
  const PreTokenizer pre_tokenizer_;
  // "left right" -> rank; the first listing of a pair wins, as in llama.cpp.
  std::unordered_map<std::string_view, int32_t> merge_ranks_;
};

}  // namespace tandem
