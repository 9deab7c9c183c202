// The grammar of forced tool calls (`tool_choice: "required"` or a named function).
//
// The calls are written in the hermes markup the hermes tool parser reads, so the
// existing parser turns the constrained output into `tool_calls`:
//   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
// where ARGS follows that function's `parameters` schema (json_schema_compiler.h; an
// absent schema means any object). "required": one or more calls, each to any of the
// tools (exactly one with parallel_tool_calls false); named: exactly one call to that
// function. Thread safety: pure functions.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/grammar.h"

namespace tandem::grammar {

// `spec_json`: {"tools": [OpenAI tools...], "name": "f", "single": true} (name
// null/absent = any tool, one or more calls, or exactly one with "single"
// (parallel_tool_calls: false)). InvalidArgument naming the tool for a bad parameters schema.
StatusOr<Grammar> CompileToolCallGrammar(std::string_view spec_json);

}  // namespace tandem::grammar
