// GlmToolParser: the `glm45` / `glm47` tool-call format of GLM-4.5/4.6/4.7:
//
//   <tool_call>get_weather
//   <arg_key>city</arg_key>
//   <arg_value>Paris</arg_value>
//   </tool_call>
//
// The name ends at the first newline, `<arg_key>` or `</tool_call>`; whitespace
// between tags is optional (glm47 writes none). Keys and values are trimmed (as vLLM
// does); values are typed through ToolSchema. Text between pairs that is not a tag is
// ignored, and a key not followed by `<arg_value>` is dropped.
//
// Streaming: the call's id and name go out as soon as the name is complete; then each
// pair goes out as an arguments piece once its `</arg_value>` arrives
// (`{"k": v`, `, "k2": v2`, ...), and `}` (or `{}`) when the call closes. So the
// arguments text is `{"k": v, "k2": v2}`, Python json.dumps style.
// A repeated key is sent again; a JSON reader keeps the last value.
//
// Thread safety: one reply's state; not thread-safe. See ToolParser for the contract.
#pragma once

#include <string>
#include <string_view>

#include "server/parsers/tool_parser.h"
#include "server/parsers/tool_schema.h"

namespace tandem::parsers {

class GlmToolParser : public ToolParser {
 public:
  explicit GlmToolParser(ToolSchema schema) : schema_(std::move(schema)) {}

  ToolStreamDelta Feed(std::string_view delta_text) override;
  ToolStreamDelta Finish() override;

 private:
  enum class State {
    kContent,  // outside markup
    kName,     // after <tool_call>, name not complete yet
    kArgs,     // name sent; reading <arg_key>/<arg_value> pairs until </tool_call>
  };

  // Each Step consumes one construct from buffer_ and returns true, or returns false
  // when buffer_ needs more text to decide.
  bool Step(ToolStreamDelta& out);
  bool StepName(ToolStreamDelta& out);
  bool StepArgs(ToolStreamDelta& out);
  // Sends the closing `}` (or `{}` for a call without pairs) and leaves the call.
  void CloseCall(ToolStreamDelta& out);

  const ToolSchema schema_;
  State state_ = State::kContent;
  std::string call_name_;  // name of the open call (kArgs)
  int num_pairs_ = 0;      // pairs sent for the open call
};

}  // namespace tandem::parsers
