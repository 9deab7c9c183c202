// HfAddedTokens: the `added_tokens` of a Hugging Face tokenizer.json, and how they are cut
// out of the input before the model sees it (tokenizers' AddedVocabulary).
//
// Tokens with `normalized: false` are matched on the raw input; the text between them is
// normalized and then the `normalized: true` tokens (their content normalized the same
// way) are matched on it. Each matching is leftmost-longest over all the tokens of its
// kind; a match is then dropped when `single_word` is set and a word character (\w) is
// next to it, or when it is a special token and parse_special is off (the text stays
// part of the surrounding text either way). `lstrip` / `rstrip` make the token take the
// White_Space before / after it.
//
// Ownership: owns copies of the token texts.
// Thread safety: immutable after construction; Split may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem {

struct HfAddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

class HfAddedTokens {
 public:
  // A run of the text: an added token (token >= 0) or text to tokenize (token == -1).
  struct Piece {
    size_t begin;  // byte range [begin, end) of the text given to Split
    size_t end;
    int32_t token;
  };

  HfAddedTokens() = default;
  // `normalized_contents[i]` is tokens[i].content after the normalizer (used for the
  // tokens with normalized set). Tokens with empty content are ignored; for a content
  // listed twice the last entry counts.
  HfAddedTokens(std::vector<HfAddedToken> tokens,
                const std::vector<std::string>& normalized_contents);

  // Pieces of `text` covering it in order: matches of the raw (normalized == false)
  // tokens when `normalized` is false, else of the normalized ones.
  std::vector<Piece> Split(std::string_view text, bool normalized, bool parse_special) const;

  const std::vector<HfAddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie over the contents of one kind (raw or normalized).
  struct Trie {
    std::unordered_map<uint64_t, int32_t> edges;  // (node << 8 | byte) -> node
    std::vector<int32_t> terminal;                // node -> index into tokens_, or -1
    bool first_byte[256] = {};
    void Add(std::string_view text, int32_t token_index);
    // The longest text starting at text[pos]: its length, and the token index (or -1).
    int32_t LongestAt(std::string_view text, size_t pos, size_t* length) const;
  };

  std::vector<HfAddedToken> tokens_;
  Trie raw_;
  Trie normalized_;
};

}  // namespace tandem
