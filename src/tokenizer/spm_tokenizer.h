// SpmTokenizer: SentencePiece-style BPE over a scored vocab (GGUF tokenizer model
// "llama"; gemma, llama 1/2), identical to llama.cpp's llm_tokenizer_spm.
//
// Starting from one symbol per UTF-8 character, the adjacent pair whose
// concatenation is the highest-scoring vocab token is merged repeatedly (ties: the
// leftmost pair). A final symbol that is not a token is emitted as byte tokens
// <0xXX> (byte fallback), or the unknown token when the vocab lacks byte tokens.
//
// Ownership: borrows the Vocab and TokenMap, which must outlive it.
// Thread safety: immutable after construction; Encode may run concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/token_map.h"
#include "tokenizer/vocab.h"

namespace tandem {

class SpmTokenizer {
 public:
  SpmTokenizer(const Vocab& vocab, const TokenMap& token_to_id);

  // Appends the ids of `text`, a fragment without special tokens whose spaces the
  // caller has already replaced by U+2581 (and prefixed, if the vocab wants that).
  void Encode(std::string_view text, std::vector<int32_t>* out) const;

 private:
  // The id for one byte of a symbol that is not itself a token.
  int32_t ByteToken(uint8_t byte) const;

  const Vocab& vocab_;
  const TokenMap& token_to_id_;
  std::array<int32_t, 256> byte_tokens_;  // -1 where the vocab has no token for the byte
};

}  // namespace tandem
