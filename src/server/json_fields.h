// JsonFields: typed, validating access to the fields of one JSON request object.
//
// OpenAI request bodies are loosely typed (a field may be absent, null, or of the wrong
// type). JsonFields reads each field once with the type the API defines, turns a
// mismatch into InvalidArgument naming the field, treats null as absent (as vLLM's
// pydantic models do), and remembers which fields were read so the rest can be
// reported as ignored.
//
// Internal to src/server: it exposes nlohmann::json, which stays out of public headers.
// Thread safety: a JsonFields borrows its object and is used by one thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::server {

using Json = nlohmann::ordered_json;

// Serializes `value` compactly; invalid UTF-8 in strings becomes U+FFFD instead of
// throwing (generated text and token pieces may split a multi-byte character).
std::string DumpJson(const Json& value);

// Parses a request body. InvalidArgument for malformed JSON (vLLM's 400 message style)
// or when the top level is not an object.
StatusOr<Json> ParseJsonObject(std::string_view body);

class JsonFields {
 public:
  // `object` must be a JSON object and outlive this reader.
  explicit JsonFields(const Json& object) : object_(object) {}

  // Each reader leaves `*out` unchanged when the field is absent or null.
  Status Number(const char* name, std::optional<double>* out);
  Status Integer(const char* name, std::optional<int64_t>* out);  // integral numbers only
  Status Bool(const char* name, std::optional<bool>* out);
  Status String(const char* name, std::optional<std::string>* out);

  // The raw value (marks the field as read), or nullptr when absent or null.
  const Json* Raw(const char* name);

  // Names of the fields never read, in document order.
  std::vector<std::string> Unread() const;

 private:
  const Json* Find(const char* name);

  const Json& object_;
  std::set<std::string> read_;
};

// Reads a list of token ids (non-negative integers below `vocab_size`).
Status ReadTokenIds(const Json& value, const char* name, int32_t vocab_size,
                    std::vector<int32_t>* out);

}  // namespace tandem::server
