// Python methods on str/dict/list values.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "common/utf8.h"
#include "template/jinja_builtins.h"

namespace tandem::jinja {
namespace {

bool IsPyAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= '\x1c' && c <= '\x1f');
}

// Code point index of byte offset `byte` in `s` (Python indexes strings by code point).
int64_t CodePointIndex(const std::string& s, size_t byte) { return static_cast<int64_t>(Utf8Length(s.substr(0, byte))); }

StatusOr<std::string> StringArg(const Args& args, size_t index, std::string_view name) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || !v->is_string()) {
    return InvalidArgumentError("argument '" + std::string(name) + "' must be a string");
  }
  return v->str();
}

int64_t IntArg(const Args& args, size_t index, std::string_view name, int64_t fallback) {
  const Value* v = args.Get(index, name);
  return v != nullptr && (v->is_int() || v->is_bool()) ? v->AsInt() : fallback;
}

Value StringList(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::String(p));
  return Value::List(std::move(items));
}

std::vector<std::string> PySplit(const std::string& s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep == nullptr) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && IsPyAsciiSpace(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(s.substr(i));  // Python keeps the remainder's trailing whitespace
        break;
      }
      size_t j = i;
      while (j < s.size() && !IsPyAsciiSpace(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t pos = s.find(*sep, start);
    if (pos == std::string::npos) break;
    out.push_back(s.substr(start, pos - start));
    start = pos + sep->size();
  }
  out.push_back(s.substr(start));
  return out;
}

// `sep` may be a string or a tuple of strings (startswith / endswith).
StatusOr<bool> AffixMatch(const std::string& s, const Value* affix, bool prefix) {
  if (affix == nullptr) return InvalidArgumentError("startswith/endswith needs an argument");
  std::vector<Value> options = affix->is_list() ? affix->list().items : std::vector<Value>{*affix};
  for (const Value& o : options) {
    if (!o.is_string()) return InvalidArgumentError("startswith/endswith needs strings");
    const std::string& a = o.str();
    if (a.size() > s.size()) continue;
    if (prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0) return true;
  }
  return false;
}

// str.format with `{}`, `{0}`, `{name}` fields (no format specs) and `{{` / `}}`.
StatusOr<Value> PyFormat(const std::string& fmt, const Args& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out.push_back('}');
      ++i;
    } else if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
    } else if (c == '{') {
      size_t close = fmt.find('}', i);
      if (close == std::string::npos) return InvalidArgumentError("single '{' in format string");
      std::string field = fmt.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!") != std::string::npos) return InvalidArgumentError("format specs are not supported");
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < args.positional.size() ? &args.positional[auto_index++] : nullptr;
      } else if (field.find_first_not_of("0123456789") == std::string::npos) {
        size_t idx = static_cast<size_t>(std::atoll(field.c_str()));
        v = idx < args.positional.size() ? &args.positional[idx] : nullptr;
      } else {
        v = args.Get(SIZE_MAX, field);
      }
      if (v == nullptr) return InvalidArgumentError("format field '" + field + "' has no argument");
      TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(*v));
      out += s;
      i = close;
    } else {
      out.push_back(c);
    }
  }
  return Value::String(std::move(out));
}

