#include "tokenizer/hf_added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_normalization.h"

namespace tandem {
namespace {

bool IsSpace(uint32_t cpt) { return unicode::IsWhitespace(unicode::CodepointFlags(cpt)); }

// Start of the code point ending at `end` (> 0) in valid UTF-8.
size_t PreviousStart(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

uint32_t CodepointAt(std::string_view text, size_t pos) { return unicode::DecodeUtf8(text, &pos); }

}  // namespace

void HfAddedTokens::Trie::Add(std::string_view text, int32_t token_index) {
  if (terminal.empty()) terminal.push_back(-1);
  int32_t node = 0;
  for (char c : text) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
    auto [it, inserted] = edges.try_emplace(key, static_cast<int32_t>(terminal.size()));
    if (inserted) terminal.push_back(-1);
    node = it->second;
  }
  terminal[node] = token_index;
  first_byte[static_cast<uint8_t>(text[0])] = true;
}

int32_t HfAddedTokens::Trie::LongestAt(std::string_view text, size_t pos, size_t* length) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto it = edges.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]));
    if (it == edges.end()) break;
    node = it->second;
    if (terminal[node] >= 0) {
      best = terminal[node];
      *length = i + 1 - pos;
    }
  }
  return best;
}

HfAddedTokens::HfAddedTokens(std::vector<HfAddedToken> tokens,
                             const std::vector<std::string>& normalized_contents)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const HfAddedToken& t = tokens_[i];
    const std::string& text = t.normalized ? normalized_contents[i] : t.content;
    if (t.content.empty() || text.empty()) continue;
    (t.normalized ? normalized_ : raw_).Add(text, static_cast<int32_t>(i));
  }
}

std::vector<HfAddedTokens::Piece> HfAddedTokens::Split(std::string_view text, bool normalized,
                                                       bool parse_special) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  std::vector<Piece> pieces;
  size_t start_offset = 0;  // end of the last piece emitted
  size_t pos = 0;           // where the search for the next match resumes
  while (!trie.edges.empty() && pos < text.size()) {
    // The leftmost position where some token starts, and the longest token there.
    size_t start = pos;
    size_t length = 0;
    int32_t index = -1;
    for (; start < text.size(); ++start) {
      if (!trie.first_byte[static_cast<uint8_t>(text[start])]) continue;
      index = trie.LongestAt(text, start, &length);
      if (index >= 0) break;
    }
    if (index < 0) break;
    size_t stop = start + length;
    pos = stop;
    const HfAddedToken& token = tokens_[index];
    if (!parse_special && token.special) continue;
    if (token.single_word) {
      const bool word_before =
          start > 0 && unicode::IsWordChar(CodepointAt(text, PreviousStart(text, start)));
      const bool word_after = stop < text.size() && unicode::IsWordChar(CodepointAt(text, stop));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        const size_t prev = PreviousStart(text, new_start);
        if (!IsSpace(CodepointAt(text, prev))) break;
        new_start = prev;
      }
      // Spaces an earlier match already took stay with it.
      start = std::max(new_start, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!IsSpace(unicode::DecodeUtf8(text, &next))) break;
        stop = next;
      }
    }
    if (start_offset < start) pieces.push_back({start_offset, start, -1});
    pieces.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset < text.size() || pieces.empty()) {
    pieces.push_back({start_offset, text.size(), -1});
  }
  return pieces;
}

}  // namespace tandem
