// Helpers for reading tokenizer.json / tokenizer_config.json with nlohmann::json: typed
// member access that answers a wrong or missing value with InvalidArgument naming its
// JSON path ("pre_tokenizer.pretokenizers[1].behavior"). Internal to the hf_*_json.cc files.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::hf_json {

using Json = nlohmann::json;

// `text` in quotes, cut to 80 bytes (at a character boundary) for an error message.
inline std::string Quote(std::string_view text) {
  if (text.size() <= 80) return "\"" + std::string(text) + "\"";
  size_t cut = 77;
  while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
  return "\"" + std::string(text.substr(0, cut)) + "...\"";
}

inline std::string Child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}
inline std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

inline Status Invalid(const std::string& path, std::string_view what) {
  return InvalidArgumentError(path + " " + std::string(what));
}

// Member `key` of object `obj`, or nullptr when absent (JSON null counts as absent).
inline const Json* Find(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

inline StatusOr<bool> OptBool(const Json& obj, std::string_view key, const std::string& path,
                              bool fallback) {
  const Json* v = Find(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return Invalid(Child(path, key), "must be true or false");
  return v->get<bool>();
}

inline StatusOr<std::optional<std::string>> OptString(const Json& obj, std::string_view key,
                                                      const std::string& path) {
  const Json* v = Find(obj, key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return Invalid(Child(path, key), "must be a string");
  return std::optional<std::string>(v->get<std::string>());
}

inline StatusOr<std::string> String(const Json& obj, std::string_view key,
                                    const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> v, OptString(obj, key, path));
  if (!v) return Invalid(Child(path, key), "is missing");
  return *v;
}

// A non-negative integer below 2^31.
inline StatusOr<int32_t> Id(const Json& v, const std::string& path) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
    return Invalid(path, "must be a token id (an integer from 0 to 2^31 - 1)");
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

inline StatusOr<size_t> Count(const Json& obj, std::string_view key, const std::string& path,
                              size_t fallback) {
  const Json* v = Find(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer() || v->get<int64_t>() < 0) {
    return Invalid(Child(path, key), "must be a non-negative integer");
  }
  return static_cast<size_t>(v->get<int64_t>());
}

// The "type" of a component object at `path`.
inline StatusOr<std::string> Type(const Json& obj, const std::string& path) {
  if (!obj.is_object()) return Invalid(path, "must be an object");
  return String(obj, "type", path);
}

inline Status Unsupported(const std::string& path, const std::string& type) {
  return Invalid(Child(path, "type"), Quote(type) + " is not supported");
}

}  // namespace tandem::hf_json
