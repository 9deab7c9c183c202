// jinja::Value: the dynamic value of the Jinja-subset interpreter that renders chat
// templates (see chat_template.h for the public entry point).
//
// A Value is one of: undefined, none, bool, int (int64), float (double), string (UTF-8),
// list, dict (insertion-ordered, string keys) or callable (macro / builtin). The semantics
// follow Python as Jinja2 exposes it: truthiness, `==` across int/float/bool, ordering,
// str() / repr() text (`True`, `None`, `[1, 'a']`, `1e+20`).
//
// Ownership: scalars and strings are values (strings share an immutable buffer). Lists and
// dicts are shared and mutable like Python objects (a namespace is a dict marked as such);
// copying a Value copies the reference. The interpreter never lets a container reach itself
// (append and namespace assignment check for cycles), so reference counting frees every
// value; destruction of deeply nested values is iterative (no stack overflow).
//
// Thread safety: none. A Value graph belongs to one render on one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tandem::jinja {

class Value;
struct Callable;

struct ListData {
  ListData() = default;
  explicit ListData(std::vector<Value> v, bool tuple = false);
  ~ListData();
  ListData(const ListData&) = delete;
  ListData& operator=(const ListData&) = delete;

  std::vector<Value> items;
  bool is_tuple = false;  // only changes how repr() prints it: (1, 2)
  // Some item is or holds a namespace. Exact, because items are fixed at construction
  // except by append, which refuses such values (see Reaches).
  bool holds_namespace = false;
};

// Insertion-ordered string-keyed map.
class DictData {
 public:
  DictData() = default;
  ~DictData();
  DictData(const DictData&) = delete;
  DictData& operator=(const DictData&) = delete;

  // Returns nullptr when absent. The pointer is valid until the next Set.
  const Value* Find(std::string_view key) const;
  // Inserts or overwrites (keeping the original position on overwrite).
  void Set(std::string key, Value value);
  size_t size() const;  // out of line: Value is incomplete here (clang rejects it inline)
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

  bool is_namespace = false;  // created by namespace(); the only dict `set x.a = ...` may modify
  // Some value is or holds a namespace (kept up to date by Set).
  bool holds_namespace() const { return holds_namespace_; }

 private:
  bool holds_namespace_ = false;
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;  // built once entries_ grows past a few
};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // undefined
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b) {
    Value v(Kind::kBool);
    v.int_ = b ? 1 : 0;
    return v;
  }
  static Value Int(int64_t i) {
    Value v(Kind::kInt);
    v.int_ = i;
    return v;
  }
  static Value Float(double d) {
    Value v(Kind::kFloat);
    v.float_ = d;
    return v;
  }
  static Value String(std::string s) {
    Value v(Kind::kString);
    v.heap_ = std::make_shared<std::string>(std::move(s));
    return v;
  }
  static Value List(std::vector<Value> items = {}, bool tuple = false);
  static Value Dict(std::shared_ptr<DictData> dict) {
    Value v(Kind::kDict);
    v.heap_ = std::move(dict);
    return v;
  }
  static Value NewDict() { return Dict(std::make_shared<DictData>()); }
  static Value Function(std::shared_ptr<const Callable> fn) {
    Value v(Kind::kCallable);
    v.heap_ = std::const_pointer_cast<Callable>(std::move(fn));
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_container() const { return is_list() || is_dict(); }
  // Is a namespace or a container holding one (only such values can close a cycle through a
  // namespace).
  bool MayHoldNamespace() const;
  // Python numbers: bool, int, float.
  bool is_number() const { return is_bool() || is_int() || is_float(); }

  // Accessors; precondition: the matching is_*().
  bool bool_value() const { return int_ != 0; }
  int64_t int_value() const { return int_; }
  double float_value() const { return float_; }
  const std::string& str() const { return *static_cast<const std::string*>(heap_.get()); }
  ListData& list() const { return *static_cast<ListData*>(heap_.get()); }
  DictData& dict() const { return *static_cast<DictData*>(heap_.get()); }
  const Callable& callable() const { return *static_cast<const Callable*>(heap_.get()); }
  // Identity of a list/dict/callable (for cycle checks and `is sameas`); null otherwise.
  const void* identity() const { return is_container() || is_callable() ? heap_.get() : nullptr; }

  // Precondition: is_number(). bool -> 0/1.
  double AsDouble() const;
  // Precondition: is_bool() || is_int().
  int64_t AsInt() const { return int_; }

  bool Truthy() const;
  // Python type name, for error messages ("str", "int", "NoneType", ...).
  std::string_view TypeName() const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}

  Kind kind_ = Kind::kUndefined;
  int64_t int_ = 0;              // kBool (0/1), kInt
  double float_ = 0;             // kFloat
  std::shared_ptr<void> heap_;   // kString (std::string), kList, kDict, kCallable
};

// Nesting bound for the recursive helpers below (printing, comparing, JSON).
inline constexpr int kMaxValueDepth = 256;

// Python `a == b` (1 == 1.0 == True; lists and dicts by content; undefined == undefined).
StatusOr<bool> ValuesEqual(const Value& a, const Value& b, int depth = 0);
// Python `a < b` for numbers, strings (code point order), lists; TypeError otherwise.
StatusOr<bool> ValueLess(const Value& a, const Value& b, int depth = 0);

// Python str(v): what `{{ v }}` prints. Undefined prints as "".
StatusOr<std::string> ToPyStr(const Value& v);
// Appends Python repr(v) to *out.
Status AppendPyRepr(const Value& v, std::string* out, int depth = 0);
// Python repr() of a float ("1.0", "1e+20", "0.30000000000000004", "inf").
std::string FormatPyFloat(double d);

// Python json.dumps(v, ensure_ascii=False, indent=indent, separators=...) as HF's tojson
// filter calls it.
struct JsonFormat {
  bool pretty = false;         // indent given: one item per line
  std::string indent_unit;     // repeated per nesting level when pretty
  std::string item_separator;  // empty: Python's default ("," when pretty, else ", ")
  std::string key_separator;   // empty: ": "
  bool sort_keys = false;
};
Status AppendJson(const Value& v, const JsonFormat& format, std::string* out);

// Converts JSON text to a Value (objects keep their key order). Implemented with
// nlohmann::json in jinja_json.cc so that header stays out of this one.
StatusOr<Value> ParseJson(std::string_view json_text);

// True when `needle` (a container) is reachable from `from` (follows lists and dicts).
// Used to refuse mutations that would create a reference cycle. With `namespace_paths_only`
// (the needle is a namespace) containers that hold no namespace are not entered, so the
// common case costs O(1). Iterative; `*visited_budget` is decremented per container visited
// and the search answers true (refuse) if it runs out.
bool Reaches(const Value& from, const void* needle, bool namespace_paths_only, int64_t* visited_budget);

// UTF-8 helpers: code points of `s` (invalid bytes decode as U+FFFD, one per byte), and
// their number. Encoding is common/utf8.h's AppendUtf8.
std::vector<char32_t> DecodeUtf8(std::string_view s);
size_t Utf8Length(std::string_view s);

}  // namespace tandem::jinja
