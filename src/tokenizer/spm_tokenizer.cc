#include "tokenizer/spm_tokenizer.h"

#include <cstdio>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>

#include "tokenizer/unicode.h"

namespace tandem {
namespace {

// A run of bytes of the input, linked to its neighbours; n == 0 once merged away.
struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the encoded text
  size_t n;       // length in bytes
};

// A candidate merge of symbols `left` and `right` (adjacent when it was queued).
struct Bigram {
  int left;
  int right;
  float score;
  size_t size_bytes;  // left.n + right.n when queued; a mismatch marks it stale
};

// Highest score first, then the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// State of one Encode call.
class SpmSession {
 public:
  SpmSession(const Vocab& vocab, const TokenMap& token_to_id, std::string_view text)
      : vocab_(vocab), token_to_id_(token_to_id), text_(text) {}

  // Runs the merges; afterwards the live symbols, in order, cover the text.
  void Merge() {
    size_t offset = 0;
    while (offset < text_.size()) {
      const size_t len = std::min(unicode::Utf8SequenceLength(static_cast<uint8_t>(text_[offset])),
                                  text_.size() - offset);
      const int index = static_cast<int>(symbols_.size());
      offset += len;
      symbols_.push_back({index - 1, offset == text_.size() ? -1 : index + 1, offset - len, len});
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) TryAddBigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram bigram = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[bigram.left];
      Symbol& right = symbols_[bigram.right];
      if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size_bytes) continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      TryAddBigram(left.prev, bigram.left);
      TryAddBigram(bigram.left, left.next);
    }
  }

  template <typename ByteTokenFn>
  void Emit(ByteTokenFn byte_token, std::vector<int32_t>* out) const {
    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[i].next) Resegment(symbols_[i], byte_token, out);
  }

 private:
  std::string_view SymbolText(const Symbol& s) const { return text_.substr(s.offset, s.n); }

  void TryAddBigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view merged =
        text_.substr(symbols_[left].offset, symbols_[left].n + symbols_[right].n);
    const int32_t id = LookupToken(token_to_id_, merged);
    if (id < 0 || id >= vocab_.size()) return;
    const float score = vocab_.scores.empty() ? 0.0f : vocab_.scores[id];
    queue_.push({left, right, score, merged.size()});
    // Remember how the text was built, for Resegment (the latest pair wins).
    rev_merge_[merged] = {left, right};
  }

  // Emits a symbol as its token, or splits it back along the recorded merges, or
  // falls back to one token per byte.
  template <typename ByteTokenFn>
  void Resegment(const Symbol& symbol, ByteTokenFn byte_token, std::vector<int32_t>* out) const {
    const std::string_view text = SymbolText(symbol);
    const int32_t id = LookupToken(token_to_id_, text);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
    const auto it = rev_merge_.find(text);
    if (it == rev_merge_.end()) {
      for (char c : text) {
        const int32_t byte_id = byte_token(static_cast<uint8_t>(c));
        if (byte_id >= 0) out->push_back(byte_id);
      }
      return;
    }
    Resegment(symbols_[it->second.first], byte_token, out);
    Resegment(symbols_[it->second.second], byte_token, out);
  }

  const Vocab& vocab_;
  const TokenMap& token_to_id_;
  const std::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
  std::unordered_map<std::string_view, std::pair<int, int>> rev_merge_;
};

}  // namespace

SpmTokenizer::SpmTokenizer(const Vocab& vocab, const TokenMap& token_to_id)
    : vocab_(vocab), token_to_id_(token_to_id) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    int32_t id = LookupToken(token_to_id_, hex);
    // Like llama.cpp, fall back to a token spelled as the raw byte.
    if (id < 0) id = LookupToken(token_to_id_, std::string(1, static_cast<char>(b)));
    byte_tokens_[b] = id;
  }
}

int32_t SpmTokenizer::ByteToken(uint8_t byte) const {
  // llama.cpp aborts on a vocab without the byte; we degrade to the unknown token.
  return byte_tokens_[byte] >= 0 ? byte_tokens_[byte] : vocab_.unk_id;
}

void SpmTokenizer::Encode(std::string_view text, std::vector<int32_t>* out) const {
  SpmSession session(vocab_, token_to_id_, text);
  session.Merge();
  session.Emit([this](uint8_t b) { return ByteToken(b); }, out);
}

}  // namespace tandem
