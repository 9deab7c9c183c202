// HfPreTokenizer: a Hugging Face tokenizer.json `pre_tokenizer`, flattened to its steps
// (a Sequence contributes its members), each as the `tokenizers` package defines it:
//
//   Split      cut each word at the pattern's matches (optionally inverted: the
//              unmatched spans are the delimiters), the delimiters Removed, Isolated,
//              MergedWithPrevious, MergedWithNext or Contiguous;
//   ByteLevel  optionally a space before every word that lacks one, optionally GPT-2's
//              regex split, then every byte spelled in GPT-2's byte-to-unicode alphabet;
//   Metaspace  spaces become the replacement character, which is prepended (always, to
//              the first word of the input only, or never) and optionally split on
//              (MergedWithNext);
//   Digits     runs of digits (\p{N}) split off, or each digit alone.
//
// A step applies to every word the previous steps produced; empty words are dropped.
//
// Thread safety: immutable after construction; PreTokenize may run concurrently.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/hf_pattern.h"

namespace tandem {

// One piece of the input on its way to the model.
struct HfWord {
  std::string text;
  bool at_start = false;  // begins at the start of the original input (Metaspace "first")
};

class HfPreTokenizer {
 public:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class PrependScheme { kAlways, kFirst, kNever };

  struct Step {
    enum class Kind { kSplit, kByteLevel, kMetaspace, kDigits };
    Kind kind = Kind::kSplit;
    HfPattern pattern;  // kSplit; kByteLevel with use_regex: GPT-2's regex
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // kByteLevel
    bool use_regex = false;         // kByteLevel
    std::string replacement;        // kMetaspace: one character, e.g. "▁"
    PrependScheme prepend_scheme = PrependScheme::kAlways;
    bool split = true;               // kMetaspace
    bool individual_digits = false;  // kDigits
  };

  // GPT-2's pre-tokenizer regex, which ByteLevel with use_regex splits on.
  static const char* Gpt2Regex();

  HfPreTokenizer() = default;  // no pre-tokenizer: each piece is one word
  explicit HfPreTokenizer(std::vector<Step> steps) : steps_(std::move(steps)) {}

  // Applies every step to `words` in place.
  void PreTokenize(std::vector<HfWord>* words) const;

 private:
  std::vector<Step> steps_;
};

}  // namespace tandem
