// HfBpeModel: the `model` of a Hugging Face tokenizer.json of type BPE, as the
// `tokenizers` package applies it to one pre-tokenized word.
//
// The word starts as one symbol per character (the continuing-subword prefix added to
// every character but the first, the end-of-word suffix to the last). A character that
// is not in the vocab becomes its <0xXX> byte tokens when byte_fallback is on and all of
// them exist, else the unknown token (consecutive ones fused into one with fuse_unk),
// else it is dropped. Then the adjacent pair with the lowest merge rank is merged,
// repeatedly (ties: the leftmost pair). With ignore_merges, a word that is itself in the
// vocab is that token. Dropout is not supported (the loader refuses it).
//
// Ownership: owns its vocab and merge tables.
// Thread safety: immutable after Create; Encode may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tandem {

class HfBpeModel {
 public:
  struct Options {
    std::optional<std::string> unk_token;
    std::optional<std::string> continuing_subword_prefix;
    std::optional<std::string> end_of_word_suffix;
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
  };

  // `vocab`: token text -> id; `merges`: (left, right) in rank order. InvalidArgument
  // naming the merge (by index) whose parts or result are not in the vocab, or an
  // unknown token that is not in it. As in tokenizers, a pair listed twice keeps its
  // last rank.
  static StatusOr<std::unique_ptr<HfBpeModel>> Create(
      std::unordered_map<std::string, int32_t> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, Options options);

  // Appends the ids of `word` (valid UTF-8, as the pre-tokenizer left it).
  void Encode(std::string_view word, std::vector<int32_t>* out) const;

  // The id of `token` in the model's vocab, or -1.
  int32_t TokenToId(std::string_view token) const;

 private:
  struct MergeResult {
    int32_t rank;
    int32_t new_id;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  using VocabMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  HfBpeModel() = default;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const MergeResult* FindMerge(int32_t left, int32_t right) const;

  VocabMap vocab_;
  std::unordered_map<uint64_t, MergeResult> merges_;  // PairKey(left, right) -> result
  Options options_;
  int32_t unk_id_ = -1;
  int32_t byte_ids_[256];  // <0xXX> ids (-1 where absent), for byte_fallback
};

}  // namespace tandem
