// HermesToolParser: the `hermes` tool-call format (Hermes 2 Pro, Qwen2.5, Qwen3):
//
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// The body between the tags is one JSON object with a string "name" and an
// "arguments" object (a JSON string holding an object is accepted too; a missing or
// null "arguments" means `{}`). The model writes typed JSON itself, so values are not
// re-typed by the tools' schemas. `arguments` is re-serialized Python json.dumps style
// (", " and ": " separators, UTF-8 kept, key order kept), as vLLM does.
//
// Streaming: a call is sent when its `</tool_call>` arrives, as two pieces: id + name,
// then the whole arguments text. (Sending the name earlier would commit to a call
// before its JSON is known to be valid; invalid bodies become raw content instead.)
//
// Thread safety: one reply's state; not thread-safe. See ToolParser for the contract.
#pragma once

#include <string_view>

#include "server/parsers/tool_parser.h"

namespace tandem::parsers {

class HermesToolParser : public ToolParser {
 public:
  HermesToolParser() = default;

  ToolStreamDelta Feed(std::string_view delta_text) override;
  ToolStreamDelta Finish() override;

 private:
  // Emits the call in `body` (the text between the tags) and returns true, or returns
  // false when `body` is not a valid call.
  bool EmitCall(std::string_view body, ToolStreamDelta& out);

  bool in_call_ = false;  // after <tool_call>, waiting for </tool_call>
};

}  // namespace tandem::parsers
