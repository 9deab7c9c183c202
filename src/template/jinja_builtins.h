// Internal to the Jinja-subset interpreter: the render budget, call arguments, and the
// builtin operators, filters, tests, methods and global functions the interpreter dispatches
// to (jinja_operators.cc, jinja_filters.cc, jinja_methods.cc). Semantics follow Jinja2 3.1
// as Hugging Face configures it (tojson = json.dumps(ensure_ascii=False), raise_exception,
// strftime_now, loop controls).
//
// Thread safety: a RenderContext belongs to one render on one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "template/jinja_value.h"

namespace tandem::jinja {

struct Stmt;

// Hard limits of one render; exceeding one fails the render with kResourceExhausted.
struct RenderLimits {
  size_t max_output_bytes = 16u << 20;      // any single output buffer (result, macro, set)
  int max_eval_depth = 400;                 // nested expression/statement/macro evaluation
  int max_call_depth = 64;                  // nested macro calls
  int64_t max_loop_iterations = 1'000'000;  // all loops together
  int64_t max_work = 50'000'000;            // abstract units: nodes + bytes/items produced
};

class RenderContext {
 public:
  RenderContext(const RenderLimits& limits, std::optional<int64_t> now_unix_seconds)
      : limits_(limits), work_left_(limits.max_work), now_unix_seconds_(now_unix_seconds) {}

  // Spends `units` of the work budget.
  Status Charge(int64_t units) {
    work_left_ -= units;
    if (work_left_ < 0) return ResourceExhaustedError("template render exceeded its work budget");
    return Status::Ok();
  }
  const RenderLimits& limits() const { return limits_; }
  // Fixed clock for strftime_now (tests); nullopt: the wall clock in local time.
  std::optional<int64_t> now_unix_seconds() const { return now_unix_seconds_; }

 private:
  RenderLimits limits_;
  int64_t work_left_;
  std::optional<int64_t> now_unix_seconds_;
};

// Positional and keyword arguments of a call, filter or test.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> kwargs;

  // The argument at `index` or named `name`; nullptr when absent.
  const Value* Get(size_t index, std::string_view name) const {
    for (const auto& [k, v] : kwargs) {
      if (k == name) return &v;
    }
    return index < positional.size() ? &positional[index] : nullptr;
  }
};

// A callable Value: a builtin global function, a macro, or the `caller` of a call block.
struct Callable {
  enum class Type { kBuiltin, kMacro, kCaller };
  Type type = Type::kBuiltin;
  std::string name;
  const Stmt* stmt = nullptr;  // kMacro / kCaller: the defining statement (owned by the Program)
  // kCaller: expires when the call block finishes, so a stored `caller` cannot outlive the
  // scope it renders in.
  std::weak_ptr<const void> alive;
  const void* scope = nullptr;  // kCaller: the interpreter's Scope of the call block
};

// ---- operators (jinja_operators.cc) ----------------------------------------------------
// `op` is one of + - * / // % ** ~.
StatusOr<Value> BinaryOp(RenderContext& ctx, std::string_view op, const Value& a, const Value& b);
StatusOr<Value> Negate(const Value& v);
// Python `needle in haystack`.
StatusOr<bool> Contains(const Value& haystack, const Value& needle);
// `obj.name`: dict key, else undefined (the interpreter rejects an undefined `obj` first).
Value GetAttr(const Value& obj, std::string_view name);
// `obj[key]`: list/string index (negative from the end), dict key; undefined when absent.
Value GetItem(const Value& obj, const Value& key);
// `obj[start:stop:step]` on lists and strings (null = omitted).
StatusOr<Value> Slice(RenderContext& ctx, const Value& obj, const Value* start, const Value* stop,
                      const Value* step);
// The items a `for` loop visits: list items, dict keys, string characters; none for undefined.
StatusOr<std::vector<Value>> Iterate(RenderContext& ctx, const Value& v);

// ---- filters, tests, methods, globals --------------------------------------------------
// Unknown names are kInvalidArgument errors.
StatusOr<Value> CallFilter(RenderContext& ctx, std::string_view name, const Value& input, const Args& args);
StatusOr<bool> CallTest(RenderContext& ctx, std::string_view name, const Value& input, const Args& args);
bool IsKnownTest(std::string_view name);
// `object.name(args)` for str/dict/list methods; *handled=false when `name` is not a method of
// that type (the caller then treats it as attribute lookup + call).
StatusOr<Value> CallMethod(RenderContext& ctx, const Value& object, std::string_view name, const Args& args,
                           bool* handled);
// Builtin global functions: range, dict, namespace, raise_exception, strftime_now.
StatusOr<Value> CallGlobal(RenderContext& ctx, std::string_view name, const Args& args);
// Names of the builtin global functions (to seed the root scope).
const std::vector<std::string>& GlobalFunctionNames();

// ---- string helpers shared by filters and methods --------------------------------------
// Python str.strip/lstrip/rstrip; `chars` null means whitespace.
std::string PyStrip(const std::string& s, const std::string* chars, bool left, bool right);
// Python str.upper/lower for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic.
// Python str.upper/lower for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic.
std::string PyUpper(std::string s);
std::string PyLower(std::string s);

}  // namespace tandem::jinja
