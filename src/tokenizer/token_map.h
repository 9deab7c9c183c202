// TokenMap: token text -> id, looked up by string_view without allocating.
//
// Ownership: the keys are views into the Vocab's token strings (or merge strings);
// the Vocab must outlive the map and must not be modified while the map is in use.
// Thread safety: immutable after construction; concurrent lookups are safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <unordered_map>

#include "tokenizer/vocab.h"

namespace tandem {

using TokenMap = std::unordered_map<std::string_view, int32_t>;

// Maps every token text to its id. As in llama.cpp, a text listed twice maps to its
// last id.
inline TokenMap BuildTokenMap(const Vocab& vocab) {
  TokenMap map;
  map.reserve(vocab.tokens.size());
  for (int32_t id = 0; id < vocab.size(); ++id) map.insert_or_assign(vocab.tokens[id], id);
  return map;
}

inline int32_t LookupToken(const TokenMap& map, std::string_view text) {
  const auto it = map.find(text);
  return it == map.end() ? -1 : it->second;
}

}  // namespace tandem
