// Internal text and JSON helpers for the parsers in this folder. Not part of the public
// API: only this folder's .cc files include it (it names nlohmann's forward declarations).
//
// Thread safety: stateless functions.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::parsers {

// Objects keep the order the model wrote their keys in.
using Json = nlohmann::ordered_json;

// Serializes like Python's json.dumps(value, ensure_ascii=False): separators ", " and
// ": ", UTF-8 kept as is (invalid bytes become U+FFFD), keys in stored order.
std::string SerializeJson(const Json& value);

// Parses `text` as one JSON value without throwing; nullopt when it is not valid JSON.
std::optional<Json> ParseJson(std::string_view text);

// `text` without leading and trailing ASCII whitespace.
std::string_view StripWhitespace(std::string_view text);

// Length of the longest suffix of `text` that is a proper prefix of `tag`: the bytes a
// streaming parser must hold back because the next chunk may complete the tag.
size_t HeldTagPrefix(std::string_view text, std::string_view tag);

// Where `text` (from `pos`) first holds a complete `tag`, or the start of a trailing
// partial `tag` (the caller must wait), or npos when neither.
struct TagSearch {
  size_t pos = std::string_view::npos;  // offset of the tag or of its partial prefix
  bool complete = false;                // true: the whole tag is at pos
};
TagSearch FindTag(std::string_view text, std::string_view tag);

// Length of a trailing, possibly incomplete UTF-8 sequence in `text` (0 when `text`
// ends on a character boundary). Streaming callers hold those bytes back so that no
// JSON string is cut inside a character.
size_t IncompleteUtf8Suffix(std::string_view text);

}  // namespace tandem::parsers
