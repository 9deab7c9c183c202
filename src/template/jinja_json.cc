// JSON in and out of jinja::Value: parsing with nlohmann's SAX interface (no DOM, explicit
// stack, bounded nesting) and printing exactly as Python's json.dumps does.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/jinja_value.h"

namespace tandem::jinja {
namespace {

// Builds Values from SAX events. Containers under construction live on `stack_`.
class ValueBuilder {
 public:
  bool null() { return Add(Value::None()); }
  bool boolean(bool b) { return Add(Value::Bool(b)); }
  bool number_integer(int64_t i) { return Add(Value::Int(i)); }
  bool number_unsigned(uint64_t u) {
    if (u > static_cast<uint64_t>(INT64_MAX)) return Add(Value::Float(static_cast<double>(u)));
    return Add(Value::Int(static_cast<int64_t>(u)));
  }
  bool number_float(double d, const std::string&) { return Add(Value::Float(d)); }
  bool string(std::string& s) { return Add(Value::String(std::move(s))); }
  bool binary(nlohmann::json::binary_t&) { return Fail("binary values are not JSON text"); }
  bool start_object(size_t) { return Push(Value::NewDict()); }
  bool key(std::string& k) {
    keys_.back() = std::move(k);
    return true;
  }
  bool end_object() { return Pop(); }
  bool start_array(size_t) { return Push(Value::List()); }
  bool end_array() { return Pop(); }
  bool parse_error(size_t position, const std::string&, const nlohmann::json::exception& ex) {
    return Fail("invalid JSON at byte " + std::to_string(position) + ": " + ex.what());
  }

  StatusOr<Value> Finish() {
    if (!error_.empty()) return InvalidArgumentError(error_);
    if (!stack_.empty() || !have_root_) return InvalidArgumentError("incomplete JSON");
    return std::move(root_);
  }

 private:
  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  bool Add(Value v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      have_root_ = true;
      return true;
    }
    Value& top = stack_.back();
    if (top.is_list()) {
      top.list().items.push_back(std::move(v));
    } else {
      top.dict().Set(keys_.back(), std::move(v));
    }
    return true;
  }
  bool Push(Value container) {
    if (stack_.size() >= static_cast<size_t>(kMaxValueDepth)) return Fail("JSON nested too deeply");
    stack_.push_back(std::move(container));
    keys_.emplace_back();
    return true;
  }
  bool Pop() {
    Value done = std::move(stack_.back());
    stack_.pop_back();
    keys_.pop_back();
    return Add(std::move(done));
  }

  std::vector<Value> stack_;
  std::vector<std::string> keys_;
  Value root_;
  bool have_root_ = false;
  std::string error_;
};

void AppendJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(ch);  // ensure_ascii=False: UTF-8 passes through
        }
    }
  }
  out->push_back('"');
}

Status AppendJsonRec(const Value& v, const JsonFormat& f, int depth, std::string* out) {
  if (depth > kMaxValueDepth) return ResourceExhaustedError("value nesting too deep for tojson");
  const std::string item_sep = !f.item_separator.empty() ? f.item_separator : (f.pretty ? "," : ", ");
  const std::string key_sep = !f.key_separator.empty() ? f.key_separator : ": ";
  auto newline = [&](int level) {
    if (!f.pretty) return;
    out->push_back('\n');
    for (int i = 0; i < level; ++i) *out += f.indent_unit;
  };
  switch (v.kind()) {
    case Value::Kind::kNone: *out += "null"; return Status::Ok();
    case Value::Kind::kBool: *out += v.bool_value() ? "true" : "false"; return Status::Ok();
    case Value::Kind::kInt: *out += std::to_string(v.int_value()); return Status::Ok();
    case Value::Kind::kFloat: {
      double d = v.float_value();
      if (std::isnan(d)) {
        *out += "NaN";
      } else if (std::isinf(d)) {
        *out += d < 0 ? "-Infinity" : "Infinity";
      } else {
        *out += FormatPyFloat(d);
      }
      return Status::Ok();
    }
    case Value::Kind::kString: AppendJsonString(v.str(), out); return Status::Ok();
    case Value::Kind::kList: {
      const auto& items = v.list().items;
      if (items.empty()) {
        *out += "[]";
        return Status::Ok();
      }
      out->push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        TANDEM_RETURN_IF_ERROR(AppendJsonRec(items[i], f, depth + 1, out));
      }
      newline(depth);
      out->push_back(']');
      return Status::Ok();
    }
    case Value::Kind::kDict: {
      if (v.dict().is_namespace) {
        return InvalidArgumentError("Object of type Namespace is not JSON serializable");
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.dict().entries()) entries.push_back(&e);
      if (entries.empty()) {
        *out += "{}";
        return Status::Ok();
      }
      if (f.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out->push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        AppendJsonString(entries[i]->first, out);
        *out += key_sep;
        TANDEM_RETURN_IF_ERROR(AppendJsonRec(entries[i]->second, f, depth + 1, out));
      }
      newline(depth);
      out->push_back('}');
      return Status::Ok();
    }
    case Value::Kind::kUndefined:
    case Value::Kind::kCallable:
      return InvalidArgumentError("Object of type " + std::string(v.TypeName()) +
                                  " is not JSON serializable");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Value> ParseJson(std::string_view json_text) {
  ValueBuilder builder;
  nlohmann::json::sax_parse(json_text.begin(), json_text.end(), &builder,
                            nlohmann::json::input_format_t::json, /*strict=*/true);
  return builder.Finish();
}

Status AppendJson(const Value& v, const JsonFormat& format, std::string* out) {
  return AppendJsonRec(v, format, 0, out);
}

}  // namespace tandem::jinja
