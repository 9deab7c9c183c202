#include "server/json_fields.h"

#include <cmath>
#include <limits>

#include "common/json_depth.h"

namespace tandem::server {

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

StatusOr<Json> ParseJsonObject(std::string_view body) {
  if (JsonNestingExceeds(body, kMaxJsonDepth)) {
    return InvalidArgumentError("JSON decode error: nested deeper than " +
                                std::to_string(kMaxJsonDepth) + " levels");
  }
  Json value = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded())
    return InvalidArgumentError("JSON decode error: the request body is not valid JSON");
  if (!value.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  return value;
}

const Json* JsonFields::Find(const char* name) {
  read_.insert(name);
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

const Json* JsonFields::Raw(const char* name) { return Find(name); }

Status JsonFields::Number(const char* name, std::optional<double>* out) {
  const Json* v = Find(name);
  if (v == nullptr) return Status();
  if (!v->is_number())
    return InvalidArgumentError(std::string(name) + ": Input should be a valid number");
  *out = v->get<double>();
  return Status();
}

Status JsonFields::Integer(const char* name, std::optional<int64_t>* out) {
  const Json* v = Find(name);
  if (v == nullptr) return Status();
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
      return InvalidArgumentError(std::string(name) +
                                  ": Input should be a valid integer, out of range");
    }
    *out = v->get<int64_t>();
    return Status();
  }
  // pydantic accepts floats with no fractional part (e.g. 16.0) for int fields.
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      *out = static_cast<int64_t>(d);
      return Status();
    }
  }
  return InvalidArgumentError(std::string(name) + ": Input should be a valid integer");
}

Status JsonFields::Bool(const char* name, std::optional<bool>* out) {
  const Json* v = Find(name);
  if (v == nullptr) return Status();
  if (!v->is_boolean())
    return InvalidArgumentError(std::string(name) + ": Input should be a valid boolean");
  *out = v->get<bool>();
  return Status();
}

Status JsonFields::String(const char* name, std::optional<std::string>* out) {
  const Json* v = Find(name);
  if (v == nullptr) return Status();
  if (!v->is_string())
    return InvalidArgumentError(std::string(name) + ": Input should be a valid string");
  *out = v->get<std::string>();
  return Status();
}

std::vector<std::string> JsonFields::Unread() const {
  std::vector<std::string> names;
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (read_.count(it.key()) == 0) names.push_back(it.key());
  }
  return names;
}

Status ReadTokenIds(const Json& value, const char* name, int32_t vocab_size,
                    std::vector<int32_t>* out) {
  if (!value.is_array())
    return InvalidArgumentError(std::string(name) + ": Input should be a list of token ids");
  out->clear();
  out->reserve(value.size());
  for (const Json& item : value) {
    if (!item.is_number_integer()) {
      return InvalidArgumentError(std::string(name) + ": token ids must be integers");
    }
    // nlohmann stores non-negative literals as unsigned; compare in the matching type.
    bool in_range = item.is_number_unsigned()
                        ? item.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                        : item.get<int64_t>() >= 0 && item.get<int64_t>() < vocab_size;
    if (!in_range) {
      return InvalidArgumentError("Token id " + item.dump() + " is out of vocabulary (size " +
                                  std::to_string(vocab_size) + ")");
    }
    int64_t id = item.get<int64_t>();
    out->push_back(static_cast<int32_t>(id));
  }
  return Status();
}

}  // namespace tandem::server
