#include "template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "common/utf8.h"

namespace tandem::jinja {
namespace {

// Deeply nested lists/dicts would destroy recursively (one stack frame per level). While a
// release is in progress, containers being destroyed hand their children to this queue
// instead, and the outermost release drains it in a loop.
thread_local std::vector<Value>* g_release_queue = nullptr;

void ReleaseChildren(std::vector<Value>* children) {
  if (g_release_queue != nullptr) {
    for (Value& v : *children) {
      if (v.is_container()) g_release_queue->push_back(std::move(v));
    }
    children->clear();
    return;
  }
  std::vector<Value> queue;
  g_release_queue = &queue;
  for (Value& v : *children) {
    if (v.is_container()) queue.push_back(std::move(v));
  }
  children->clear();
  while (!queue.empty()) {
    std::vector<Value> batch;
    batch.swap(queue);
    batch.clear();  // containers freed here hand their children to `queue`
  }
  g_release_queue = nullptr;
}

constexpr size_t kIndexThreshold = 16;

}  // namespace

ListData::ListData(std::vector<Value> v, bool tuple) : items(std::move(v)), is_tuple(tuple) {
  for (const Value& item : items) holds_namespace = holds_namespace || item.MayHoldNamespace();
}
ListData::~ListData() { ReleaseChildren(&items); }

size_t DictData::size() const { return entries_.size(); }

DictData::~DictData() {
  std::vector<Value> children;
  children.reserve(entries_.size());
  for (auto& [key, value] : entries_) children.push_back(std::move(value));
  entries_.clear();
  ReleaseChildren(&children);
}

const Value* DictData::Find(std::string_view key) const {
  if (entries_.size() <= kIndexThreshold) {
    for (const auto& [k, v] : entries_) {
      if (k == key) return &v;
    }
    return nullptr;
  }
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void DictData::Set(std::string key, Value value) {
  if (value.MayHoldNamespace()) holds_namespace_ = true;
  if (entries_.size() <= kIndexThreshold) {
    for (auto& [k, v] : entries_) {
      if (k == key) {
        v = std::move(value);
        return;
      }
    }
  } else if (auto it = index_.find(key); it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() == kIndexThreshold + 1) {
    for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
  } else if (entries_.size() > kIndexThreshold + 1) {
    index_.emplace(entries_.back().first, entries_.size() - 1);
  }
}

Value Value::List(std::vector<Value> items, bool tuple) {
  Value v(Kind::kList);
  v.heap_ = std::make_shared<ListData>(std::move(items), tuple);
  return v;
}

bool Value::MayHoldNamespace() const {
  if (is_list()) return list().holds_namespace;
  if (is_dict()) return dict().is_namespace || dict().holds_namespace();
  return false;
}

double Value::AsDouble() const {
  if (is_float()) return float_value();
  return static_cast<double>(AsInt());
}

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return bool_value();
    case Kind::kInt: return int_value() != 0;
    case Kind::kFloat: return float_value() != 0.0;
    case Kind::kString: return !str().empty();
    case Kind::kList: return !list().items.empty();
    case Kind::kDict: return dict().size() != 0;
    case Kind::kCallable: return true;
  }
  return false;
}

std::string_view Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return list().is_tuple ? "tuple" : "list";
    case Kind::kDict: return dict().is_namespace ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "?";
}

