// PreTokenizer: splits text into words before byte-level BPE, as the regex of a
// GGUF `tokenizer.ggml.pre` type would (GPT-2, llama3, qwen2 and llama.cpp's
// "default"), then spells each word in GPT-2's byte-to-unicode alphabet.
//
// The regexes are implemented by hand over code point category flags (no
// std::regex): each Split* routine mirrors llama.cpp's unicode_regex_split_custom_*
// or, for the "default" type, what its std::regex fallback computes, so the word
// boundaries (including llama.cpp's deviations from the textbook regex) match it.
//
// Thread safety: immutable value; Split may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem {

class PreTokenizer {
 public:
  enum class Kind {
    kDefault,  // llama.cpp's fallback: 4 regexes (punctuation runs, GPT-2, digit runs, 3 digits)
    kGpt2,     // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
    kLlama3,   // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
    kQwen2,    // as kLlama3 but \p{N} (one digit per word)
  };

  // Options llama.cpp ties to the pre-tokenizer name.
  struct Options {
    Kind kind = Kind::kDefault;
    bool ignore_merges = false;  // a word that is already a token skips the merges
    bool clean_spaces = true;    // Decode removes spaces before punctuation
  };

  // Supported names of `tokenizer.ggml.pre` ("" means "default"); Unimplemented for
  // any other, with the list of supported names in the message.
  static StatusOr<Options> OptionsForName(std::string_view pre);
  static const std::vector<std::string_view>& SupportedNames();

  explicit PreTokenizer(Kind kind) : kind_(kind) {}

  // Words of `text` in order; their concatenation (decoded) is `text`, except that
  // malformed UTF-8 bytes come back as U+FFFD. Each word is byte-encoded: every byte
  // of its UTF-8 is replaced by unicode::ByteToUtf8(byte).
  std::vector<std::string> Split(std::string_view text) const;

 private:
  Kind kind_;
};

}  // namespace tandem
