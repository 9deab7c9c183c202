// Jinja2 tests (`x is defined`, ...) and the global functions Hugging Face templates call:
// range, dict, namespace, raise_exception, strftime_now.
#include <ctime>

#include "template/jinja_builtins.h"

namespace tandem::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // Jinja's sandbox MAX_RANGE

StatusOr<Value> Range(RenderContext& ctx, const Args& args) {
  std::vector<int64_t> ints;
  for (const Value& v : args.positional) {
    if (!v.is_int() && !v.is_bool()) return InvalidArgumentError("range() arguments must be integers");
    ints.push_back(v.AsInt());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (ints.size() == 1) {
    stop = ints[0];
  } else if (ints.size() == 2 || ints.size() == 3) {
    start = ints[0];
    stop = ints[1];
    if (ints.size() == 3) step = ints[2];
  } else {
    return InvalidArgumentError("range() takes 1 to 3 arguments");
  }
  if (step == 0) return InvalidArgumentError("range() arg 3 must not be zero");
  // Count without overflow: the span is at most 2^64.
  uint64_t count = 0;
  if (step > 0 && start < stop) {
    count = (static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) / static_cast<uint64_t>(step) + 1;
  } else if (step < 0 && start > stop) {
    count = (static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) / (0 - static_cast<uint64_t>(step)) + 1;
  }
  if (count > static_cast<uint64_t>(kMaxRange)) {
    return ResourceExhaustedError("range too big; the sandbox allows at most 100000 items");
  }
  TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(count)));
  std::vector<Value> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) out.push_back(Value::Int(start + static_cast<int64_t>(i) * step));
  return Value::List(std::move(out));
}

// dict(**kw) / namespace(mapping?, **kw): a fresh dict with the given entries.
StatusOr<Value> MakeDict(const Args& args, bool is_namespace) {
  Value out = Value::NewDict();
  out.dict().is_namespace = is_namespace;
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (!init.is_dict() || args.positional.size() > 1) {
      return InvalidArgumentError(std::string(is_namespace ? "namespace" : "dict") + "() takes one mapping argument");
    }
    for (const auto& [k, v] : init.dict().entries()) out.dict().Set(k, v);
  }
  for (const auto& [k, v] : args.kwargs) out.dict().Set(k, v);
  return out;
}

StatusOr<Value> StrftimeNow(RenderContext& ctx, const Args& args) {
  const Value* format = args.Get(0, "format");
  if (format == nullptr || !format->is_string()) return InvalidArgumentError("strftime_now needs a format string");
  if (format->str().size() > 256) return InvalidArgumentError("strftime_now format too long");
  std::tm tm{};
  if (ctx.now_unix_seconds().has_value()) {
    std::time_t t = static_cast<std::time_t>(*ctx.now_unix_seconds());
    gmtime_r(&t, &tm);
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  if (format->str().empty()) return Value::String("");
  char buf[4096];
  size_t n = std::strftime(buf, sizeof(buf), format->str().c_str(), &tm);
  if (n == 0) return InvalidArgumentError("strftime_now format produced no output");
  return Value::String(std::string(buf, n));
}

bool IsLowerString(const Value& v, bool want_lower) {
  if (!v.is_string()) return false;
  bool cased = false;
  for (char c : v.str()) {
    if (c >= 'a' && c <= 'z') {
      if (!want_lower) return false;
      cased = true;
    } else if (c >= 'A' && c <= 'Z') {
      if (want_lower) return false;
      cased = true;
    }
  }
  return cased;
}

constexpr std::string_view kTests[] = {
    "defined", "undefined", "none",  "string", "number",   "integer",     "float", "mapping",
    "iterable", "sequence", "boolean", "true", "false",    "callable",    "odd",   "even",
    "divisibleby", "equalto", "eq",  "==",     "ne",       "!=",          "lt",    "lessthan",
    "<",       "le",        "<=",    "gt",     "greaterthan", ">",        "ge",    ">=",
    "in",      "sameas",    "lower", "upper",  "escaped",
};

}  // namespace

bool IsKnownTest(std::string_view name) {
  for (std::string_view t : kTests) {
    if (t == name) return true;
  }
  return false;
}

StatusOr<bool> CallTest(RenderContext& ctx, std::string_view name, const Value& v, const Args& args) {
  const Value* other = args.Get(0, "other");
  static const Value kUndefined;
  const Value& arg = other != nullptr ? *other : kUndefined;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "mapping") return v.is_dict() && !v.dict().is_namespace;
  if (name == "iterable" || name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.bool_value();
  if (name == "false") return v.is_bool() && !v.bool_value();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") return IsLowerString(v, name == "lower");
  if (name == "odd" || name == "even" || name == "divisibleby") {
    Value divisor = name == "divisibleby" ? arg : Value::Int(2);
    TANDEM_ASSIGN_OR_RETURN(Value rem, BinaryOp(ctx, "%", v, divisor));
    bool zero = !rem.Truthy();
    return name == "odd" ? !zero : zero;
  }
  if (name == "equalto" || name == "eq" || name == "==") return ValuesEqual(v, arg);
  if (name == "ne" || name == "!=") {
    TANDEM_ASSIGN_OR_RETURN(bool eq, ValuesEqual(v, arg));
    return !eq;
  }
  if (name == "lt" || name == "lessthan" || name == "<") return ValueLess(v, arg);
  if (name == "gt" || name == "greaterthan" || name == ">") return ValueLess(arg, v);
  if (name == "le" || name == "<=") {
    TANDEM_ASSIGN_OR_RETURN(bool gt, ValueLess(arg, v));
    return !gt;
  }
  if (name == "ge" || name == ">=") {
    TANDEM_ASSIGN_OR_RETURN(bool lt, ValueLess(v, arg));
    return !lt;
  }
  if (name == "in") return Contains(arg, v);
  if (name == "sameas") {
    if (v.is_container() || v.is_callable() || arg.is_container() || arg.is_callable()) {
      return v.identity() == arg.identity();
    }
    if (v.kind() != arg.kind()) return false;
    return ValuesEqual(v, arg);
  }
  return InvalidArgumentError("no test named '" + std::string(name) + "'");
}

const std::vector<std::string>& GlobalFunctionNames() {
  static const std::vector<std::string> kNames = {"range", "dict", "namespace", "raise_exception", "strftime_now"};
  return kNames;
}

StatusOr<Value> CallGlobal(RenderContext& ctx, std::string_view name, const Args& args) {
  if (name == "range") return Range(ctx, args);
  if (name == "dict") return MakeDict(args, false);
  if (name == "namespace") return MakeDict(args, true);
  if (name == "strftime_now") return StrftimeNow(ctx, args);
  if (name == "raise_exception") {
    const Value* message = args.Get(0, "message");
    std::string text = "raise_exception called";
    if (message != nullptr) {
      TANDEM_ASSIGN_OR_RETURN(text, ToPyStr(*message));
    }
    return InvalidArgumentError(text);
  }
  return InvalidArgumentError("no function named '" + std::string(name) + "'");
}

}  // namespace tandem::jinja
