#include "server/parsers/parser_text.h"

#include <nlohmann/json.hpp>

namespace tandem::parsers {

namespace {

std::string DumpScalar(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void AppendJson(const Json& value, std::string& out) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      out += DumpScalar(Json(it.key()));
      out += ": ";
      AppendJson(it.value(), out);
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    bool first = true;
    for (const Json& element : value) {
      if (!first) out += ", ";
      first = false;
      AppendJson(element, out);
    }
    out += ']';
  } else {
    out += DumpScalar(value);
  }
}

}  // namespace

std::string SerializeJson(const Json& value) {
  std::string out;
  AppendJson(value, out);
  return out;
}

std::optional<Json> ParseJson(std::string_view text) {
  // allow_exceptions=false: a parse error yields a "discarded" value instead of a throw.
  Json value = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

std::string_view StripWhitespace(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

size_t HeldTagPrefix(std::string_view text, std::string_view tag) {
  size_t max_len = std::min(text.size(), tag.size() - 1);
  for (size_t len = max_len; len > 0; --len) {
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

TagSearch FindTag(std::string_view text, std::string_view tag) {
  size_t pos = text.find(tag);
  if (pos != std::string_view::npos) return {pos, true};
  size_t held = HeldTagPrefix(text, tag);
  if (held > 0) return {text.size() - held, false};
  return {};
}

size_t IncompleteUtf8Suffix(std::string_view text) {
  // Walk back over at most 3 continuation bytes to the lead byte.
  size_t n = text.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = (c & 0x80) == 0      ? 1
                  : (c & 0xE0) == 0xC0 ? 2
                  : (c & 0xF0) == 0xE0 ? 3
                  : (c & 0xF8) == 0xF0 ? 4
                                       : 1;  // invalid lead: pass it on
    return back < need ? back : 0;
  }
  return 0;
}

}  // namespace tandem::parsers
