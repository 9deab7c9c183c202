// Jinja2 builtin filters (the subset chat templates use), with Jinja2 3.1 semantics and
// Hugging Face's tojson (json.dumps with ensure_ascii=False, no key sorting, no escaping).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/utf8.h"
#include "template/jinja_builtins.h"

namespace tandem::jinja {
namespace {

using FilterFn = StatusOr<Value> (*)(RenderContext&, const Value&, const Args&);

StatusOr<std::string> StrArg(const Args& args, size_t index, std::string_view name, std::string fallback) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || v->is_undefined()) return fallback;
  return ToPyStr(*v);
}

bool BoolArg(const Args& args, size_t index, std::string_view name, bool fallback) {
  const Value* v = args.Get(index, name);
  return v == nullptr || v->is_undefined() ? fallback : v->Truthy();
}

// Jinja's make_attrgetter: "a.b.0" walks dict keys and integer indices.
Value GetAttrPath(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = numeric ? GetItem(cur, Value::Int(std::atoll(part.c_str()))) : GetAttr(cur, part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

// Sort/compare key: lower-cased strings unless case-sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::String(PyLower(v.str()));
  return v;
}

StatusOr<std::vector<Value>> Items(RenderContext& ctx, const Value& v) { return Iterate(ctx, v); }

StatusOr<Value> FTrim(RenderContext&, const Value& in, const Args& args) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  const Value* chars = args.Get(0, "chars");
  if (chars != nullptr && chars->is_string()) return Value::String(PyStrip(s, &chars->str(), true, true));
  return Value::String(PyStrip(s, nullptr, true, true));
}

StatusOr<Value> FLength(RenderContext&, const Value& in, const Args&) {
  switch (in.kind()) {
    case Value::Kind::kString: return Value::Int(static_cast<int64_t>(Utf8Length(in.str())));
    case Value::Kind::kList: return Value::Int(static_cast<int64_t>(in.list().items.size()));
    case Value::Kind::kDict: return Value::Int(static_cast<int64_t>(in.dict().size()));
    case Value::Kind::kUndefined: return Value::Int(0);
    default: return InvalidArgumentError("object of type '" + std::string(in.TypeName()) + "' has no len()");
  }
}

StatusOr<Value> FUpper(RenderContext&, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  return Value::String(PyUpper(std::move(s)));
}

StatusOr<Value> FLower(RenderContext&, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  return Value::String(PyLower(std::move(s)));
}

// First code point upper-cased, the rest lower-cased (Python str.capitalize).
StatusOr<Value> FCapitalize(RenderContext&, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  std::vector<char32_t> cps = DecodeUtf8(s);
  if (cps.empty()) return Value::String("");
  std::string first, rest;
  AppendUtf8(cps[0], &first);
  for (size_t i = 1; i < cps.size(); ++i) AppendUtf8(cps[i], &rest);
  return Value::String(PyUpper(first) + PyLower(rest));
}

// Jinja's title: split on runs of [-\s({[<], then item[0].upper() + item[1:].lower().
StatusOr<Value> FTitle(RenderContext&, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  auto is_sep = [](char32_t c) {
    return c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
           c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::string out;
  bool item_start = true;
  bool prev_sep = false;
  std::vector<char32_t> cps = DecodeUtf8(s);
  for (size_t i = 0; i < cps.size(); ++i) {
    bool sep = is_sep(cps[i]);
    if (i > 0 && sep != prev_sep) item_start = true;
    std::string one;
    AppendUtf8(cps[i], &one);
    out += item_start ? PyUpper(one) : PyLower(one);
    item_start = false;
    prev_sep = sep;
  }
  return Value::String(std::move(out));
}

StatusOr<Value> FReplace(RenderContext& ctx, const Value& in, const Args& args) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  TANDEM_ASSIGN_OR_RETURN(std::string from, StrArg(args, 0, "old", ""));
  TANDEM_ASSIGN_OR_RETURN(std::string to, StrArg(args, 1, "new", ""));
  const Value* count_v = args.Get(2, "count");
  int64_t count = count_v != nullptr && count_v->is_int() ? count_v->int_value() : -1;
  Args method_args;
  method_args.positional = {Value::String(from), Value::String(to), Value::Int(count)};
  bool handled = false;
  return CallMethod(ctx, Value::String(std::move(s)), "replace", method_args, &handled);
}

