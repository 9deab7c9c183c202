#include "proxy/json_span.h"

#include <charconv>

namespace tandem::proxy {
namespace {

constexpr size_t kNpos = std::string_view::npos;
// Nesting bound: a hostile document cannot exhaust the stack.
constexpr int kMaxDepth = 256;

size_t SkipWhitespace(std::string_view s, size_t pos) {
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r'))
    ++pos;
  return pos;
}

// `pos` at the opening quote; returns the offset just past the closing quote.
size_t SkipString(std::string_view s, size_t pos) {
  if (pos >= s.size() || s[pos] != '"') return kNpos;
  for (++pos; pos < s.size(); ++pos) {
    if (s[pos] == '\\') {
      ++pos;  // the escaped character (\uXXXX's hex digits are plain characters)
    } else if (s[pos] == '"') {
      return pos + 1;
    }
  }
  return kNpos;
}

bool IsScalarChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
         c == '+' || c == '.';
}

size_t SkipValue(std::string_view s, size_t pos, int depth);

// `pos` at '{' or '['; returns the offset just past the matching closer.
size_t SkipContainer(std::string_view s, size_t pos, int depth) {
  if (depth > kMaxDepth) return kNpos;
  const bool object = s[pos] == '{';
  const char closer = object ? '}' : ']';
  pos = SkipWhitespace(s, pos + 1);
  if (pos < s.size() && s[pos] == closer) return pos + 1;
  for (;;) {
    if (object) {
      pos = SkipString(s, pos);
      if (pos == kNpos) return kNpos;
      pos = SkipWhitespace(s, pos);
      if (pos >= s.size() || s[pos] != ':') return kNpos;
      pos = SkipWhitespace(s, pos + 1);
    }
    pos = SkipValue(s, pos, depth + 1);
    if (pos == kNpos) return kNpos;
    pos = SkipWhitespace(s, pos);
    if (pos >= s.size()) return kNpos;
    if (s[pos] == closer) return pos + 1;
    if (s[pos] != ',') return kNpos;
    pos = SkipWhitespace(s, pos + 1);
  }
}

// `pos` at the first character of a value; returns the offset just past it.
size_t SkipValue(std::string_view s, size_t pos, int depth) {
  if (pos >= s.size()) return kNpos;
  if (s[pos] == '"') return SkipString(s, pos);
  if (s[pos] == '{' || s[pos] == '[') return SkipContainer(s, pos, depth);
  size_t end = pos;
  while (end < s.size() && IsScalarChar(s[end])) ++end;
  return end == pos ? kNpos : end;
}

// `pos` at '{'. Returns the span of the value of member `key`, or nullopt.
std::optional<JsonSpan> FindMember(std::string_view s, size_t pos, std::string_view key) {
  if (pos >= s.size() || s[pos] != '{') return std::nullopt;
  pos = SkipWhitespace(s, pos + 1);
  if (pos < s.size() && s[pos] == '}') return std::nullopt;
  for (;;) {
    size_t key_end = SkipString(s, pos);
    if (key_end == kNpos) return std::nullopt;
    std::string_view name = s.substr(pos + 1, key_end - pos - 2);
    pos = SkipWhitespace(s, key_end);
    if (pos >= s.size() || s[pos] != ':') return std::nullopt;
    pos = SkipWhitespace(s, pos + 1);
    size_t value_end = SkipValue(s, pos, 1);
    if (value_end == kNpos) return std::nullopt;
    if (name == key) return JsonSpan{pos, value_end};
    pos = SkipWhitespace(s, value_end);
    if (pos >= s.size() || s[pos] != ',') return std::nullopt;
    pos = SkipWhitespace(s, pos + 1);
  }
}

}  // namespace

std::optional<JsonSpan> FindJsonValue(std::string_view json,
                                      std::initializer_list<std::string_view> path) {
  if (path.size() == 0) return std::nullopt;
  size_t pos = SkipWhitespace(json, 0);
  std::optional<JsonSpan> span;
  for (std::string_view key : path) {
    span = FindMember(json, pos, key);
    if (!span) return std::nullopt;
    pos = span->begin;
  }
  return span;
}

std::optional<std::string_view> JsonValueText(std::string_view json,
                                              std::initializer_list<std::string_view> path) {
  std::optional<JsonSpan> span = FindJsonValue(json, path);
  if (!span) return std::nullopt;
  return json.substr(span->begin, span->end - span->begin);
}

std::optional<int64_t> JsonIntAt(std::string_view json,
                                 std::initializer_list<std::string_view> path) {
  std::optional<std::string_view> text = JsonValueText(json, path);
  if (!text) return std::nullopt;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size()) return std::nullopt;
  return value;
}

bool ReplaceCachedTokens(std::string* json, int64_t cached_tokens) {
  std::optional<JsonSpan> span =
      FindJsonValue(*json, {"usage", "prompt_tokens_details", "cached_tokens"});
  if (!span) return false;
  const char first = (*json)[span->begin];
  if (first != '-' && (first < '0' || first > '9')) return false;  // null or not a number
  json->replace(span->begin, span->end - span->begin, std::to_string(cached_tokens));
  return true;
}

}  // namespace tandem::proxy
