// ToolSchema: what the request's OpenAI `tools` array says about each parameter's type,
// reduced to the one question GLM-style parsers ask: "is this argument a string?".
//
// GLM models write every argument value as bare text (<arg_value>42</arg_value>), so
// the parser needs the schema to decide whether "42" means the number 42 or the string
// "42". The rule (vLLM's glm4_moe parser): a value whose parameter is declared
// `"type": "string"` (or a type list containing "string") stays a string; any other
// value is parsed as JSON when it is valid JSON, else kept as a string.
//
// Thread safety: immutable after Parse; safe to share between threads.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::parsers {

class ToolSchema {
 public:
  ToolSchema() = default;  // no tools: every value is typed by JSON validity alone

  // Parses an OpenAI `tools` array: [{"type": "function", "function": {"name": ...,
  // "parameters": {"properties": {...}}}}, ...]. Entries without a function name are
  // skipped. Empty text means no tools. InvalidArgument when the text is not a JSON
  // array.
  static StatusOr<ToolSchema> Parse(std::string_view tools_json);

  // True when `tool`'s parameter `param` is declared string-typed.
  bool IsStringParam(std::string_view tool, std::string_view param) const;

  // The JSON text of argument `param` of `tool` whose raw text is `raw_value` (already
  // trimmed), typed by the rule above: "\"Paris\"", "42", "{\"a\": 1}".
  std::string TypedValueJson(std::string_view tool, std::string_view param,
                             std::string_view raw_value) const;

  size_t num_tools() const { return string_params_.size(); }

 private:
  // tool name -> names of its string-typed parameters.
  std::map<std::string, std::set<std::string>, std::less<>> string_params_;
};

}  // namespace tandem::parsers
