#include "server/parsers/tool_schema.h"

#include <nlohmann/json.hpp>

#include "server/parsers/parser_text.h"

namespace tandem::parsers {

namespace {

bool DeclaresString(const Json& property) {
  if (!property.is_object()) return false;
  auto type = property.find("type");
  if (type == property.end()) return false;
  if (type->is_string()) return type->get<std::string>() == "string";
  if (type->is_array()) {
    for (const Json& t : *type) {
      if (t.is_string() && t.get<std::string>() == "string") return true;
    }
  }
  return false;
}

}  // namespace

StatusOr<ToolSchema> ToolSchema::Parse(std::string_view tools_json) {
  ToolSchema schema;
  if (StripWhitespace(tools_json).empty()) return schema;
  std::optional<Json> tools = ParseJson(tools_json);
  if (!tools || !tools->is_array()) {
    return InvalidArgumentError("tools must be a JSON array of tool definitions");
  }
  for (const Json& tool : *tools) {
    if (!tool.is_object()) continue;
    // OpenAI nests the definition under "function"; accept a bare definition too.
    const Json& function = tool.contains("function") ? tool["function"] : tool;
    if (!function.is_object() || !function.contains("name") || !function["name"].is_string()) {
      continue;
    }
    std::set<std::string>& strings = schema.string_params_[function["name"].get<std::string>()];
    auto parameters = function.find("parameters");
    if (parameters == function.end() || !parameters->is_object()) continue;
    auto properties = parameters->find("properties");
    if (properties == parameters->end() || !properties->is_object()) continue;
    for (auto it = properties->begin(); it != properties->end(); ++it) {
      if (DeclaresString(it.value())) strings.insert(it.key());
    }
  }
  return schema;
}

bool ToolSchema::IsStringParam(std::string_view tool, std::string_view param) const {
  auto it = string_params_.find(tool);
  if (it == string_params_.end()) return false;
  return it->second.count(std::string(param)) > 0;
}

std::string ToolSchema::TypedValueJson(std::string_view tool, std::string_view param,
                                       std::string_view raw_value) const {
  if (!IsStringParam(tool, param)) {
    if (std::optional<Json> parsed = ParseJson(raw_value)) return SerializeJson(*parsed);
  }
  return SerializeJson(Json(std::string(raw_value)));
}

}  // namespace tandem::parsers
