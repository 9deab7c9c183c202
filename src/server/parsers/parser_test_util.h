// Test helpers for parsers_test: feeding a reply in chunks, comparing streamed and
// non-streamed results, and recording produced tool calls for the Python check.
//
// Set TANDEM_TOOL_CALL_JSONL=<path> to append every tool call the tests produce, one
// OpenAI `ChatCompletionMessageToolCall` JSON object a line; then run
// `python3 tools/check_tool_call_json.py <path>`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/parsers/tool_call.h"

namespace tandem::parsers::testing {

// Chunk sizes every streaming test feeds a reply in.
inline constexpr size_t kChunkSizes[] = {1, 2, 3, 7};

// `text` cut into pieces of `chunk` bytes (the last may be shorter).
std::vector<std::string_view> Chunks(std::string_view text, size_t chunk);

// `text` cut into two pieces at `split`: [0, split) and [split, end).
std::vector<std::string_view> SplitAt(std::string_view text, size_t split);

// Non-streamed result of tool parser `parser_name` on `text`.
ExtractedToolCalls ExtractWith(std::string_view parser_name, const std::string& tools_json,
                               std::string_view text);

// Streamed result: a fresh parser fed `pieces`, then Finish(), folded. Also checks the
// streaming contract: the first piece of each call carries id and name, later pieces
// carry neither, and calls start in index order.
ExtractedToolCalls StreamWith(std::string_view parser_name, const std::string& tools_json,
                              const std::vector<std::string_view>& pieces);

// Expects equal content, names and arguments (ids are random).
void ExpectSameCalls(const ExtractedToolCalls& expected, const ExtractedToolCalls& actual,
                     std::string_view context);

// Extracts `text` non-streamed, then streams it in kChunkSizes and split at every byte,
// expecting the same result each time. Records the calls. Returns the non-streamed one.
ExtractedToolCalls ExtractEverySplit(std::string_view parser_name, const std::string& tools_json,
                                     std::string_view text);

// The call's arguments, parsed (order kept). Fails the test when not a JSON object.
nlohmann::ordered_json Args(const ToolCall& call);

// Appends calls to $TANDEM_TOOL_CALL_JSONL when it is set.
void RecordToolCalls(const std::vector<ToolCall>& calls);
void RecordToolCallJson(const std::string& tool_call_json);

}  // namespace tandem::parsers::testing