StatusOr<Value> FToJson(RenderContext& ctx, const Value& in, const Args& args) {
  JsonFormat format;
  if (const Value* indent = args.Get(1, "indent"); indent != nullptr && !indent->is_none() && !indent->is_undefined()) {
    format.pretty = true;
    if (indent->is_string()) {
      format.indent_unit = indent->str();
    } else if (indent->is_int()) {
      format.indent_unit.assign(static_cast<size_t>(std::clamp<int64_t>(indent->int_value(), 0, 64)), ' ');
    } else {
      return InvalidArgumentError("tojson indent must be an int or a string");
    }
  }
  if (const Value* seps = args.Get(2, "separators"); seps != nullptr && seps->is_list()) {
    const auto& parts = seps->list().items;
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
      return InvalidArgumentError("tojson separators must be two strings");
    }
    format.item_separator = parts[0].str();
    format.key_separator = parts[1].str();
  }
  format.sort_keys = BoolArg(args, 3, "sort_keys", false);
  std::string out;
  TANDEM_RETURN_IF_ERROR(AppendJson(in, format, &out));
  TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(out.size())));
  return Value::String(std::move(out));
}

StatusOr<Value> FString(RenderContext&, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  return Value::String(std::move(s));
}

// Python int(str): optional sign, digits with single underscores, surrounding whitespace.
bool ParsePyInt(const std::string& text, int64_t base, int64_t* out) {
  std::string s = PyStrip(text, nullptr, true, true);
  std::string digits;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) digits.push_back(s[i++]);
  if (i >= s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && i + 1 < s.size() && s[i + 1] != '_' && digits.size() > 0) continue;
    digits.push_back(s[i]);
  }
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
  if (end == digits.c_str() || *end != '\0' || errno == ERANGE) return false;
  *out = v;
  return true;
}

bool ParsePyFloat(const std::string& text, double* out) {
  std::string s = PyStrip(text, nullptr, true, true);
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return false;
  *out = v;
  return true;
}

StatusOr<Value> FInt(RenderContext&, const Value& in, const Args& args) {
  const Value* fallback = args.Get(0, "default");
  Value def = fallback != nullptr ? *fallback : Value::Int(0);
  const Value* base_v = args.Get(1, "base");
  int64_t base = base_v != nullptr && base_v->is_int() ? base_v->int_value() : 10;
  if (base < 2 || base > 36) base = 10;
  if (in.is_int() || in.is_bool()) return Value::Int(in.AsInt());
  double d = 0;
  if (in.is_float()) {
    d = in.float_value();
  } else if (in.is_string()) {
    int64_t i = 0;
    if (ParsePyInt(in.str(), base, &i)) return Value::Int(i);
    if (!ParsePyFloat(in.str(), &d)) return def;
  } else {
    return def;
  }
  if (std::isnan(d) || std::isinf(d)) return InvalidArgumentError("cannot convert float NaN or infinity to integer");
  if (std::fabs(d) >= 9.2e18) return OutOfRangeError("integer too large");
  return Value::Int(static_cast<int64_t>(d));
}

StatusOr<Value> FFloat(RenderContext&, const Value& in, const Args& args) {
  const Value* fallback = args.Get(0, "default");
  Value def = fallback != nullptr ? *fallback : Value::Float(0.0);
  if (in.is_number()) return Value::Float(in.AsDouble());
  double d = 0;
  if (in.is_string() && ParsePyFloat(in.str(), &d)) return Value::Float(d);
  return def;
}

StatusOr<Value> FList(RenderContext& ctx, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  return Value::List(std::move(items));
}

StatusOr<Value> FJoin(RenderContext& ctx, const Value& in, const Args& args) {
  TANDEM_ASSIGN_OR_RETURN(std::string sep, StrArg(args, 0, "d", ""));
  const Value* attribute = args.Get(1, "attribute");
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    const Value item = attribute != nullptr && attribute->is_string() ? GetAttrPath(items[i], attribute->str()) : items[i];
    TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(item));
    out += s;
    TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(s.size() + sep.size())));
    if (out.size() > ctx.limits().max_output_bytes) return ResourceExhaustedError("join result too long");
  }
  return Value::String(std::move(out));
}

StatusOr<Value> FFirst(RenderContext& ctx, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  return items.empty() ? Value() : items.front();
}

StatusOr<Value> FLast(RenderContext& ctx, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  return items.empty() ? Value() : items.back();
}