StatusOr<Value> StringMethod(RenderContext& ctx, const std::string& s, std::string_view name, const Args& args,
                             bool* handled) {
  *handled = true;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* chars = args.Get(0, "chars");
    const std::string* set = chars != nullptr && chars->is_string() ? &chars->str() : nullptr;
    return Value::String(PyStrip(s, set, name != "rstrip", name != "lstrip"));
  }
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower") return Value::String(PyLower(s));
  if (name == "title" || name == "capitalize") {
    std::string out = s;
    bool prev_letter = false;
    for (size_t i = 0; i < out.size(); ++i) {
      char& c = out[i];
      bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      bool upper = name == "title" ? !prev_letter : i == 0;
      if (letter) c = upper ? PyUpper(std::string(1, c))[0] : PyLower(std::string(1, c))[0];
      prev_letter = letter;
    }
    return Value::String(std::move(out));
  }
  if (name == "split" || name == "rsplit") {
    const Value* sep = args.Get(0, "sep");
    int64_t maxsplit = IntArg(args, 1, "maxsplit", -1);
    const std::string* sep_str = sep != nullptr && sep->is_string() ? &sep->str() : nullptr;
    if (sep_str != nullptr && sep_str->empty()) return InvalidArgumentError("empty separator");
    TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(s.size())));
    if (name == "rsplit" && maxsplit >= 0) {
      // Split the reversed string by the reversed separator, then undo the reversal.
      std::string rs(s.rbegin(), s.rend());
      std::string rsep = sep_str != nullptr ? std::string(sep_str->rbegin(), sep_str->rend()) : std::string();
      std::vector<std::string> parts = PySplit(rs, sep_str != nullptr ? &rsep : nullptr, maxsplit);
      std::vector<std::string> out;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) out.emplace_back(it->rbegin(), it->rend());
      return StringList(out);
    }
    return StringList(PySplit(s, sep_str, maxsplit));
  }
  if (name == "splitlines") {
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= '\x1c' && c <= '\x1e')) {
        lines.push_back(s.substr(start, i - start));
        if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
    if (start < s.size()) lines.push_back(s.substr(start));
    return StringList(lines);
  }
  if (name == "startswith" || name == "endswith") {
    TANDEM_ASSIGN_OR_RETURN(bool match, AffixMatch(s, args.Get(0, "prefix"), name == "startswith"));
    return Value::Bool(match);
  }
  if (name == "replace") {
    TANDEM_ASSIGN_OR_RETURN(std::string from, StringArg(args, 0, "old"));
    TANDEM_ASSIGN_OR_RETURN(std::string to, StringArg(args, 1, "new"));
    int64_t count = IntArg(args, 2, "count", -1);
    std::string out;
    if (from.empty()) {
      std::vector<char32_t> cps = DecodeUtf8(s);
      int64_t done = 0;
      for (size_t i = 0; i <= cps.size(); ++i) {
        if (count < 0 || done < count) {
          out += to;
          ++done;
        }
        if (i < cps.size()) AppendUtf8(cps[i], &out);
      }
    } else {
      size_t start = 0;
      int64_t done = 0;
      while (count < 0 || done < count) {
        size_t pos = s.find(from, start);
        if (pos == std::string::npos) break;
        out.append(s, start, pos - start);
        out += to;
        start = pos + from.size();
        ++done;
        if (out.size() > ctx.limits().max_output_bytes) return ResourceExhaustedError("replace result too long");
      }
      out.append(s, start, std::string::npos);
    }
    TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(out.size())));
    if (out.size() > ctx.limits().max_output_bytes) return ResourceExhaustedError("replace result too long");
    return Value::String(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    TANDEM_ASSIGN_OR_RETURN(std::string sub, StringArg(args, 0, "sub"));
    if (name == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(Utf8Length(s)) + 1);
      int64_t n = 0;
      for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
      return Value::Int(n);
    }
    size_t pos = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (pos == std::string::npos) {
      if (name == "index" || name == "rindex") return InvalidArgumentError("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CodePointIndex(s, pos));
  }
  if (name == "format") return PyFormat(s, args);
  if (name == "join") {
    const Value* seq = args.Get(0, "iterable");
    if (seq == nullptr) return InvalidArgumentError("join needs an iterable");
    TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, *seq));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) return InvalidArgumentError("sequence item: expected str instance");
      if (i > 0) out += s;
      out += items[i].str();
      if (out.size() > ctx.limits().max_output_bytes) return ResourceExhaustedError("join result too long");
    }
    TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(out.size())));
    return Value::String(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    TANDEM_ASSIGN_OR_RETURN(std::string affix, StringArg(args, 0, "affix"));
    Value affix_v = Value::String(affix);
    TANDEM_ASSIGN_OR_RETURN(bool match, AffixMatch(s, &affix_v, name == "removeprefix"));
    if (!match) return Value::String(s);
    return Value::String(name == "removeprefix" ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size()));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper") {
    bool ok = !s.empty();
    bool cased = false;
    for (char c : s) {
      bool digit = c >= '0' && c <= '9';
      bool lower = c >= 'a' && c <= 'z';
      bool upper = c >= 'A' && c <= 'Z';
      cased = cased || lower || upper;
      if (name == "isdigit") ok = ok && digit;
      if (name == "isalpha") ok = ok && (lower || upper);
      if (name == "isalnum") ok = ok && (lower || upper || digit);
      if (name == "isspace") ok = ok && IsPyAsciiSpace(c);
      if (name == "islower") ok = ok && !upper;
      if (name == "isupper") ok = ok && !lower;
    }
    if (name == "islower" || name == "isupper") ok = ok && cased;
    return Value::Bool(ok);
  }
  *handled = false;
  return Value();
}

}  // namespace

