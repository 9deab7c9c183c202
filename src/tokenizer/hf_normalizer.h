// HfNormalizer: a Hugging Face tokenizer.json `normalizer`, flattened to its steps in
// order (a Sequence contributes its members): NFC, NFD, Lowercase, Strip, Replace and
// Prepend, each as the `tokenizers` package defines it.
//
// Thread safety: immutable after construction; Normalize may run concurrently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf_pattern.h"

namespace tandem {

class HfNormalizer {
 public:
  struct Step {
    enum class Kind { kNfc, kNfd, kLowercase, kStrip, kReplace, kPrepend };
    Kind kind = Kind::kNfc;
    bool strip_left = false;  // kStrip: remove leading / trailing White_Space
    bool strip_right = false;
    HfPattern pattern;    // kReplace: what to replace ...
    std::string content;  // ... by this; kPrepend: the text put in front
  };

  HfNormalizer() = default;  // no normalizer: text passes unchanged
  explicit HfNormalizer(std::vector<Step> steps) : steps_(std::move(steps)) {}

  // `text` (valid UTF-8) normalized. `*keeps_start` (if not null) is cleared when the
  // normalized text no longer begins at the original text's first character (a Strip or
  // an empty Replace removed it), which Metaspace's prepend_scheme "first" looks at.
  std::string Normalize(std::string_view text, bool* keeps_start = nullptr) const;

  bool empty() const { return steps_.empty(); }

 private:
  std::vector<Step> steps_;
};

}  // namespace tandem
