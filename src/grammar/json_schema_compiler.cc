#include "grammar/json_schema_compiler.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "grammar/number_range.h"
#include "grammar/one_of_check.h"
#include "grammar/regex_compiler.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxKeyChars = 64;  // characters of a key the schema does not name

const std::set<std::string>& Annotations() {
  static const std::set<std::string> k = {"title",    "description", "default",  "examples", "$schema",
                                          "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
                                          "$defs",    "definitions"};
  return k;
}

const std::set<std::string>& Supported() {
  static const std::set<std::string> k = {
      "type",      "properties", "required",  "additionalProperties", "enum",      "const",
      "items",     "minItems",   "maxItems",  "anyOf",                "oneOf",     "allOf",
      "$ref",      "minLength",  "maxLength", "pattern",              "format",    "minimum",
      "maximum",   "exclusiveMinimum",        "exclusiveMaximum",     "maxProperties"};
  return k;
}

// Regexes for `format` (output forms the jsonschema format checkers accept).
const char* FormatRegex(const std::string& f) {
  if (f == "date") return R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8]))";
  if (f == "time") return R"(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))";
  if (f == "date-time") {
    return R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))";
  }
  if (f == "email") return R"([a-zA-Z0-9_%+-]{1,20}(\.[a-zA-Z0-9_%+-]{1,20})?@[a-zA-Z0-9]{1,20}(\.[a-zA-Z0-9]{1,20})?\.[a-zA-Z]{2,6})";
  if (f == "uuid") return R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})";
  if (f == "ipv4") return R"(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))";
  if (f == "ipv6") return R"(([0-9a-f]{1,4}:){7}[0-9a-f]{1,4})";
  if (f == "hostname") return R"([a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?){0,4})";
  if (f == "uri") return R"(https?://[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?(\.[a-z0-9]{1,30}){0,4}(/[a-zA-Z0-9._~-]{1,30}){0,8})";
  return nullptr;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, std::string prefix, GrammarBuilder& b, const JsonSchemaOptions& options)
      : root_(root), prefix_(std::move(prefix)), b_(b), options_(options) {}

  StatusOr<Expr> Compile(const Json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) return Unsupported("false", path, "a schema that matches nothing");
      return Ref(AnyValue());
    }
    if (!s.is_object()) return InvalidArgumentError("the schema at '" + Path(path) + "' is not an object");
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (Annotations().count(it.key()) == 0 && Supported().count(it.key()) == 0) {
        return InvalidArgumentError("unsupported JSON Schema keyword '" + it.key() + "' at '" + Path(path) + "'");
      }
    }
    if (s.contains("$ref")) return CompileRef(s, path);
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1 || s.size() > 1 + CountAnnotations(s)) {
        return Unsupported("allOf", path, "allOf is supported with exactly one schema and no sibling keywords");
      }
      return Compile(all[0], path + "/allOf/0");
    }
    if (s.contains("const")) return Expr::Lit(s["const"].dump());
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return Bad("enum", path, "must be a non-empty array");
      std::vector<Expr> alts;
      for (const Json& v : s["enum"]) alts.push_back(Expr::Lit(v.dump()));
      return Expr::Alt(std::move(alts));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const Json& subs = s[key];
      if (!subs.is_array() || subs.empty()) return Bad(key, path, "must be a non-empty array");
      if (std::string(key) == "oneOf") {
        // The grammar lets any alternative through: only if no output can match two is
        // every output valid for oneOf (one_of_check.h).
        for (size_t i = 0; i < subs.size(); ++i) {
          for (size_t j = i + 1; j < subs.size(); ++j) {
            if (!ProvablyDisjoint(subs[i], subs[j], root_)) {
              return Unsupported("oneOf", path,
                                 "alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                                     " may both match (oneOf needs exactly one); use anyOf, or make them differ "
                                     "in type, in a required const property, or in a required property the other "
                                     "forbids");
            }
          }
        }
      }
      std::vector<Expr> alts;
      for (size_t i = 0; i < subs.size(); ++i) {
        TANDEM_ASSIGN_OR_RETURN(Expr e, Compile(subs[i], path + "/" + key + "/" + std::to_string(i)));
        alts.push_back(std::move(e));
      }
      return Expr::Alt(std::move(alts));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& x : t) {
          if (!x.is_string()) return Bad("type", path, "must be a string or a list of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return Bad("type", path, "must be a string or a list of strings");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) {
      types.push_back("string");
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types.push_back("number");
    } else {
      return Ref(AnyValue());
    }
    std::vector<Expr> alts;
    for (const std::string& t : types) {
      StatusOr<Expr> e = CompileType(s, t, path);
      if (!e.ok()) return e.status();
      alts.push_back(std::move(*e));
    }
    return Expr::Alt(std::move(alts));
  }

  // The rule for any JSON value.
  int AnyValue() {
    if (any_value_ >= 0) return any_value_;
    any_value_ = b_.Declare(prefix_ + "value");
    const int object = b_.Declare(prefix_ + "object"), array = b_.Declare(prefix_ + "array");
    const Expr v = Expr::Ref(any_value_);
    b_.Define(any_value_, Expr::Alt({Expr::Ref(object), Expr::Ref(array), Expr::Ref(String()), Expr::Ref(Number()),
                                     Expr::Lit("true"), Expr::Lit("false"), Expr::Lit("null")}));
    Expr member = Expr::Seq({Expr::Ref(Key()), Pad(), Expr::Lit(":"), Ws(), v, Pad()});
    b_.Define(object, Expr::Seq({Expr::Lit("{"), Pad(),
                                 Expr::Opt(Expr::Seq({member, Expr::Star(Expr::Seq({Expr::Lit(","), Ws(), member}))})),
                                 Expr::Lit("}")}));
    Expr item = Expr::Seq({v, Pad()});
    b_.Define(array, Expr::Seq({Expr::Lit("["), Pad(),
                                Expr::Opt(Expr::Seq({item, Expr::Star(Expr::Seq({Expr::Lit(","), Ws(), item}))})),
                                Expr::Lit("]")}));
    return any_value_;
  }

  int AnyObject() {
    AnyValue();
    return b_.Declare(prefix_ + "object");
  }

 private:
  static std::string Path(const std::string& path) { return path.empty() ? "/" : path; }
  static size_t CountAnnotations(const Json& s) {
    size_t n = 0;
    for (auto it = s.begin(); it != s.end(); ++it) n += Annotations().count(it.key());
    return n;
  }
  static Status Unsupported(const std::string& key, const std::string& path, const std::string& why) {
    return InvalidArgumentError("unsupported JSON Schema keyword '" + key + "' at '" + Path(path) + "': " + why);
  }
  static Status Bad(const std::string& key, const std::string& path, const std::string& why) {
    return InvalidArgumentError("invalid JSON Schema: '" + key + "' at '" + Path(path) + "' " + why);
  }
  static Expr Ref(int rule) { return Expr::Ref(rule); }
  // Whitespace after ':' and ',': one optional space, or any JSON whitespace.
  Expr Ws() { return options_.any_whitespace ? Expr::Ref(AnyWhitespace()) : Expr::Opt(Expr::Lit(" ")); }
  // Whitespace after '{' and '[' and after a value (before ',', ':', '}' and ']'): none,
  // or any. Never two in a row (a value starts and ends with a non-space), so the
  // grammar stays unambiguous.
  Expr Pad() { return options_.any_whitespace ? Expr::Ref(AnyWhitespace()) : Expr::Empty(); }
  int AnyWhitespace() {
    if (ws_ >= 0) return ws_;
    ws_ = b_.Declare(prefix_ + "ws");
    b_.Define(ws_, Expr::Star(Expr::Class({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}})));
    return ws_;
  }

  int Char() {
    if (char_ >= 0) return char_;
    char_ = b_.Declare(prefix_ + "char");
    Expr hex = Expr::Class({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
    b_.Define(char_, Expr::Alt({Expr::Class({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true),
                                Expr::Seq({Expr::Lit("\\"), Expr::Alt({Expr::Class({{'"', '"'}, {'\\', '\\'}, {'/', '/'},
                                                                                    {'b', 'b'}, {'f', 'f'}, {'n', 'n'},
                                                                                    {'r', 'r'}, {'t', 't'}}),
                                                                       Expr::Seq({Expr::Lit("u"), Expr::Repeat(hex, 4, 4)})})})}));
    return char_;
  }

  int String() {
    if (string_ >= 0) return string_;
    string_ = b_.Declare(prefix_ + "string");
    b_.Define(string_, Expr::Seq({Expr::Lit("\""), Expr::Star(Expr::Ref(Char())), Expr::Lit("\"")}));
    return string_;
  }

  // Keys of properties the schema does not name: at most kMaxKeyChars characters (any
  // key is valid; the bound keeps a model from writing one key forever).
  int Key() {
    if (key_ >= 0) return key_;
    key_ = b_.Declare(prefix_ + "key");
    b_.Define(key_, Expr::Seq({Expr::Lit("\""), Expr::Repeat(Expr::Ref(Char()), 0, kMaxKeyChars), Expr::Lit("\"")}));
    return key_;
  }

  int Number() {
    if (number_ >= 0) return number_;
    number_ = b_.Declare(prefix_ + "number");
    b_.Define(number_, Expr::Seq({Expr::Opt(Expr::Lit("-")), NonNegativeRange(0, -1), Fraction()}));
    return number_;
  }

  static Expr Fraction() { return Expr::Opt(Expr::Seq({Expr::Lit("."), Digits(1, kMaxDigits)})); }

  StatusOr<Expr> CompileRef(const Json& s, const std::string& path) {
    if (!s["$ref"].is_string()) return Bad("$ref", path, "must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    if (s.size() > 1 + CountAnnotations(s)) return Unsupported("$ref", path, "$ref with sibling keywords");
    auto found = refs_.find(ref);
    if (found != refs_.end()) return Expr::Ref(found->second);
    const Json* target = nullptr;
    if (ref == "#") {
      target = &root_;
    } else if (ref.rfind("#/", 0) == 0) {
      try {
        target = &root_.at(Json::json_pointer(ref.substr(1)));
      } catch (const std::exception&) {
        target = nullptr;
      }
    }
    if (target == nullptr) return Bad("$ref", path, "'" + ref + "' does not resolve (only local refs: #, #/$defs/...)");
    const int rule = b_.Fresh(prefix_ + "ref");
    refs_[ref] = rule;  // before compiling: recursive schemas refer to the rule
    TANDEM_ASSIGN_OR_RETURN(Expr body, Compile(*target, ref.substr(1)));
    b_.Define(rule, std::move(body));
    return Expr::Ref(rule);
  }

  StatusOr<Expr> CompileType(const Json& s, const std::string& t, const std::string& path) {
    if (t == "null") return Expr::Lit("null");
    if (t == "boolean") return Expr::Alt({Expr::Lit("true"), Expr::Lit("false")});
    if (t == "string") return CompileString(s, path);
    if (t == "integer" || t == "number") return CompileNumber(s, t == "integer", path);
    if (t == "array") return CompileArray(s, path);
    if (t == "object") return CompileObject(s, path);
    return Bad("type", path, "has unknown type '" + t + "'");
  }

  StatusOr<int64_t> Count(const Json& s, const char* key, const std::string& path, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return Bad(key, path, "must be a non-negative integer");
    if (v.get<int64_t>() > 1000) return Unsupported(key, path, "counts above 1000");
    return v.get<int64_t>();
  }

  StatusOr<Expr> CompileString(const Json& s, const std::string& path) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format") || s.contains("pattern")) {
      if (s.contains("format") && s.contains("pattern")) return Unsupported("format", path, "format together with pattern");
      if (has_len) return Unsupported(s.contains("format") ? "format" : "pattern", path, "together with minLength/maxLength");
      std::string pattern;
      bool anchored_start = true, anchored_end = true;
      if (s.contains("format")) {
        if (!s["format"].is_string()) return Bad("format", path, "must be a string");
        const char* re = FormatRegex(s["format"].get<std::string>());
        if (re == nullptr) return Unsupported("format", path, "format '" + s["format"].get<std::string>() + "' is not supported");
        pattern = re;
      } else {
        if (!s["pattern"].is_string()) return Bad("pattern", path, "must be a string");
        pattern = s["pattern"].get<std::string>();
      }
      RegexOptions options;
      options.json_string = true;
      StatusOr<RegexExpr> re = CompileRegex(pattern, options);
      if (!re.ok()) return InvalidArgumentError("'pattern' at '" + Path(path) + "': " + re.status().message());
      if (s.contains("pattern")) {
        anchored_start = re->anchored_start;
        anchored_end = re->anchored_end;
      }
      // JSON Schema patterns search: an unanchored side may have anything around it.
      Expr any = Expr::Star(Expr::Ref(Char()));
      std::vector<Expr> parts{Expr::Lit("\"")};
      if (!anchored_start) parts.push_back(any);
      parts.push_back(std::move(re->expr));
      if (!anchored_end) parts.push_back(any);
      parts.push_back(Expr::Lit("\""));
      return Expr::Seq(std::move(parts));
    }
    TANDEM_ASSIGN_OR_RETURN(int64_t min, Count(s, "minLength", path, 0));
    TANDEM_ASSIGN_OR_RETURN(int64_t max, Count(s, "maxLength", path, kUnbounded));
    if (max >= 0 && max < min) return Bad("maxLength", path, "is below minLength");
    if (!has_len) return Expr::Ref(String());
    return Expr::Seq({Expr::Lit("\""), Expr::Repeat(Expr::Ref(Char()), static_cast<int>(min), static_cast<int>(max)),
                      Expr::Lit("\"")});
  }

  // A bound: nullopt when absent; InvalidArgument unless a number.
  StatusOr<std::optional<double>> Bound(const Json& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return std::optional<double>();
    const Json& v = s[key];
    if (!v.is_number()) return Bad(key, path, "must be a number");
    const double d = v.get<double>();
    if (std::fabs(d) > 1e15) return Unsupported(key, path, "bounds beyond 1e15");
    return std::optional<double>(d);
  }

  StatusOr<Expr> CompileNumber(const Json& s, bool integer, const std::string& path) {
    TANDEM_ASSIGN_OR_RETURN(std::optional<double> min, Bound(s, "minimum", path));
    TANDEM_ASSIGN_OR_RETURN(std::optional<double> max, Bound(s, "maximum", path));
    TANDEM_ASSIGN_OR_RETURN(std::optional<double> xmin, Bound(s, "exclusiveMinimum", path));
    TANDEM_ASSIGN_OR_RETURN(std::optional<double> xmax, Bound(s, "exclusiveMaximum", path));
    if (!integer) {
      // Decimal bounds, exact (number_range.h): the tighter of minimum / exclusiveMinimum
      // (exclusive when equal), likewise for the maximum.
      auto tighter = [](std::optional<double> inclusive, std::optional<double> exclusive, bool lower) {
        std::optional<NumberBound> b;
        if (inclusive) b = NumberBound{*inclusive, false};
        if (exclusive && (!b || (lower ? *exclusive >= b->value : *exclusive <= b->value))) {
          b = NumberBound{*exclusive, true};
        }
        return b;
      };
      std::optional<Expr> e = DecimalRange(tighter(min, xmin, true), tighter(max, xmax, false));
      if (!e) return Bad("minimum", path, "leaves no value (the range is empty)");
      return std::move(*e);
    }
    std::optional<int64_t> lo, hi;
    // Integer bounds, exact (a non-integer bound rounds inwards).
    auto lower = [&](double v, bool exclusive) {
      const int64_t b = exclusive ? static_cast<int64_t>(std::floor(v)) + 1 : static_cast<int64_t>(std::ceil(v));
      lo = lo ? std::max(*lo, b) : b;
    };
    auto upper = [&](double v, bool exclusive) {
      const int64_t b = exclusive ? static_cast<int64_t>(std::ceil(v)) - 1 : static_cast<int64_t>(std::floor(v));
      hi = hi ? std::min(*hi, b) : b;
    };
    if (min) lower(*min, false);
    if (xmin) lower(*xmin, true);
    if (max) upper(*max, false);
    if (xmax) upper(*xmax, true);
    if (lo && hi && *lo > *hi) return Bad("minimum", path, "leaves no value (the range is empty)");
    // value = sign, magnitude. Non-negative part: [max(lo, 0), hi]; negative part:
    // magnitudes in [max(-hi, 1), -lo] (no "-0").
    std::vector<Expr> alts;
    if (!hi || *hi >= 0) alts.push_back(NonNegativeRange(lo ? std::max<int64_t>(*lo, 0) : 0, hi ? *hi : -1));
    if (!lo || *lo < 0) {
      const int64_t a = hi && *hi < 0 ? -*hi : 1;
      alts.push_back(Expr::Seq({Expr::Lit("-"), NonNegativeRange(a, lo ? -*lo : -1)}));
    }
    return Expr::Alt(std::move(alts));
  }

  StatusOr<Expr> CompileArray(const Json& s, const std::string& path) {
    TANDEM_ASSIGN_OR_RETURN(int64_t min, Count(s, "minItems", path, 0));
    TANDEM_ASSIGN_OR_RETURN(int64_t max, Count(s, "maxItems", path, kUnbounded));
    if (max >= 0 && max < min) return Bad("maxItems", path, "is below minItems");
    Expr item = Expr::Ref(AnyValue());
    if (s.contains("items")) {
      const int rule = b_.Fresh(prefix_ + "item");
      TANDEM_ASSIGN_OR_RETURN(Expr e, Compile(s["items"], path + "/items"));
      b_.Define(rule, std::move(e));
      item = Expr::Ref(rule);
    }
    item = Expr::Seq({item, Pad()});
    Expr more = Expr::Seq({Expr::Lit(","), Ws(), item});
    Expr body = Expr::Seq({item, Expr::Repeat(more, static_cast<int>(std::max<int64_t>(min - 1, 0)),
                                              max < 0 ? kUnbounded : static_cast<int>(max - 1))});
    if (max == 0) return Expr::Seq({Expr::Lit("["), Pad(), Expr::Lit("]")});
    if (min == 0) body = Expr::Opt(std::move(body));
    return Expr::Seq({Expr::Lit("["), Pad(), std::move(body), Expr::Lit("]")});
  }

  StatusOr<Expr> CompileObject(const Json& s, const std::string& path) {
    std::vector<std::pair<std::string, Expr>> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Bad("required", path, "must be an array of strings");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return Bad("required", path, "must be an array of strings");
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return Bad("properties", path, "must be an object");
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
        TANDEM_ASSIGN_OR_RETURN(Expr e, Compile(it.value(), path + "/properties/" + it.key()));
        props.emplace_back(it.key(), std::move(e));
      }
    }
    for (const std::string& r : required) {
      bool found = false;
      for (const auto& p : props) found = found || p.first == r;
      if (!found) return Unsupported("required", path, "required property '" + r + "' is not in properties");
    }
    std::optional<Expr> extra;  // the value schema of additional properties, if allowed
    if (!s.contains("additionalProperties")) {
      const bool allowed = options_.unnamed_properties == UnnamedProperties::kAlways ||
                           (options_.unnamed_properties == UnnamedProperties::kUnlessNamed && !s.contains("properties"));
      if (allowed) extra = Expr::Ref(AnyValue());
    }
    if (s.contains("additionalProperties")) {
      const Json& a = s["additionalProperties"];
      if (a.is_boolean()) {
        if (a.get<bool>()) extra = Expr::Ref(AnyValue());
      } else {
        TANDEM_ASSIGN_OR_RETURN(Expr e, Compile(a, path + "/additionalProperties"));
        extra = std::move(e);
      }
    }
    const int n = static_cast<int>(props.size());
    // maxProperties bounds the additional properties (counting every named property as
    // if written, so the bound always holds).
    TANDEM_ASSIGN_OR_RETURN(int64_t max_props, Count(s, "maxProperties", path, kUnbounded));
    const int max_extra = max_props < 0 ? kUnbounded : static_cast<int>(std::max<int64_t>(max_props - n, 0));
    if (max_props >= 0 && static_cast<int64_t>(required.size()) > max_props) {
      return Bad("maxProperties", path, "is below the number of required properties");
    }
    // tail[i][after]: properties i.. given whether one was already written (then each
    // starts with a comma). Linear in the number of properties.
    std::vector<std::array<int, 2>> tail(n + 1);
    for (int i = 0; i <= n; ++i) tail[i] = {b_.Fresh(prefix_ + "props"), b_.Fresh(prefix_ + "props")};
    auto kv = [&](int i) {
      return Expr::Seq({Expr::Lit(Json(props[i].first).dump()), Pad(), Expr::Lit(":"), Ws(), props[i].second, Pad()});
    };
    for (int after = 0; after < 2; ++after) {
      if (extra && max_extra != 0) {
        Expr member = Expr::Seq({Expr::Ref(Key()), Pad(), Expr::Lit(":"), Ws(), *extra, Pad()});
        Expr next = Expr::Seq({Expr::Lit(","), Ws(), member});
        if (after) {
          b_.Define(tail[n][after], Expr::Repeat(std::move(next), 0, max_extra));
        } else {
          Expr more = Expr::Repeat(std::move(next), 0, max_extra == kUnbounded ? kUnbounded : max_extra - 1);
          b_.Define(tail[n][after], Expr::Opt(Expr::Seq({member, std::move(more)})));
        }
      } else {
        b_.Define(tail[n][after], Expr::Empty());
      }
      for (int i = n - 1; i >= 0; --i) {
        Expr lead = after ? Expr::Seq({Expr::Lit(","), Ws(), kv(i)}) : kv(i);
        Expr take = Expr::Seq({std::move(lead), Expr::Ref(tail[i + 1][1])});
        if (required.count(props[i].first)) {
          b_.Define(tail[i][after], std::move(take));
        } else {
          b_.Define(tail[i][after], Expr::Alt({std::move(take), Expr::Ref(tail[i + 1][after])}));
        }
      }
    }
    return Expr::Seq({Expr::Lit("{"), Pad(), Expr::Ref(tail[0][0]), Expr::Lit("}")});
  }

  const Json& root_;
  const std::string prefix_;
  GrammarBuilder& b_;
  const JsonSchemaOptions options_;
  std::map<std::string, int> refs_;
  int any_value_ = -1, char_ = -1, string_ = -1, number_ = -1, key_ = -1, ws_ = -1;
};

