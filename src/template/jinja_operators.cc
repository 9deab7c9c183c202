// Python operator semantics for jinja::Value: arithmetic, `in`, subscripts, slices, iteration.
#include <cmath>
#include <limits>

#include "common/utf8.h"
#include "template/jinja_builtins.h"

namespace tandem::jinja {
namespace {

Status TypeError(std::string_view op, const Value& a, const Value& b) {
  return InvalidArgumentError("unsupported operand type(s) for " + std::string(op) + ": '" +
                              std::string(a.TypeName()) + "' and '" + std::string(b.TypeName()) + "'");
}

StatusOr<Value> IntOp(std::string_view op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") {
    overflow = __builtin_add_overflow(x, y, &r);
  } else if (op == "-") {
    overflow = __builtin_sub_overflow(x, y, &r);
  } else if (op == "*") {
    overflow = __builtin_mul_overflow(x, y, &r);
  } else if (op == "/") {
    if (y == 0) return InvalidArgumentError("division by zero");
    return Value::Float(static_cast<double>(x) / static_cast<double>(y));
  } else if (op == "//" || op == "%") {
    if (y == 0) return InvalidArgumentError("integer division or modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) return OutOfRangeError("integer overflow");
    int64_t q = x / y;
    int64_t m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    return Value::Int(op == "//" ? q : m);
  } else if (op == "**") {
    if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
    r = 1;
    int64_t base = x;
    for (int64_t e = y; e > 0 && !overflow; e >>= 1) {
      if (e & 1) overflow = __builtin_mul_overflow(r, base, &r);
      if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
    }
  }
  if (overflow) return OutOfRangeError("integer overflow in '" + std::string(op) + "'");
  return Value::Int(r);
}

StatusOr<Value> FloatOp(std::string_view op, double x, double y) {
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "/") {
    if (y == 0) return InvalidArgumentError("float division by zero");
    return Value::Float(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return InvalidArgumentError("float modulo by zero");
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0 && ((y < 0) != (mod < 0))) {
      mod += y;
      div -= 1.0;
    }
    if (op == "%") return Value::Float(mod != 0 ? mod : std::copysign(0.0, y));
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return Value::Float(div != 0 ? floordiv : std::copysign(0.0, x / y));
  }
  if (op == "**") {
    if (x == 0 && y < 0) return InvalidArgumentError("0.0 cannot be raised to a negative power");
    return Value::Float(std::pow(x, y));
  }
  return InvalidArgumentError("unknown operator " + std::string(op));
}

// Python's index normalization for a sequence of `size`.
int64_t ClampSliceIndex(int64_t i, int64_t size, int64_t step) {
  if (i < 0) {
    i += size;
    if (i < 0) i = step < 0 ? -1 : 0;
  } else if (i >= size) {
    i = step < 0 ? size - 1 : size;
  }
  return i;
}

}  // namespace

StatusOr<Value> BinaryOp(RenderContext& ctx, std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    TANDEM_ASSIGN_OR_RETURN(std::string left, ToPyStr(a));
    TANDEM_ASSIGN_OR_RETURN(std::string right, ToPyStr(b));
    TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(left.size() + right.size())));
    return Value::String(left + right);
  }
  if (a.is_undefined() || b.is_undefined()) {
    return InvalidArgumentError("undefined value used in '" + std::string(op) + "'");
  }
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return FloatOp(op, a.AsDouble(), b.AsDouble());
    return IntOp(op, a.AsInt(), b.AsInt());
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(a.str().size() + b.str().size())));
      if (a.str().size() + b.str().size() > ctx.limits().max_output_bytes) {
        return ResourceExhaustedError("string too long");
      }
      return Value::String(a.str() + b.str());
    }
    if (a.is_list() && b.is_list()) {
      std::vector<Value> items = a.list().items;
      const auto& more = b.list().items;
      TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(items.size() + more.size())));
      items.insert(items.end(), more.begin(), more.end());
      return Value::List(std::move(items), a.list().is_tuple && b.list().is_tuple);
    }
  }
  if (op == "*") {
    const Value& seq = a.is_number() ? b : a;
    const Value& count = a.is_number() ? a : b;
    if ((seq.is_string() || seq.is_list()) && (count.is_int() || count.is_bool())) {
      int64_t n = std::max<int64_t>(0, count.AsInt());
      size_t unit = seq.is_string() ? seq.str().size() : seq.list().items.size();
      if (unit != 0 && static_cast<uint64_t>(n) > ctx.limits().max_output_bytes / unit) {
        return ResourceExhaustedError("sequence repetition too large");
      }
      TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(unit) * n));
      if (seq.is_string()) {
        std::string out;
        out.reserve(unit * static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) out += seq.str();
        return Value::String(std::move(out));
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i) {
        items.insert(items.end(), seq.list().items.begin(), seq.list().items.end());
      }
      return Value::List(std::move(items));
    }
  }
  return TypeError(op, a, b);
}

