// ToolParser: turns a model's reply text into OpenAI tool calls, streaming or not.
//
// Each model family writes calls in its own markup, always opened by `<tool_call>`:
//   glm45, glm47  <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>
//                 (glm47 may omit the newlines; both names accept both layouts)
//   hermes        <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (Qwen)
//
// Behaviour common to all parsers (matching vLLM where a streaming parser can):
//  * `content` is the text before the first call. Text between or after calls is
//    dropped (vLLM does the same: its non-streamed content is the prefix only).
//  * A partial `<tool_call>` at the end of a chunk is held back, never sent as content.
//  * Markup that is not a valid call (e.g. `<tool_call>` followed by prose, or invalid
//    hermes JSON) is returned as raw content when no call came before it.
//  * Unterminated markup at the end (max_tokens), see Finish(): a call whose name is
//    complete is emitted with the argument pairs that are complete (its name was
//    already streamed, so it cannot be taken back); a call whose name is not complete
//    is returned as raw content. hermes: the unterminated body is parsed as JSON, as
//    vLLM's `<tool_call>(.*)` fallback does; raw content if that fails.
//  * Streaming and non-streaming give the same result: ExtractToolCalls is
//    Feed(full_text) + Finish() folded by ToolCallAccumulator.
//
// Thread safety: a parser holds one reply's state; use one per request, from one thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "server/parsers/tool_call.h"

namespace tandem::parsers {

class ToolParser {
 public:
  virtual ~ToolParser() = default;

  // Consumes the next piece of model text (any split, even inside a tag or a UTF-8
  // sequence) and returns what became certain: content and tool-call pieces.
  // Precondition: Finish() has not been called.
  virtual ToolStreamDelta Feed(std::string_view delta_text) = 0;

  // End of the reply: flushes held text and closes an unterminated call (see above).
  // Precondition: called once, after the last Feed.
  virtual ToolStreamDelta Finish() = 0;

  // Non-streaming: the whole reply at once.
  // Precondition: a fresh parser (no Feed/Finish yet); the parser is spent afterwards.
  ExtractedToolCalls ExtractToolCalls(std::string_view full_text);

 protected:
  // Text scanning shared by the markup parsers. `buffer_` holds text received but not
  // yet turned into output.
  static constexpr std::string_view kCallStart = "<tool_call>";
  static constexpr std::string_view kCallEnd = "</tool_call>";

  // Outside markup: moves text before `<tool_call>` to content and consumes the tag.
  // Returns true when a tag was consumed (a call body follows in buffer_).
  bool ConsumeContent(ToolStreamDelta& out);
  // Content is kept only before the first call (see above).
  void EmitContent(std::string_view text, ToolStreamDelta& out) const;
  // Gives up on the current markup: `<tool_call>` + the first `n` bytes of buffer_
  // become content (when no call came before), and are consumed.
  void AbandonCall(size_t n, ToolStreamDelta& out);
  // Starts call number num_calls_ with a fresh id; sends its name.
  void BeginCall(std::string name, ToolStreamDelta& out);
  // Appends a piece of the current call's arguments text.
  void EmitArguments(std::string piece, ToolStreamDelta& out) const;

  std::string buffer_;
  int num_calls_ = 0;  // calls begun so far; the current call's index is num_calls_ - 1
};

// Builds the parser named by `--tool-call-parser` ("glm45", "glm47" or "hermes").
// `tools_json` is the request's OpenAI `tools` array (may be empty), used to type
// GLM argument values. InvalidArgument for an unknown name or malformed tools.
StatusOr<std::unique_ptr<ToolParser>> MakeToolParser(std::string_view name, std::string tools_json);

}  // namespace tandem::parsers