StatusOr<Value> FDefault(RenderContext&, const Value& in, const Args& args) {
  const Value* fallback = args.Get(0, "default_value");
  bool boolean = BoolArg(args, 1, "boolean", false);
  if (in.is_undefined() || (boolean && !in.Truthy())) {
    return fallback != nullptr ? *fallback : Value::String("");
  }
  return in;
}

StatusOr<Value> FItems(RenderContext& ctx, const Value& in, const Args&) {
  if (in.is_undefined()) return Value::List();
  if (!in.is_dict()) return InvalidArgumentError("items filter needs a mapping, got " + std::string(in.TypeName()));
  std::vector<Value> out;
  TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(in.dict().size())));
  for (const auto& [k, v] : in.dict().entries()) out.push_back(Value::List({Value::String(k), v}, true));
  return Value::List(std::move(out));
}

// select / reject / selectattr / rejectattr.
StatusOr<Value> SelectImpl(RenderContext& ctx, const Value& in, const Args& args, bool by_attr, bool keep) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  size_t next = 0;
  std::string attribute;
  if (by_attr) {
    if (args.positional.empty() || !args.positional[0].is_string()) return InvalidArgumentError("missing attribute name");
    attribute = args.positional[0].str();
    next = 1;
  }
  std::string test;
  Args test_args;
  if (next < args.positional.size()) {
    TANDEM_ASSIGN_OR_RETURN(test, ToPyStr(args.positional[next]));
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next + 1), args.positional.end());
  }
  std::vector<Value> out;
  for (const Value& item : items) {
    Value probe = by_attr ? GetAttrPath(item, attribute) : item;
    bool pass;
    if (test.empty()) {
      pass = probe.Truthy();
    } else {
      TANDEM_ASSIGN_OR_RETURN(pass, CallTest(ctx, test, probe, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::List(std::move(out));
}

StatusOr<Value> FSelect(RenderContext& c, const Value& in, const Args& a) { return SelectImpl(c, in, a, false, true); }
StatusOr<Value> FReject(RenderContext& c, const Value& in, const Args& a) { return SelectImpl(c, in, a, false, false); }
StatusOr<Value> FSelectAttr(RenderContext& c, const Value& in, const Args& a) { return SelectImpl(c, in, a, true, true); }
StatusOr<Value> FRejectAttr(RenderContext& c, const Value& in, const Args& a) { return SelectImpl(c, in, a, true, false); }

StatusOr<Value> FMap(RenderContext& ctx, const Value& in, const Args& args) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  std::vector<Value> out;
  if (const Value* attribute = args.Get(99, "attribute"); attribute != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(std::string path, ToPyStr(*attribute));
    const Value* fallback = args.Get(99, "default");
    for (const Value& item : items) {
      Value v = GetAttrPath(item, path);
      out.push_back(v.is_undefined() && fallback != nullptr ? *fallback : v);
    }
    return Value::List(std::move(out));
  }
  if (args.positional.empty()) return InvalidArgumentError("map needs a filter name or attribute=");
  TANDEM_ASSIGN_OR_RETURN(std::string filter, ToPyStr(args.positional[0]));
  Args filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.kwargs = args.kwargs;
  for (const Value& item : items) {
    TANDEM_ASSIGN_OR_RETURN(Value v, CallFilter(ctx, filter, item, filter_args));
    out.push_back(std::move(v));
  }
  return Value::List(std::move(out));
}

StatusOr<Value> FSafe(RenderContext&, const Value& in, const Args&) {
  if (in.is_string()) return in;
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  return Value::String(std::move(s));
}

StatusOr<Value> FEscape(RenderContext&, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value::String(std::move(out));
}

// Jinja's indent: lines after the first (and the first with first=True) get the prefix;
// blank lines only with blank=True.
StatusOr<Value> FIndent(RenderContext& ctx, const Value& in, const Args& args) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  std::string prefix;
  const Value* width = args.Get(0, "width");
  if (width != nullptr && width->is_string()) {
    prefix = width->str();
  } else {
    int64_t n = width != nullptr && width->is_int() ? width->int_value() : 4;
    prefix.assign(static_cast<size_t>(std::clamp<int64_t>(n, 0, 256)), ' ');
  }
  bool first = BoolArg(args, 1, "first", false);
  bool blank = BoolArg(args, 2, "blank", false);
  std::vector<std::string> lines;  // Python splitlines() on s + "\n"
  s += "\n";
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' || c == '\x1e') {
      lines.push_back(s.substr(start, i - start));
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    bool add = (i > 0 || first) && (blank || !lines[i].empty() || (i == 0 && first));
    if (add) out += prefix;
    out += lines[i];
    TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(prefix.size() + lines[i].size())));
  }
  if (out.size() > ctx.limits().max_output_bytes) return ResourceExhaustedError("indent result too long");
  return Value::String(std::move(out));
}

