// HfPattern: the `pattern` of a Hugging Face Split pre-tokenizer or Replace
// normalizer/decoder, {"String": literal} or {"Regex": oniguruma}, and how it cuts a
// text into matched and unmatched spans (tokenizers' Pattern::find_matches).
//
// Ownership: owns its regex; move-only.
// Thread safety: immutable after construction; FindMatches may run concurrently.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/hf_regex.h"

namespace tandem {

class HfPattern {
 public:
  struct Span {
    size_t begin;  // byte range [begin, end) of the text
    size_t end;
    bool is_match;
  };

  HfPattern() = default;  // the empty literal: matches nothing
  static HfPattern Literal(std::string text);
  // InvalidArgument for a regex Oniguruma rejects.
  static StatusOr<HfPattern> Regex(std::string_view pattern);

  // Spans covering `text` (valid UTF-8) in order and without gaps: matches (possibly
  // empty) and the text between them. Empty text gives one empty unmatched span; an
  // empty literal matches nothing.
  std::vector<Span> FindMatches(std::string_view text) const;

  // `text` with every match replaced by `content` (the Replace normalizer and decoder).
  std::string ReplaceAll(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::unique_ptr<HfRegex> regex_;  // set for a Regex pattern
};

}  // namespace tandem
