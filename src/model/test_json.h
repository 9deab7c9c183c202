// A minimal JSON reader for test golden files (tests/data/*.json). Test-only.
//
// Supports objects, arrays, strings (all escapes, \u surrogate pairs), integers,
// floats, true/false/null. Not a general-purpose or hardened parser.
// Thread safety: values; no shared state.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/unicode.h"

namespace tandem::testing {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string str;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;

  // Member `key` of an object, or nullptr.
  const JsonValue* Get(std::string_view key) const {
    for (const auto& [k, v] : object) {
      if (k == key) return &v;
    }
    return nullptr;
  }
  int64_t AsInt() const { return static_cast<int64_t>(number); }
  std::vector<int32_t> AsIntVector() const {
    std::vector<int32_t> out;
    for (const JsonValue& v : array) out.push_back(static_cast<int32_t>(v.number));
    return out;
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  StatusOr<JsonValue> Parse() {
    JsonValue v;
    if (!ParseValue(&v))
      return InvalidArgumentError("JSON syntax error near byte " + std::to_string(pos_));
    SkipSpace();
    if (pos_ != text_.size()) return InvalidArgumentError("trailing data after JSON value");
    return v;
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool ParseHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return false;
    *out = static_cast<uint32_t>(
        std::strtoul(std::string(text_.substr(pos_, 4)).c_str(), nullptr, 16));
    pos_ += 4;
    return true;
  }
  bool ParseString(std::string* out) {
    if (!Consume("\"")) return false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return false;
      const char e = text_[pos_++];
      switch (e) {
        case 'n':
          out->push_back('\n');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'u': {
          uint32_t cpt = 0;
          if (!ParseHex4(&cpt)) return false;
          if (cpt >= 0xD800 && cpt < 0xDC00 && Consume("\\u")) {
            uint32_t low = 0;
            if (!ParseHex4(&low)) return false;
            cpt = 0x10000 + ((cpt - 0xD800) << 10) + (low - 0xDC00);
          }
          unicode::AppendUtf8(cpt, out);
          break;
        }
        default:
          out->push_back(e);
          break;  // \" \\ \/
      }
    }
    return false;
  }
  bool ParseValue(JsonValue* v) {
    SkipSpace();
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      v->kind = JsonValue::Kind::kObject;
      SkipSpace();
      if (Consume("}")) return true;
      while (true) {
        SkipSpace();
        std::string key;
        if (!ParseString(&key)) return false;
        SkipSpace();
        if (!Consume(":")) return false;
        JsonValue member;
        if (!ParseValue(&member)) return false;
        v->object.emplace_back(std::move(key), std::move(member));
        SkipSpace();
        if (Consume("}")) return true;
        if (!Consume(",")) return false;
      }
    }
    if (c == '[') {
      ++pos_;
      v->kind = JsonValue::Kind::kArray;
      SkipSpace();
      if (Consume("]")) return true;
      while (true) {
        JsonValue element;
        if (!ParseValue(&element)) return false;
        v->array.push_back(std::move(element));
        SkipSpace();
        if (Consume("]")) return true;
        if (!Consume(",")) return false;
      }
    }
    if (c == '"') {
      v->kind = JsonValue::Kind::kString;
      return ParseString(&v->str);
    }
    if (Consume("true")) {
      v->kind = JsonValue::Kind::kBool;
      v->boolean = true;
      return true;
    }
    if (Consume("false")) {
      v->kind = JsonValue::Kind::kBool;
      return true;
    }
    if (Consume("null")) return true;
    char* end = nullptr;
    const std::string number(text_.substr(pos_, 32));
    v->number = std::strtod(number.c_str(), &end);
    const size_t used = static_cast<size_t>(end - number.c_str());
    if (used == 0) return false;
    v->kind = JsonValue::Kind::kNumber;
    pos_ += used;
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

inline StatusOr<JsonValue> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return JsonReader(buffer.str()).Parse();
}

}  // namespace tandem::testing
