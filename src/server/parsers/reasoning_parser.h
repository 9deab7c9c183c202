// ReasoningParser: splits a reply into `reasoning_content` (inside <think>...</think>)
// and `content` (after </think>), streaming or not.
//
// Names (`--reasoning-parser`) and their rules:
//   glm45, qwen3  reasoning only when the reply opens with `<think>` (leading
//                 whitespace allowed); otherwise the whole reply is content.
//   deepseek_r1   the chat template already put `<think>` in the prompt, so the reply
//                 may omit it: everything up to `</think>` is reasoning either way.
// With enable_thinking=false (chat_template_kwargs) the whole reply is content.
//
// A reply cut off before `</think>` (max_tokens) is all reasoning, streaming or not.
// (vLLM's non-streaming glm45/qwen3 parsers call it content instead; their streaming
// parsers call it reasoning. We keep both paths equal, and a stream cannot take back
// what it sent as reasoning.) Text after `</think>` is content as written, with no
// trimming. Split tags (`</th` + `ink>`) are held back until the next chunk decides.
//
// Thread safety: one reply's state; not thread-safe; one parser per request.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::parsers {

struct ReasoningDelta {
  std::string reasoning;  // piece of reasoning_content, may be empty
  std::string content;    // piece of content, may be empty; comes after `reasoning`

  bool empty() const { return reasoning.empty() && content.empty(); }
};

struct ExtractedReasoning {
  std::optional<std::string> reasoning;  // nullopt when empty
  std::optional<std::string> content;    // nullopt when empty
};

class ReasoningParser {
 public:
  // kOpenTagRequired: glm45, qwen3. kOpenTagOptional: deepseek_r1.
  enum class Style { kOpenTagRequired, kOpenTagOptional };

  ReasoningParser(Style style, bool enable_thinking);

  // Consumes the next piece of model text. Precondition: Finish() not called yet.
  ReasoningDelta Feed(std::string_view delta_text);
  // End of the reply: flushes held text. Precondition: called once, after the last Feed.
  ReasoningDelta Finish();
  // Non-streaming. Precondition: a fresh parser; it is spent afterwards.
  ExtractedReasoning Extract(std::string_view full_text);

 private:
  enum class State {
    kStart,      // before the first non-whitespace text: is it `<think>`?
    kReasoning,  // inside the thinking block
    kContent,    // after `</think>`, or no thinking at all
  };

  // Consumes one decision from buffer_; false when more text is needed.
  bool Step(ReasoningDelta& out);

  const Style style_;
  State state_;
  std::string buffer_;  // received text not yet assigned to reasoning or content
};

// Builds the parser named by `--reasoning-parser`: "glm45", "qwen3" or "deepseek_r1".
// InvalidArgument listing the supported names otherwise.
StatusOr<std::unique_ptr<ReasoningParser>> MakeReasoningParser(std::string_view name,
                                                               bool enable_thinking);

}  // namespace tandem::parsers
