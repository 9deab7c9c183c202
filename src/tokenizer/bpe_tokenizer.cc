#include "tokenizer/bpe_tokenizer.h"

#include <queue>
#include <string>

#include "tokenizer/unicode.h"

namespace tandem {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the word
  size_t n;       // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  std::string text;  // left + right when queued; a mismatch later marks it stale
};

// Lowest rank first, then the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

BpeTokenizer::BpeTokenizer(const Vocab& vocab, const TokenMap& token_to_id,
                           PreTokenizer::Options options)
    : vocab_(vocab), token_to_id_(token_to_id), options_(options), pre_tokenizer_(options.kind) {
  merge_ranks_.reserve(vocab_.merges.size());
  for (size_t i = 0; i < vocab_.merges.size(); ++i) {
    // llama.cpp splits a merge at its first space after position 0. Tokens never
    // contain a space, so keying on the whole "left right" string is equivalent.
    merge_ranks_.try_emplace(vocab_.merges[i], static_cast<int32_t>(i));
  }
}

int32_t BpeTokenizer::MergeRank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).append(1, ' ').append(right);
  const auto it = merge_ranks_.find(key);
  return it == merge_ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::Encode(std::string_view text, std::vector<int32_t>* out) const {
  for (const std::string& word : pre_tokenizer_.Split(text)) EncodeWord(word, out);
}

void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (options_.ignore_merges) {
    const int32_t id = LookupToken(token_to_id_, word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }

  std::vector<Symbol> symbols;
  for (size_t offset = 0; offset < word.size();) {
    const size_t len = std::min(unicode::Utf8SequenceLength(static_cast<uint8_t>(word[offset])),
                                word.size() - offset);
    const int index = static_cast<int>(symbols.size());
    offset += len;
    symbols.push_back({index - 1, offset == word.size() ? -1 : index + 1, offset - len, len});
  }
  auto text_of = [&](const Symbol& s) { return word.substr(s.offset, s.n); };

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto add_bigram = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view l = text_of(symbols[left]);
    const std::string_view r = text_of(symbols[right]);
    const int32_t rank = MergeRank(l, r);
    if (rank < 0) return;
    std::string text;
    text.reserve(l.size() + r.size());
    text.append(l).append(r);
    queue.push({left, right, rank, std::move(text)});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add_bigram(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.n == 0 || right.n == 0) continue;
    // Symbols are contiguous, so this compares left + right with the queued text.
    if (left.offset + left.n != right.offset ||
        word.substr(left.offset, left.n + right.n) != bigram.text) {
      continue;
    }
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    add_bigram(left.prev, bigram.left);
    add_bigram(bigram.left, left.next);
  }

  for (const Symbol& symbol : symbols) {
    if (symbol.n == 0) continue;
    const std::string_view text = text_of(symbol);
    const int32_t id = LookupToken(token_to_id_, text);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char c : text) {
      const int32_t byte_id = LookupToken(token_to_id_, std::string_view(&c, 1));
      if (byte_id >= 0) out->push_back(byte_id);
    }
  }
}

}  // namespace tandem