StatusOr<Value> FRound(RenderContext&, const Value& in, const Args& args) {
  const Value* precision_v = args.Get(0, "precision");
  int64_t precision = precision_v != nullptr && precision_v->is_int() ? precision_v->int_value() : 0;
  precision = std::clamp<int64_t>(precision, -30, 30);
  TANDEM_ASSIGN_OR_RETURN(std::string method, StrArg(args, 1, "method", "common"));
  if (!in.is_number()) return InvalidArgumentError("round needs a number");
  double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil" || method == "floor") {
    double x = in.AsDouble() * scale;
    return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (method != "common") return InvalidArgumentError("method must be common, ceil or floor");
  if (!in.is_float()) {
    if (precision >= 0) return Value::Int(in.AsInt());
    return Value::Int(static_cast<int64_t>(std::nearbyint(static_cast<double>(in.AsInt()) * scale) / scale));
  }
  double x = in.float_value();
  if (std::isnan(x) || std::isinf(x)) return Value::Float(x);
  if (precision < 0) return Value::Float(std::nearbyint(x * scale) / scale);
  // printf rounds the exact binary value half-to-even, as Python's round() does.
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
  return Value::Float(std::strtod(buf, nullptr));
}

StatusOr<Value> FAbs(RenderContext&, const Value& in, const Args&) {
  if (in.is_float()) return Value::Float(std::fabs(in.float_value()));
  if (in.is_int() || in.is_bool()) {
    if (in.AsInt() < 0) return Negate(in);
    return Value::Int(in.AsInt());
  }
  return InvalidArgumentError("bad operand type for abs(): '" + std::string(in.TypeName()) + "'");
}

StatusOr<Value> FUnique(RenderContext& ctx, const Value& in, const Args& args) {
  bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  const Value* attribute = args.Get(1, "attribute");
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  std::vector<Value> out, seen;
  for (const Value& item : items) {
    Value key = SortKey(attribute != nullptr && attribute->is_string() ? GetAttrPath(item, attribute->str()) : item,
                        case_sensitive);
    bool dup = false;
    TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(seen.size())));
    for (const Value& s : seen) {
      TANDEM_ASSIGN_OR_RETURN(dup, ValuesEqual(s, key));
      if (dup) break;
    }
    if (dup) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::List(std::move(out));
}

StatusOr<Value> FReverse(RenderContext& ctx, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  std::reverse(items.begin(), items.end());
  if (!in.is_string()) return Value::List(std::move(items));
  std::string out;
  for (const Value& v : items) out += v.str();
  return Value::String(std::move(out));
}

// Stable sort of `items` by `keys` (same length); comparison errors propagate.
Status SortByKeys(RenderContext& ctx, std::vector<Value>* items, std::vector<Value> keys, bool reverse) {
  std::vector<size_t> order(items->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status error;
  TANDEM_RETURN_IF_ERROR(ctx.Charge(static_cast<int64_t>(order.size()) * 8));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!error.ok()) return false;
    StatusOr<bool> less = reverse ? ValueLess(keys[b], keys[a]) : ValueLess(keys[a], keys[b]);
    if (!less.ok()) {
      error = less.status();
      return false;
    }
    return *less;
  });
  TANDEM_RETURN_IF_ERROR(error);
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back((*items)[i]);
  *items = std::move(sorted);
  return Status::Ok();
}

StatusOr<Value> FSort(RenderContext& ctx, const Value& in, const Args& args) {
  bool reverse = BoolArg(args, 0, "reverse", false);
  bool case_sensitive = BoolArg(args, 1, "case_sensitive", false);
  const Value* attribute = args.Get(2, "attribute");
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  std::vector<Value> keys;
  for (const Value& item : items) {
    keys.push_back(SortKey(attribute != nullptr && attribute->is_string() ? GetAttrPath(item, attribute->str()) : item,
                           case_sensitive));
  }
  TANDEM_RETURN_IF_ERROR(SortByKeys(ctx, &items, std::move(keys), reverse));
  return Value::List(std::move(items));
}

