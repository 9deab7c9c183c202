#include "grammar/one_of_check.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace tandem::grammar {
namespace {

using Json = nlohmann::json;

// Kinds of JSON value, as bits.
constexpr int kNull = 1, kBool = 2, kInteger = 4, kFraction = 8, kString = 16, kArray = 32, kObject = 64;
constexpr int kAnyKind = 127;
constexpr int kMaxDepth = 16;

// The schema `s` points at ($ref followed), or null when it cannot be resolved.
const Json* Resolve(const Json& s, const Json& root, int depth = 0) {
  if (depth > kMaxDepth) return nullptr;
  if (!s.is_object() || !s.contains("$ref")) return &s;
  const Json& ref = s["$ref"];
  if (!ref.is_string()) return nullptr;
  const std::string r = ref.get<std::string>();
  if (r == "#") return Resolve(root, root, depth + 1);
  if (r.rfind("#/", 0) != 0) return nullptr;
  const Json::json_pointer pointer(r.substr(1));
  if (!root.contains(pointer)) return nullptr;
  return Resolve(root.at(pointer), root, depth + 1);
}

int KindOfValue(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_number_integer() || v.is_number_unsigned()) return kInteger;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d) ? kInteger : kFraction;
  }
  if (v.is_string()) return kString;
  if (v.is_array()) return kArray;
  return kObject;
}

int KindOfType(const std::string& t) {
  if (t == "null") return kNull;
  if (t == "boolean") return kBool;
  if (t == "integer") return kInteger;
  if (t == "number") return kInteger | kFraction;
  if (t == "string") return kString;
  if (t == "array") return kArray;
  if (t == "object") return kObject;
  return kAnyKind;
}

int Kinds(const Json& schema, const Json& root, int depth) {
  if (depth > kMaxDepth) return kAnyKind;
  const Json* sp = Resolve(schema, root);
  if (sp == nullptr) return kAnyKind;
  const Json& s = *sp;
  if (s.is_boolean()) return s.get<bool>() ? kAnyKind : 0;
  if (!s.is_object()) return kAnyKind;
  if (s.contains("const")) return KindOfValue(s["const"]);
  if (s.contains("enum") && s["enum"].is_array()) {
    int k = 0;
    for (const Json& v : s["enum"]) k |= KindOfValue(v);
    return k;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key) || !s[key].is_array()) continue;
    int k = 0;
    for (const Json& sub : s[key]) k |= Kinds(sub, root, depth + 1);
    return k;
  }
  if (s.contains("allOf") && s["allOf"].is_array() && s["allOf"].size() == 1) return Kinds(s["allOf"][0], root, depth + 1);
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) return KindOfType(t.get<std::string>());
    if (t.is_array()) {
      int k = 0;
      for (const Json& x : t) k |= x.is_string() ? KindOfType(x.get<std::string>()) : kAnyKind;
      return k;
    }
    return kAnyKind;
  }
  // As the compiler infers a type from the keywords.
  if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) return kObject;
  if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) return kArray;
  if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) return kString;
  if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) {
    return kInteger | kFraction;
  }
  return kAnyKind;
}

// The finite set of values a schema allows (const / enum), if it is one.
std::optional<std::vector<Json>> Values(const Json& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return std::vector<Json>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array()) return s["enum"].get<std::vector<Json>>();
  return std::nullopt;
}

bool Requires(const Json& s, const std::string& key) {
  if (!s.contains("required") || !s["required"].is_array()) return false;
  for (const Json& r : s["required"]) {
    if (r.is_string() && r.get<std::string>() == key) return true;
  }
  return false;
}

// `closed` forbids a property that `other` requires.
bool ClosedAgainst(const Json& closed, const Json& other) {
  if (!closed.contains("additionalProperties") || closed["additionalProperties"] != false) return false;
  if (!other.contains("required") || !other["required"].is_array()) return false;
  const Json empty = Json::object();
  const Json& props = closed.contains("properties") && closed["properties"].is_object() ? closed["properties"] : empty;
  for (const Json& r : other["required"]) {
    if (r.is_string() && !props.contains(r.get<std::string>())) return true;
  }
  return false;
}

bool ObjectsDisjoint(const Json& a, const Json& b, const Json& root) {
  if (ClosedAgainst(a, b) || ClosedAgainst(b, a)) return true;
  if (!a.contains("properties") || !b.contains("properties") || !a["properties"].is_object() ||
      !b["properties"].is_object()) {
    return false;
  }
  for (auto it = a["properties"].begin(); it != a["properties"].end(); ++it) {
    const std::string& key = it.key();
    if (!b["properties"].contains(key) || !Requires(a, key) || !Requires(b, key)) continue;
    if (ProvablyDisjoint(it.value(), b["properties"][key], root)) return true;  // a discriminator
  }
  return false;
}

}  // namespace

bool ProvablyDisjoint(const Json& a_in, const Json& b_in, const Json& root) {
  const Json* a = Resolve(a_in, root);
  const Json* b = Resolve(b_in, root);
  if (a == nullptr || b == nullptr) return false;
  if ((Kinds(*a, root, 0) & Kinds(*b, root, 0)) == 0) return true;
  const std::optional<std::vector<Json>> va = Values(*a), vb = Values(*b);
  if (va && vb) {
    for (const Json& x : *va) {
      for (const Json& y : *vb) {
        if (x == y) return false;
      }
    }
    return true;
  }
  if (a->is_object() && b->is_object() && (Kinds(*a, root, 0) | Kinds(*b, root, 0)) == kObject) {
    return ObjectsDisjoint(*a, *b, root);
  }
  return false;
}

}  // namespace tandem::grammar
