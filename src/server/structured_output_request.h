// The structured-output fields of a request (README "Structured outputs"), read into one
// grammar::StructuredOutputSpec:
//   response_format: {"type": "text" | "json_object" | "json_schema",
//                     "json_schema": {"name", "schema", "strict", "description"}}
//   structured_outputs: {"json" | "regex" | "choice" | "grammar" | "json_object"}  (vLLM)
//     with "disable_any_whitespace" / "disable_additional_properties" (the JSON
//     grammar's options, grammar::JsonSchemaOptions) and "disable_fallback" (one
//     backend: nothing to fall back to, true or false)
//   guided_json / guided_regex / guided_choice / guided_grammar  (vLLM's older names)
// At most one of them may constrain a request. Errors are InvalidArgument naming the
// field ("response_format.json_schema.schema: ..."), for the shape here and for the
// compile errors the server reports later (CompileStructuredOutput).
//
// Thread safety: pure functions.
#pragma once

#include "common/status.h"
#include "grammar/grammar_cache.h"
#include "server/json_fields.h"
#include "server/openai_request.h"

namespace tandem::server {

// Reads the fields above into request->structured_output (unset when none constrains).
Status ReadStructuredOutput(JsonFields& fields, SamplingRequest* request);

// The spec that forces the tool calls of `tool_choice` "required" / a named function:
// one or more calls (or exactly one to that function) in the hermes markup, arguments
// following each tool's parameters schema.
grammar::StructuredOutputSpec ToolCallSpec(const ChatRequest& request);

// Compiles request->structured_output (cached) into request->params.grammar.
// InvalidArgument naming the field on a compile error.
Status CompileStructuredOutput(grammar::GrammarCache& cache, SamplingRequest* request);

}  // namespace tandem::server