StatusOr<Value> FDictSort(RenderContext& ctx, const Value& in, const Args& args) {
  bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  TANDEM_ASSIGN_OR_RETURN(std::string by, StrArg(args, 1, "by", "key"));
  bool reverse = BoolArg(args, 2, "reverse", false);
  TANDEM_ASSIGN_OR_RETURN(Value pairs, FItems(ctx, in, Args()));
  std::vector<Value> items = pairs.list().items;
  std::vector<Value> keys;
  for (const Value& p : items) keys.push_back(SortKey(p.list().items[by == "value" ? 1 : 0], case_sensitive));
  TANDEM_RETURN_IF_ERROR(SortByKeys(ctx, &items, std::move(keys), reverse));
  return Value::List(std::move(items));
}

StatusOr<Value> MinMax(RenderContext& ctx, const Value& in, const Args& args, bool want_max) {
  bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  const Value* attribute = args.Get(1, "attribute");
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  if (items.empty()) return Value();
  std::vector<Value> keys;
  for (const Value& item : items) {
    keys.push_back(SortKey(attribute != nullptr && attribute->is_string() ? GetAttrPath(item, attribute->str()) : item,
                           case_sensitive));
  }
  TANDEM_RETURN_IF_ERROR(SortByKeys(ctx, &items, std::move(keys), false));
  return want_max ? items.back() : items.front();
}

StatusOr<Value> FMin(RenderContext& c, const Value& in, const Args& a) { return MinMax(c, in, a, false); }
StatusOr<Value> FMax(RenderContext& c, const Value& in, const Args& a) { return MinMax(c, in, a, true); }

StatusOr<Value> FSum(RenderContext& ctx, const Value& in, const Args& args) {
  const Value* attribute = args.Get(0, "attribute");
  const Value* start = args.Get(1, "start");
  Value total = start != nullptr ? *start : Value::Int(0);
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Items(ctx, in));
  for (const Value& item : items) {
    Value v = attribute != nullptr && attribute->is_string() ? GetAttrPath(item, attribute->str()) : item;
    TANDEM_ASSIGN_OR_RETURN(total, BinaryOp(ctx, "+", total, v));
  }
  return total;
}

StatusOr<Value> FWordCount(RenderContext&, const Value& in, const Args&) {
  TANDEM_ASSIGN_OR_RETURN(std::string s, ToPyStr(in));
  int64_t count = 0;
  bool in_word = false;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    bool word = u >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (word && !in_word) ++count;
    in_word = word;
  }
  return Value::Int(count);
}

StatusOr<Value> FAttr(RenderContext&, const Value& in, const Args& args) {
  TANDEM_ASSIGN_OR_RETURN(std::string name, StrArg(args, 0, "name", ""));
  return GetAttr(in, name);
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", FAbs},           {"attr", FAttr},         {"capitalize", FCapitalize},
    {"count", FLength},      {"d", FDefault},         {"default", FDefault},
    {"dictsort", FDictSort}, {"e", FEscape},          {"escape", FEscape},
    {"first", FFirst},       {"float", FFloat},       {"forceescape", FEscape},
    {"indent", FIndent},     {"int", FInt},           {"items", FItems},
    {"join", FJoin},         {"last", FLast},         {"length", FLength},
    {"list", FList},         {"lower", FLower},       {"map", FMap},
    {"max", FMax},           {"min", FMin},           {"reject", FReject},
    {"rejectattr", FRejectAttr}, {"replace", FReplace}, {"reverse", FReverse},
    {"round", FRound},       {"safe", FSafe},         {"select", FSelect},
    {"selectattr", FSelectAttr}, {"sort", FSort},     {"string", FString},
    {"sum", FSum},           {"title", FTitle},       {"tojson", FToJson},
    {"trim", FTrim},         {"unique", FUnique},     {"upper", FUpper},
    {"wordcount", FWordCount},
};

}  // namespace

StatusOr<Value> CallFilter(RenderContext& ctx, std::string_view name, const Value& input, const Args& args) {
  for (const FilterEntry& e : kFilters) {
    if (e.name == name) return e.fn(ctx, input, args);
  }
  return InvalidArgumentError("no filter named '" + std::string(name) + "'");
}

}  // namespace tandem::jinja
