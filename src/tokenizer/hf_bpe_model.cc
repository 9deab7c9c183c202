#include "tokenizer/hf_bpe_model.h"

#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"

namespace tandem {
namespace {

struct Symbol {
  int32_t id;
  int prev;  // index of the neighbours, -1 at the ends
  int next;
  bool removed;  // merged into its left neighbour
};

struct Merge {
  int pos;  // index of the left symbol
  int32_t rank;
  int32_t new_id;
};

// A min-heap on (rank, position), as tokenizers' Word::merge_all orders its queue.
struct MergeOrder {
  bool operator()(const Merge& a, const Merge& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

StatusOr<std::unique_ptr<HfBpeModel>> HfBpeModel::Create(
    std::unordered_map<std::string, int32_t> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, Options options) {
  std::unique_ptr<HfBpeModel> model(new HfBpeModel());
  for (auto& [text, id] : vocab) model->vocab_.emplace(text, id);
  model->options_ = std::move(options);
  const Options& o = model->options_;
  if (o.unk_token) {
    model->unk_id_ = model->TokenToId(*o.unk_token);
    if (model->unk_id_ < 0) {
      return InvalidArgumentError("unk_token \"" + *o.unk_token + "\" is not in the vocab");
    }
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    model->byte_ids_[b] = model->TokenToId(name);
  }
  const size_t prefix_len = o.continuing_subword_prefix ? o.continuing_subword_prefix->size() : 0;
  model->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const std::string where = "merges[" + std::to_string(rank) + "]: ";
    const int32_t left_id = model->TokenToId(left);
    const int32_t right_id = model->TokenToId(right);
    if (left_id < 0) return InvalidArgumentError(where + "\"" + left + "\" is not in the vocab");
    if (right_id < 0) return InvalidArgumentError(where + "\"" + right + "\" is not in the vocab");
    // tokenizers drops the prefix length from the right part whether or not it starts
    // with the prefix.
    if (right.size() < prefix_len) {
      return InvalidArgumentError(where + "\"" + right +
                                  "\" is shorter than the continuing_subword_prefix");
    }
    const std::string merged = left + right.substr(prefix_len);
    const int32_t new_id = model->TokenToId(merged);
    if (new_id < 0) return InvalidArgumentError(where + "\"" + merged + "\" is not in the vocab");
    model->merges_.insert_or_assign(PairKey(left_id, right_id),
                                    MergeResult{static_cast<int32_t>(rank), new_id});
  }
  return model;
}

int32_t HfBpeModel::TokenToId(std::string_view token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const HfBpeModel::MergeResult* HfBpeModel::FindMerge(int32_t left, int32_t right) const {
  const auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void HfBpeModel::Encode(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const int32_t id = TokenToId(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }

  // The initial symbols: one per character, byte tokens or the unknown token where
  // the character is not a token.
  std::vector<Symbol> symbols;
  auto add = [&](int32_t id) {
    const int index = static_cast<int>(symbols.size());
    if (index > 0) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, false});
  };
  bool pending_unk = false;  // an unknown token not yet added (it may still fuse)
  std::string symbol;
  for (size_t pos = 0; pos < word.size();) {
    const size_t begin = pos;
    pos +=
        std::min(unicode::Utf8SequenceLength(static_cast<uint8_t>(word[pos])), word.size() - pos);
    symbol.clear();
    if (begin > 0 && options_.continuing_subword_prefix)
      symbol += *options_.continuing_subword_prefix;
    symbol.append(word.substr(begin, pos - begin));
    if (pos == word.size() && options_.end_of_word_suffix) symbol += *options_.end_of_word_suffix;

    if (const int32_t id = TokenToId(symbol); id >= 0) {
      if (pending_unk) add(unk_id_);
      pending_unk = false;
      add(id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;  // the byte tokens of the symbol, prefix and suffix included
      for (char c : symbol) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        // tokenizers leaves a pending unknown token pending across byte tokens.
        for (char c : symbol) add(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk && !options_.fuse_unk) add(unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) add(unk_id_);

  std::priority_queue<Merge, std::vector<Merge>, MergeOrder> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const MergeResult* m = FindMerge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({static_cast<int>(i), m->rank, m->new_id});
    }
  }
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    const int right_pos = left.next;
    const Symbol right = symbols[right_pos];
    // A queued pair is stale when either side has changed since.
    const MergeResult* current = FindMerge(left.id, right.id);
    if (current == nullptr || current->new_id != top.new_id) continue;
    left.id = top.new_id;
    left.next = right.next;
    symbols[right_pos].removed = true;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const MergeResult* m = FindMerge(symbols[left.prev].id, left.id)) {
        queue.push({left.prev, m->rank, m->new_id});
      }
    }
    if (left.next >= 0) {
      if (const MergeResult* m = FindMerge(left.id, symbols[left.next].id)) {
        queue.push({top.pos, m->rank, m->new_id});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (!s.removed) out->push_back(s.id);
  }
}

}  // namespace tandem