std::string PyStrip(const std::string& s, const std::string* chars, bool left, bool right) {
  if (chars != nullptr) {
    // Character sets may hold multi-byte characters: strip whole code points.
    std::vector<char32_t> set = DecodeUtf8(*chars);
    std::vector<char32_t> cps = DecodeUtf8(s);
    auto in_set = [&](char32_t c) { return std::find(set.begin(), set.end(), c) != set.end(); };
    size_t b = 0, e = cps.size();
    while (left && b < e && in_set(cps[b])) ++b;
    while (right && e > b && in_set(cps[e - 1])) --e;
    std::string out;
    for (size_t i = b; i < e; ++i) AppendUtf8(cps[i], &out);
    return out;
  }
  size_t b = 0, e = s.size();
  while (left && b < e && IsPyAsciiSpace(s[b])) ++b;
  while (right && e > b && IsPyAsciiSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

namespace {

// Simple case mapping for Latin-1, Latin Extended-A, Greek and Cyrillic; other code points
// are unchanged. `upper` selects the direction.
char32_t MapCase(char32_t c, bool upper) {
  if (c < 0x80) {
    if (upper && c >= 'a' && c <= 'z') return c - 32;
    if (!upper && c >= 'A' && c <= 'Z') return c + 32;
    return c;
  }
  if (upper) {
    if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 0x20;
    if (c == 0xff) return 0x178;
    if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 0x20;
    if (c == 0x3c2) return 0x3a3;
    if (c >= 0x430 && c <= 0x44f) return c - 0x20;
    if (c >= 0x450 && c <= 0x45f) return c - 0x50;
  } else {
    if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 0x20;
    if (c == 0x178) return 0xff;
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 0x20;
    if (c >= 0x410 && c <= 0x42f) return c + 0x20;
    if (c >= 0x400 && c <= 0x40f) return c + 0x50;
  }
  // Latin Extended-A pairs: upper case at even code points in these ranges, odd in the others.
  bool even_upper = (c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177);
  bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
  if (even_upper || odd_upper) {
    bool is_upper = ((c % 2) == 0) == even_upper;
    if (upper && !is_upper) return c - 1;
    if (!upper && is_upper) return c + 1;
  }
  return c;
}

std::string MapString(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  bool ascii = true;
  for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    for (char c : s) out.push_back(static_cast<char>(MapCase(static_cast<unsigned char>(c), upper)));
    return out;
  }
  for (char32_t cp : DecodeUtf8(s)) {
    if (upper && cp == 0xdf) {
      out += "SS";  // Python: 'ß'.upper() == 'SS'
      continue;
    }
    AppendUtf8(MapCase(cp, upper), &out);
  }
  return out;
}

}  // namespace

std::string PyUpper(std::string s) { return MapString(s, true); }
std::string PyLower(std::string s) { return MapString(s, false); }

StatusOr<Value> CallMethod(RenderContext& ctx, const Value& object, std::string_view name, const Args& args,
                           bool* handled) {
  *handled = false;
  if (object.is_string()) return StringMethod(ctx, object.str(), name, args, handled);
  if (object.is_dict() && !object.dict().is_namespace) {
    const DictData& d = object.dict();
    *handled = true;
    if (name == "items" || name == "keys" || name == "values") {
      TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(d.size())));
      std::vector<Value> out;
      for (const auto& [k, v] : d.entries()) {
        if (name == "items") out.push_back(Value::List({Value::String(k), v}, true));
        if (name == "keys") out.push_back(Value::String(k));
        if (name == "values") out.push_back(v);
      }
      return Value::List(std::move(out));
    }
    if (name == "get") {
      const Value* key = args.Get(0, "key");
      const Value* fallback = args.Get(1, "default");
      const Value* found = key != nullptr && key->is_string() ? d.Find(key->str()) : nullptr;
      if (found != nullptr) return *found;
      return fallback != nullptr ? *fallback : Value::None();
    }
    *handled = false;
    return Value();
  }
  if (object.is_list() && !object.list().is_tuple && name == "append") {
    *handled = true;
    const Value* item = args.Get(0, "object");
    if (item == nullptr) return InvalidArgumentError("append needs an argument");
    if (item->MayHoldNamespace()) return InvalidArgumentError("cannot append a namespace to a list");
    int64_t budget = 100000;
    if (Reaches(*item, object.identity(), /*namespace_paths_only=*/false, &budget)) {
      return InvalidArgumentError("append would make a list contain itself");
    }
    TANDEM_RETURN_IF_ERROR(ctx.Charge(100000 - budget + 1));
    object.list().items.push_back(*item);
    return Value::None();
  }
  return Value();
}

}  // namespace tandem::jinja
