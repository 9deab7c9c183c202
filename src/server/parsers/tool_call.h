// Tool-call value types shared by every tool parser, the streaming accumulator and
// their OpenAI JSON forms.
//
// A tool parser turns model text into OpenAI `tool_calls`. Streaming produces
// ToolStreamDelta values; ToolCallAccumulator folds them back into the non-streamed
// ExtractedToolCalls, so the server builds its final message the same way either way.
//
// Thread safety: plain values; ToolCallAccumulator is not thread-safe (one per request).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::parsers {

// One complete call: OpenAI `{id, type: "function", function: {name, arguments}}`.
struct ToolCall {
  std::string id;         // "call_" + 24 random alphanumerics
  std::string name;       // function name as the model wrote it (trimmed)
  std::string arguments;  // a JSON object serialized as text, e.g. {"city": "Paris"}
};

// One entry of a streamed `delta.tool_calls` array.
// The first piece of a call carries id and name (and arguments ""); later pieces carry
// only arguments text. Concatenating every piece's `arguments` for an index gives the
// call's final `arguments` string exactly.
struct ToolCallDelta {
  int index = 0;                    // position of the call in this reply, from 0
  std::optional<std::string> id;    // set on the first piece only
  std::optional<std::string> name;  // set on the first piece only
  std::string arguments;            // a piece of the arguments JSON text, may be empty
};

// What one Feed/Finish produced. Content always precedes tool-call pieces in the text.
struct ToolStreamDelta {
  std::string content;  // text outside tool markup, may be empty
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return content.empty() && tool_calls.empty(); }
};

// The non-streamed result (vLLM's ExtractedToolCallInformation).
struct ExtractedToolCalls {
  std::optional<std::string> content;  // nullopt when there is no text outside markup
  std::vector<ToolCall> tool_calls;
  bool tools_called = false;  // == !tool_calls.empty()
};

// Folds streamed deltas into the final result.
class ToolCallAccumulator {
 public:
  // Precondition: deltas come in the order a parser produced them.
  void Add(const ToolStreamDelta& delta);
  ExtractedToolCalls Result() const;

 private:
  std::string content_;
  std::vector<ToolCall> calls_;
};

// Returns a fresh OpenAI-style id: "call_" followed by 24 alphanumerics.
std::string NewToolCallId();

// `{"id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}`.
std::string ToolCallToJson(const ToolCall& call);

// The OpenAI streaming form of one piece:
// `{"index": 0, "id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}`
// (id, type and name only on the first piece).
std::string ToolCallDeltaToJson(const ToolCallDelta& delta);

}  // namespace tandem::parsers
