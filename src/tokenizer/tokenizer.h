// Tokenizer: text <-> token ids, with three backends:
//
//   - a GGUF vocab, with the same results as llama.cpp (llama_tokenize /
//     llama_token_to_piece / llama_detokenize of llama-cpp-python 0.3.36) on every
//     supported vocab: tokenizer model "llama" (SentencePiece-style, e.g. gemma) and
//     "gpt2" (byte-level BPE) with the pre-tokenizers of PreTokenizer::SupportedNames()
//     (default, gpt-2, llama-bpe/llama3, qwen2, ...);
//   - a Hugging Face tokenizer.json (model "hf", built by LoadHfTokenizer in
//     tokenizer/hf_tokenizer_json.h), with the same ids and texts as the Python
//     `tokenizers` package (HfTokenizer).
//
//   TANDEM_ASSIGN_OR_RETURN(Vocab vocab, LoadVocab(gguf));
//   TANDEM_ASSIGN_OR_RETURN(auto tokenizer, Tokenizer::Create(std::move(vocab)));
//   std::vector<int32_t> ids = tokenizer->Encode(prompt, /*add_special=*/true,
//                                                /*parse_special=*/true);
//
// Ownership: owns its Vocab and all lookup tables.
// Thread safety: immutable after Create; every const method may be called
// concurrently from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/token_map.h"
#include "tokenizer/vocab.h"

namespace tandem {

class BpeTokenizer;
class HfTokenizer;
class SpecialTokenSplitter;
class SpmTokenizer;

class Tokenizer {
 public:
  // Unimplemented for a tokenizer model or pre-tokenizer outside the supported set
  // (the message lists the supported ones); InvalidArgument for an inconsistent
  // vocab (e.g. a BOS id the vocab does not have while add_bos is set).
  static StatusOr<std::unique_ptr<Tokenizer>> Create(Vocab vocab);

  // The Hugging Face backend: `vocab` (model "hf") describes the tokens, `hf` encodes
  // and decodes. LoadHfTokenizer builds both; InvalidArgument as Create.
  static StatusOr<std::unique_ptr<Tokenizer>> CreateHf(Vocab vocab, std::unique_ptr<HfTokenizer> hf);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text` (any bytes; malformed UTF-8 is tolerated).
  // add_special: prepend BOS / append EOS as the vocab's add_bos / add_eos say (Hugging
  //   Face: the post-processor's tokens).
  // parse_special: match control-token spellings such as "<start_of_turn>" in the
  //   text; when false they are tokenized as plain text. User-defined tokens are
  //   matched either way.
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes token `id` stands for (may be a partial UTF-8 sequence): "▁" becomes a
  // space for SentencePiece, <0xXX> becomes that byte, byte-level BPE text is mapped
  // back to bytes (Hugging Face: the decoder's output for the token alone, as in the
  // middle of a text, bytes not validated). Control/unknown tokens give their text only
  // when `special`, else "". An id outside the vocab gives "".
  std::string TokenToPiece(int32_t id, bool special) const;

  // Text of `ids`, as llama_detokenize(remove_special = skip_special,
  // unparse_special = !skip_special): with skip_special, a leading BOS / trailing EOS
  // (when the vocab adds them) are dropped and control tokens render as "". Drops the
  // space SentencePiece prefixed to the text, and for vocabs that ask for it
  // (gpt-2, llama3) removes spaces before punctuation like " ," and " 's".
  // Hugging Face: tokenizers' decode(ids, skip_special_tokens=skip_special).
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const;

  const Vocab& vocab() const { return vocab_; }
  bool IsEog(int32_t id) const;
  // The id whose text is exactly `text` (raw vocab spelling, e.g. "▁the" or "Ġthe").
  std::optional<int32_t> FindToken(std::string_view text) const;

 private:
  explicit Tokenizer(Vocab vocab);

  // Appends the ids of one raw-text fragment.
  void EncodeFragment(std::string_view text, bool after_special, std::vector<int32_t>* out) const;

  Vocab vocab_;
  TokenMap token_to_id_;  // views into vocab_.tokens
  std::unique_ptr<SpecialTokenSplitter> splitter_;
  std::unique_ptr<SpmTokenizer> spm_;  // exactly one of spm_ / bpe_ / hf_ is set
  std::unique_ptr<BpeTokenizer> bpe_;
  std::unique_ptr<HfTokenizer> hf_;
  bool clean_spaces_ = false;
};

}  // namespace tandem
