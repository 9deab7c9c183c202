// ChatTemplate: renders a model's chat template (the Jinja text in the GGUF key
// `tokenizer.chat_template`) into the prompt string for /v1/chat/completions.
//
// The output matches Hugging Face's apply_chat_template byte for byte on the supported
// Jinja subset (jinja2 with trim_blocks, lstrip_blocks, loop controls, HF's tojson,
// raise_exception and strftime_now); see jinja_interpreter.h for the language and
// tests/data/chat_template_golden/ for the checked templates. Inputs are handed over as
// JSON text, the shape the OpenAI request carries them in, and are preprocessed the way
// vLLM does before rendering:
//   - assistant `tool_calls[].function.arguments` given as a JSON string is parsed into an
//     object (templates iterate or re-serialize it); a string that is not a JSON object
//     stays a string;
//   - content given as a list of parts ({"type": "text", "text": ...}) is flattened to one
//     string (text parts joined by "\n") for templates that treat content as a string, and
//     kept as a list for templates that loop over it (ChatContentFormat::kAuto decides from
//     the template: a `for` over something named `content`).
// Template variables: messages, tools (none when absent), documents (none),
// add_generation_prompt, bos_token, eos_token, and every key of extra_kwargs_json
// (chat_template_kwargs, e.g. enable_thinking) except those names.
//
// Errors: kInvalidArgument for malformed templates or inputs and for the template's own
// raise_exception (the message is the template's), kResourceExhausted when a render limit
// is hit (hostile templates or inputs).
//
// Thread safety: immutable after Parse; Render may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "template/jinja_builtins.h"

namespace tandem {

namespace jinja {
class Template;
}

enum class ChatContentFormat {
  kAuto,    // decide from the template (see above)
  kString,  // flatten list content to a string
  kOpenAI,  // pass list content through unchanged
};

struct ChatRenderInput {
  std::string messages_json = "[]";  // JSON array of OpenAI chat messages
  std::string tools_json;            // JSON array of tool definitions; empty: tools is none
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  std::string extra_kwargs_json;     // JSON object of extra template variables; may be empty
  bool parse_tool_call_arguments = true;
  ChatContentFormat content_format = ChatContentFormat::kAuto;
  std::optional<int64_t> now_unix_seconds;  // strftime_now clock (UTC); default: local time
  jinja::RenderLimits limits;
};

class ChatTemplate {
 public:
  // Parses the template text; fails on syntax errors and unsupported tags.
  static StatusOr<ChatTemplate> Parse(std::string source);

  StatusOr<std::string> Render(const ChatRenderInput& input) const;

  // What ChatContentFormat::kAuto resolves to for this template (kString or kOpenAI).
  ChatContentFormat detected_content_format() const { return detected_format_; }
  const std::string& source() const { return *source_; }

 private:
  ChatTemplate(std::shared_ptr<const std::string> source, std::shared_ptr<const jinja::Template> tmpl,
               ChatContentFormat detected)
      : source_(std::move(source)), template_(std::move(tmpl)), detected_format_(detected) {}

  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const jinja::Template> template_;
  ChatContentFormat detected_format_;
};

}  // namespace tandem