StatusOr<Json> ParseSchema(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("the schema is not valid JSON");
  if (!j.is_object() && !j.is_boolean()) return InvalidArgumentError("the schema must be a JSON object");
  return j;
}

}  // namespace

StatusOr<int> AddJsonSchemaRules(std::string_view schema_json, const std::string& prefix, GrammarBuilder& b,
                                 const JsonSchemaOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(Json schema, ParseSchema(schema_json));
  SchemaCompiler c(schema, prefix, b, options);
  TANDEM_ASSIGN_OR_RETURN(Expr e, c.Compile(schema, ""));
  const int rule = b.Fresh(prefix + "root");
  b.Define(rule, std::move(e));
  return rule;
}

StatusOr<Grammar> CompileJsonSchema(std::string_view schema_json, const JsonSchemaOptions& options) {
  GrammarBuilder b;
  TANDEM_ASSIGN_OR_RETURN(int rule, AddJsonSchemaRules(schema_json, "", b, options));
  b.Define(b.Declare("root"), Expr::Ref(rule));
  return std::move(b).Build("root");
}

StatusOr<Grammar> JsonObjectGrammar(const JsonSchemaOptions& options) {
  GrammarBuilder b;
  Json empty = Json::object();
  SchemaCompiler c(empty, "", b, options);
  b.Define(b.Declare("root"), Expr::Ref(c.AnyObject()));
  return std::move(b).Build("root");
}

}  // namespace tandem::grammar