StatusOr<bool> ValuesEqual(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return ResourceExhaustedError("value nesting too deep to compare");
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() == b.AsDouble();
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kList: {
      const auto& x = a.list().items;
      const auto& y = b.list().items;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        TANDEM_ASSIGN_OR_RETURN(bool eq, ValuesEqual(x[i], y[i], depth + 1));
        if (!eq) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [key, value] : a.dict().entries()) {
        const Value* other = b.dict().Find(key);
        if (other == nullptr) return false;
        TANDEM_ASSIGN_OR_RETURN(bool eq, ValuesEqual(value, *other, depth + 1));
        if (!eq) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

StatusOr<bool> ValueLess(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return ResourceExhaustedError("value nesting too deep to compare");
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() < b.AsDouble();
    return a.AsInt() < b.AsInt();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 bytes sort as code points
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      TANDEM_ASSIGN_OR_RETURN(bool eq, ValuesEqual(x[i], y[i], depth + 1));
      if (!eq) return ValueLess(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  return InvalidArgumentError("'<' not supported between instances of '" + std::string(a.TypeName()) +
                              "' and '" + std::string(b.TypeName()) + "'");
}

std::string FormatPyFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: fixed when -4 <= exponent < 16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  int exponent = std::atoi(sci.c_str() + e_pos + 1);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_buf;
  }
  if (exponent < 0) {
    out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    return out;
  }
  size_t int_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_digits) {
    out += digits + std::string(int_digits - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
  }
  return out;
}

namespace {

void AppendPyStringRepr(const std::string& s, std::string* out) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  for (char32_t cp : DecodeUtf8(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      *out += "\\n";
    } else if (cp == '\r') {
      *out += "\\r";
    } else if (cp == '\t') {
      *out += "\\t";
    } else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0xad) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      *out += buf;
    } else if (cp == 0x2028 || cp == 0x2029) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      *out += buf;
    } else {
      AppendUtf8(cp, out);
    }
  }
  out->push_back(quote);
}

}  // namespace

Status AppendPyRepr(const Value& v, std::string* out, int depth) {
  if (depth > kMaxValueDepth) return ResourceExhaustedError("value nesting too deep to print");
  switch (v.kind()) {
    case Value::Kind::kString: AppendPyStringRepr(v.str(), out); return Status::Ok();
    case Value::Kind::kList: {
      const ListData& l = v.list();
      out->push_back(l.is_tuple ? '(' : '[');
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i > 0) *out += ", ";
        TANDEM_RETURN_IF_ERROR(AppendPyRepr(l.items[i], out, depth + 1));
      }
      if (l.is_tuple && l.items.size() == 1) out->push_back(',');
      out->push_back(l.is_tuple ? ')' : ']');
      return Status::Ok();
    }
    case Value::Kind::kDict: {
      const DictData& d = v.dict();
      if (d.is_namespace) *out += "<Namespace ";
      out->push_back('{');
      bool first = true;
      for (const auto& [key, value] : d.entries()) {
        if (!first) *out += ", ";
        first = false;
        AppendPyStringRepr(key, out);
        *out += ": ";
        TANDEM_RETURN_IF_ERROR(AppendPyRepr(value, out, depth + 1));
      }
      out->push_back('}');
      if (d.is_namespace) out->push_back('>');
      return Status::Ok();
    }
    default: {
      TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(v));
      *out += s;
      return Status::Ok();
    }
  }
}

StatusOr<std::string> ToPyStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return std::string();
    case Value::Kind::kNone: return std::string("None");
    case Value::Kind::kBool: return std::string(v.bool_value() ? "True" : "False");
    case Value::Kind::kInt: return std::to_string(v.int_value());
    case Value::Kind::kFloat: return FormatPyFloat(v.float_value());
    case Value::Kind::kString: return v.str();
    case Value::Kind::kCallable: return std::string("<function>");
    case Value::Kind::kList:
    case Value::Kind::kDict: {
      std::string out;
      TANDEM_RETURN_IF_ERROR(AppendPyRepr(v, &out));
      return out;
    }
  }
  return std::string();
}

bool Reaches(const Value& from, const void* needle, bool namespace_paths_only, int64_t* visited_budget) {
  std::vector<const Value*> stack = {&from};
  std::unordered_set<const void*> seen;
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (!v->is_container()) continue;
    if (v->identity() == needle) return true;
    if (namespace_paths_only && !v->MayHoldNamespace()) continue;
    if (!seen.insert(v->identity()).second) continue;
    if (--*visited_budget < 0) return true;
    if (v->is_list()) {
      for (const Value& child : v->list().items) stack.push_back(&child);
    } else {
      for (const auto& [key, child] : v->dict().entries()) stack.push_back(&child);
    }
  }
  return false;
}

std::vector<char32_t> DecodeUtf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cc >> 6) != 2) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

size_t Utf8Length(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return DecodeUtf8(s).size();
  }
  return s.size();
}

}  // namespace tandem::jinja
