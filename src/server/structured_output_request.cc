#include "server/structured_output_request.h"

namespace tandem::server {
namespace {

Status Invalid(const std::string& field, const std::string& message) {
  return InvalidArgumentError(field + ": " + message);
}

using Kind = grammar::StructuredOutputSpec::Kind;

// A schema given as a JSON object/boolean or as a string holding one (vLLM accepts both).
StatusOr<std::string> SchemaText(const Json& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return DumpJson(v);
  if (v.is_string()) {
    Json parsed = Json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) {
      return Invalid(field, "the schema string is not a JSON object");
    }
    return DumpJson(parsed);
  }
  return Invalid(field, "Input should be a valid dictionary (a JSON schema)");
}

struct Found {
  grammar::StructuredOutputSpec spec;
  std::string field;
};

Status Add(std::optional<Found>& found, Kind kind, std::string text, std::string field) {
  if (found.has_value()) {
    return InvalidArgumentError(field + ": only one kind of structured output may be requested (" + found->field +
                                " is already given)");
  }
  found = Found{{kind, std::move(text)}, std::move(field)};
  return Status();
}

Status ReadChoice(const Json& v, const std::string& field, std::optional<Found>& found) {
  if (!v.is_array() || v.empty()) return Invalid(field, "Input should be a non-empty list of strings");
  for (const Json& c : v) {
    if (!c.is_string()) return Invalid(field, "Input should be a non-empty list of strings");
  }
  return Add(found, Kind::kChoice, DumpJson(v), field);
}

Status ReadString(const Json& v, const std::string& field, Kind kind, std::optional<Found>& found) {
  if (!v.is_string()) return Invalid(field, "Input should be a valid string");
  return Add(found, kind, v.get<std::string>(), field);
}

Status ReadResponseFormat(const Json& rf, std::optional<Found>& found) {
  if (!rf.is_object()) return Invalid("response_format", "Input should be a valid dictionary");
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string()) return Invalid("response_format.type", "Field required");
  const std::string t = type->get<std::string>();
  if (t == "text") return Status();
  if (t == "json_object") return Add(found, Kind::kJsonObject, "", "response_format");
  if (t != "json_schema") {
    return Invalid("response_format.type", "'" + t + "' is not supported (text, json_object or json_schema)");
  }
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object()) return Invalid("response_format.json_schema", "Field required");
  for (auto it = js->begin(); it != js->end(); ++it) {
    if (it.key() != "name" && it.key() != "schema" && it.key() != "strict" && it.key() != "description") {
      return Invalid("response_format.json_schema." + it.key(), "unknown field");
    }
  }
  auto strict = js->find("strict");
  if (strict != js->end() && !strict->is_boolean() && !strict->is_null()) {
    return Invalid("response_format.json_schema.strict", "Input should be a valid boolean");
  }
  auto schema = js->find("schema");
  // OpenAI: without a schema the model may answer any JSON object.
  if (schema == js->end() || schema->is_null()) return Add(found, Kind::kJsonObject, "", "response_format.json_schema");
  TANDEM_ASSIGN_OR_RETURN(std::string text, SchemaText(*schema, "response_format.json_schema.schema"));
  return Add(found, Kind::kJsonSchema, std::move(text), "response_format.json_schema.schema");
}

