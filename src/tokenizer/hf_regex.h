// HfRegex: one compiled Oniguruma regular expression, the engine Hugging Face tokenizers
// uses for the patterns of its Split pre-tokenizer and Replace normalizer/decoder. It is
// the only place that talks to Oniguruma.
//
// Patterns are compiled as the `onig` crate compiles them (UTF-8, Oniguruma's default
// syntax, no options), and FindAll iterates matches as that crate's find_iter does: each
// search starts where the previous match ended, and an empty match right at the end of
// the previous match is skipped by moving on one character.
//
// Backtracking is bounded (kRetryLimit per search, Oniguruma's retry counters): a pattern
// that exceeds it on some text ends the iteration there, as a failing search ends the
// crate's iterator.
//
// Ownership: owns the compiled regex.
// Thread safety: Compile may run concurrently (compilation is serialized inside);
// FindAll is const and may run concurrently on one HfRegex (each call has its own
// region and match parameters; Oniguruma does not modify a compiled regex while
// searching).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tandem {

class HfRegex {
 public:
  // The most backtracking steps one search may take.
  static constexpr unsigned long kRetryLimit = 10'000'000;

  // InvalidArgument with Oniguruma's message for a pattern it rejects. `pattern` must be
  // valid UTF-8.
  static StatusOr<std::unique_ptr<HfRegex>> Compile(std::string_view pattern);

  ~HfRegex();
  HfRegex(const HfRegex&) = delete;
  HfRegex& operator=(const HfRegex&) = delete;

  // Byte ranges [begin, end) of the successive matches in `text` (valid UTF-8), in order;
  // a range may be empty.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

 private:
  explicit HfRegex(void* regex) : regex_(regex) {}

  void* regex_;  // OnigRegex (kept opaque so that callers need not see oniguruma.h)
};

}  // namespace tandem