StatusOr<Value> Negate(const Value& v) {
  if (v.is_float()) return Value::Float(-v.float_value());
  if (v.is_int() || v.is_bool()) {
    if (v.AsInt() == std::numeric_limits<int64_t>::min()) return OutOfRangeError("integer overflow");
    return Value::Int(-v.AsInt());
  }
  return InvalidArgumentError("bad operand type for unary -: '" + std::string(v.TypeName()) + "'");
}

StatusOr<bool> Contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Value::Kind::kString:
      if (!needle.is_string()) {
        return InvalidArgumentError("'in <string>' requires string as left operand, not " +
                                    std::string(needle.TypeName()));
      }
      return haystack.str().find(needle.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& item : haystack.list().items) {
        TANDEM_ASSIGN_OR_RETURN(bool eq, ValuesEqual(item, needle));
        if (eq) return true;
      }
      return false;
    case Value::Kind::kDict:
      return needle.is_string() && haystack.dict().Find(needle.str()) != nullptr;
    case Value::Kind::kUndefined: return false;
    default:
      return InvalidArgumentError("argument of type '" + std::string(haystack.TypeName()) +
                                  "' is not iterable");
  }
}

Value GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_dict()) {
    const Value* v = obj.dict().Find(name);
    return v != nullptr ? *v : Value();
  }
  return Value();
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (!key.is_string()) return Value();
    return GetAttr(obj, key.str());
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.AsInt();
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.list().items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return obj.list().items[static_cast<size_t>(i)];
    }
    std::vector<char32_t> cps = DecodeUtf8(obj.str());
    int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    std::string out;
    AppendUtf8(cps[static_cast<size_t>(i)], &out);
    return Value::String(std::move(out));
  }
  return Value();
}

StatusOr<Value> Slice(RenderContext& ctx, const Value& obj, const Value* start, const Value* stop,
                      const Value* step) {
  auto as_index = [](const Value* v, int64_t* out) -> Status {
    if (v == nullptr || v->is_none()) return Status::Ok();
    if (!v->is_int() && !v->is_bool()) return InvalidArgumentError("slice indices must be integers or None");
    *out = v->AsInt();
    return Status::Ok();
  };
  int64_t st = 1;
  TANDEM_RETURN_IF_ERROR(as_index(step, &st));
  if (st == 0) return InvalidArgumentError("slice step cannot be zero");
  std::vector<char32_t> cps;
  int64_t size;
  if (obj.is_list()) {
    size = static_cast<int64_t>(obj.list().items.size());
  } else if (obj.is_string()) {
    cps = DecodeUtf8(obj.str());
    size = static_cast<int64_t>(cps.size());
  } else if (obj.is_undefined()) {
    return Value();
  } else {
    return InvalidArgumentError("'" + std::string(obj.TypeName()) + "' object is not subscriptable");
  }
  int64_t lo = st > 0 ? 0 : size - 1;
  int64_t hi = st > 0 ? size : -1;
  bool has_lo = start != nullptr && !start->is_none();
  bool has_hi = stop != nullptr && !stop->is_none();
  TANDEM_RETURN_IF_ERROR(as_index(start, &lo));
  TANDEM_RETURN_IF_ERROR(as_index(stop, &hi));
  if (has_lo) lo = ClampSliceIndex(lo, size, st);
  if (has_hi) hi = ClampSliceIndex(hi, size, st);
  TANDEM_RETURN_IF_ERROR(ctx.Charge(size));
  std::vector<Value> items;
  std::string text;
  uint64_t count = 0;
  if (st > 0 && lo < hi) count = static_cast<uint64_t>(hi - lo - 1) / static_cast<uint64_t>(st) + 1;
  if (st < 0 && lo > hi) count = static_cast<uint64_t>(lo - hi - 1) / (0 - static_cast<uint64_t>(st)) + 1;
  for (uint64_t k = 0; k < count; ++k) {
    int64_t i = lo + static_cast<int64_t>(k) * st;
    if (obj.is_list()) {
      items.push_back(obj.list().items[static_cast<size_t>(i)]);
    } else {
      AppendUtf8(cps[static_cast<size_t>(i)], &text);
    }
  }
  if (obj.is_string()) return Value::String(std::move(text));
  return Value::List(std::move(items), obj.list().is_tuple);
}

StatusOr<std::vector<Value>> Iterate(RenderContext& ctx, const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::kUndefined: return out;
    case Value::Kind::kList:
      TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(v.list().items.size())));
      return v.list().items;
    case Value::Kind::kDict:
      TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(v.dict().size())));
      for (const auto& [key, value] : v.dict().entries()) out.push_back(Value::String(key));
      return out;
    case Value::Kind::kString:
      TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(v.str().size())));
      for (char32_t cp : DecodeUtf8(v.str())) {
        std::string s;
        AppendUtf8(cp, &s);
        out.push_back(Value::String(std::move(s)));
      }
      return out;
    default:
      return InvalidArgumentError("'" + std::string(v.TypeName()) + "' object is not iterable");
  }
}

}  // namespace tandem::jinja
