// HfDecoder: a Hugging Face tokenizer.json `decoder`, flattened to its steps (a Sequence
// contributes its members), each as the `tokenizers` package defines it: every step maps
// the list of token strings to a new list, and the text is their concatenation.
//
//   ByteLevel     GPT-2's byte alphabet back to bytes (a token with a character outside
//                 it stays as written), all tokens into one, ill-formed UTF-8 -> U+FFFD;
//   Replace       the pattern replaced in each token;
//   ByteFallback  runs of <0xXX> tokens back to their bytes (U+FFFD per byte where the
//                 run is not UTF-8);
//   Fuse          all tokens into one;
//   Strip         up to `start` / `stop` copies of a character cut from each token's ends;
//   Metaspace     the replacement character back to a space (dropped in the first token
//                 unless prepend_scheme is "never");
//   BPEDecoder    the end-of-word suffix becomes a space (nothing in the last token).
//
// Without a decoder the tokens are joined with spaces, as tokenizers does.
//
// Thread safety: immutable after construction; Decode may run concurrently.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tokenizer/hf_pattern.h"

namespace tandem {

class HfDecoder {
 public:
  struct Step {
    enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kBpeSuffix };
    Kind kind = Kind::kFuse;
    HfPattern pattern;    // kReplace
    std::string content;  // kReplace: the replacement; kStrip: the character;
                          // kMetaspace: the replacement character; kBpeSuffix: the suffix
    size_t start = 0;     // kStrip
    size_t stop = 0;
    bool drop_first = true;  // kMetaspace: prepend_scheme is not "never"
  };

  HfDecoder() = default;  // no decoder
  explicit HfDecoder(std::vector<Step> steps) : has_decoder_(true), steps_(std::move(steps)) {}

  // The text of `tokens`, exactly as tokenizers decodes them (valid UTF-8).
  std::string Decode(std::vector<std::string> tokens) const;

  // The bytes one token stands for in the middle of a text, for streaming output: bytes
  // are not validated (a <0xE4> token gives the byte 0xE4, to be joined with the next
  // ones), the first-token rule of Metaspace and the Strip steps (which trim the ends of
  // the whole text once Fuse has joined it) do not apply.
  std::string DecodePiece(std::string token) const;

 private:
  std::vector<std::string> Run(std::vector<std::string> tokens, bool piece) const;

  bool has_decoder_ = false;
  std::vector<Step> steps_;
};

}  // namespace tandem