// structured_outputs' JSON options go to `json` (vLLM's meanings; README "Structured
// outputs"): disable_any_whitespace false = any whitespace between tokens;
// disable_additional_properties true = no unnamed properties unless additionalProperties
// says so, false = JSON Schema's default (allowed unless it says no); disable_fallback:
// there is one backend, so never a fallback either way.
Status ReadStructuredOutputs(const Json& so, std::optional<Found>& found, grammar::JsonSchemaOptions* json) {
  if (!so.is_object()) return Invalid("structured_outputs", "Input should be a valid dictionary");
  for (auto it = so.begin(); it != so.end(); ++it) {
    const std::string field = "structured_outputs." + it.key();
    const Json& v = it.value();
    if (v.is_null()) continue;
    if (it.key() == "json") {
      TANDEM_ASSIGN_OR_RETURN(std::string text, SchemaText(v, field));
      TANDEM_RETURN_IF_ERROR(Add(found, Kind::kJsonSchema, std::move(text), field));
    } else if (it.key() == "regex") {
      TANDEM_RETURN_IF_ERROR(ReadString(v, field, Kind::kRegex, found));
    } else if (it.key() == "grammar") {
      TANDEM_RETURN_IF_ERROR(ReadString(v, field, Kind::kGrammar, found));
    } else if (it.key() == "choice") {
      TANDEM_RETURN_IF_ERROR(ReadChoice(v, field, found));
    } else if (it.key() == "json_object") {
      if (!v.is_boolean()) return Invalid(field, "Input should be a valid boolean");
      if (v.get<bool>()) TANDEM_RETURN_IF_ERROR(Add(found, Kind::kJsonObject, "", field));
    } else if (it.key() == "disable_fallback" || it.key() == "disable_any_whitespace" ||
               it.key() == "disable_additional_properties") {
      if (!v.is_boolean()) return Invalid(field, "Input should be a valid boolean");
      const bool disable = v.get<bool>();
      if (it.key() == "disable_any_whitespace") json->any_whitespace = !disable;
      if (it.key() == "disable_additional_properties") {
        json->unnamed_properties =
            disable ? grammar::UnnamedProperties::kNever : grammar::UnnamedProperties::kAlways;
      }
    } else {
      return Invalid(field, "is not supported (json, regex, choice, grammar, json_object)");
    }
  }
  return Status();
}

}  // namespace

Status ReadStructuredOutput(JsonFields& fields, SamplingRequest* request) {
  std::optional<Found> found;
  grammar::JsonSchemaOptions json;
  if (const Json* rf = fields.Raw("response_format")) TANDEM_RETURN_IF_ERROR(ReadResponseFormat(*rf, found));
  if (const Json* so = fields.Raw("structured_outputs")) {
    TANDEM_RETURN_IF_ERROR(ReadStructuredOutputs(*so, found, &json));
  }
  if (const Json* v = fields.Raw("guided_json")) {
    TANDEM_ASSIGN_OR_RETURN(std::string text, SchemaText(*v, "guided_json"));
    TANDEM_RETURN_IF_ERROR(Add(found, Kind::kJsonSchema, std::move(text), "guided_json"));
  }
  if (const Json* v = fields.Raw("guided_regex")) TANDEM_RETURN_IF_ERROR(ReadString(*v, "guided_regex", Kind::kRegex, found));
  if (const Json* v = fields.Raw("guided_grammar")) {
    TANDEM_RETURN_IF_ERROR(ReadString(*v, "guided_grammar", Kind::kGrammar, found));
  }
  if (const Json* v = fields.Raw("guided_choice")) TANDEM_RETURN_IF_ERROR(ReadChoice(*v, "guided_choice", found));
  if (found.has_value()) {
    found->spec.json = json;  // only JSON kinds read it: regex, choice and grammar have no JSON
    request->structured_output = std::move(found->spec);
    request->structured_output_field = std::move(found->field);
  }
  return Status();
}

grammar::StructuredOutputSpec ToolCallSpec(const ChatRequest& request) {
  Json spec = Json::object();
  spec["tools"] = Json::parse(request.tools_json);
  if (request.tool_choice == ToolChoice::kNamed) {
    spec["name"] = Json::parse(request.tool_choice_json)["function"]["name"];
  } else if (!request.parallel_tool_calls) {
    spec["single"] = true;
  }
  return {Kind::kToolCalls, DumpJson(spec)};
}

Status CompileStructuredOutput(grammar::GrammarCache& cache, SamplingRequest* request) {
  if (!request->structured_output.has_value()) return Status();
  auto automaton = cache.Get(*request->structured_output);
  if (!automaton.ok()) return InvalidArgumentError(request->structured_output_field + ": " + automaton.status().message());
  request->params.grammar = std::move(*automaton);
  return Status();
}

}  // namespace tandem::server
