// Vocab: the data a Tokenizer is built from, whatever file it came from: a GGUF file's
// `tokenizer.ggml.*` metadata (model/vocab.h, LoadVocab) or a Hugging Face tokenizer.json
// (tokenizer/hf_tokenizer_json.h, LoadHfTokenizer).
//
// Thread safety: a plain value; immutable once built.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// Values of `tokenizer.ggml.token_type` (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocab {
  // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE); "hf" for a
  // Hugging Face tokenizer.json (its pipeline lives in the Tokenizer's HfTokenizer, and
  // `pre`, `scores` and `merges` stay empty).
  std::string model;
  std::string pre;    // tokenizer.ggml.pre: "default", "qwen2", "llama-bpe", ...
  std::vector<std::string> tokens;   // [n_vocab]
  std::vector<float> scores;         // [n_vocab] (empty if absent)
  // [n_vocab]; after llama.cpp's name-based fixups (e.g. "<end_of_turn>" -> kControl).
  std::vector<TokenType> types;
  std::vector<std::string> merges;   // BPE merges "a b" in rank order (empty for SPM)
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
  std::vector<int32_t> eog_ids;  // end-of-generation ids (eos, eot, <end_of_turn>, ...)

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
};

}  // namespace tandem
