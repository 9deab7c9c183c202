// JSON value spans: find the raw text of one value inside a JSON document, and replace
// it, without re-serializing anything else.
//
// The proxy forwards backend responses byte for byte except for a few fields; parsing
// and re-dumping a response would reorder keys, change number spellings and escapes.
// These helpers scan the document just far enough to locate one value.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::proxy {

// Byte offsets [begin, end) of a value inside a document.
struct JsonSpan {
  size_t begin = 0;
  size_t end = 0;
};

// The span of the value reached from the top-level object by the object keys in `path`
// (e.g. {"usage", "prompt_tokens_details", "cached_tokens"}), or nullopt when a key is
// missing, a value on the way is not an object, or the document is malformed before the
// value ends. Keys are compared with the raw key text (a key written with escapes never
// matches); with duplicate keys the first wins. Leading/trailing whitespace is allowed.
std::optional<JsonSpan> FindJsonValue(std::string_view json,
                                      std::initializer_list<std::string_view> path);

// The raw text of the value at `path`, or nullopt (see FindJsonValue). Borrows `json`.
std::optional<std::string_view> JsonValueText(std::string_view json,
                                              std::initializer_list<std::string_view> path);

// The integer at `path`, or nullopt when absent or not an integer.
std::optional<int64_t> JsonIntAt(std::string_view json,
                                 std::initializer_list<std::string_view> path);

// Replaces the value of usage.prompt_tokens_details.cached_tokens with `cached_tokens`
// when that value exists and is a number; every other byte stays. Returns whether it
// replaced.
bool ReplaceCachedTokens(std::string* json, int64_t cached_tokens);

}  // namespace tandem::proxy
