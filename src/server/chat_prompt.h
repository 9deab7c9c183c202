// ChatPrompt: OpenAI chat messages -> prompt text -> token ids, with the model's chat
// template (the GGUF's `tokenizer.chat_template`, else a built-in one chosen by
// architecture; see builtin_chat_templates.h).
//
// Ownership: borrows the Tokenizer, which must outlive it.
// Thread safety: immutable after Create; Render/Encode may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "template/chat_template.h"

namespace tandem {
class Model;
class Tokenizer;
}  // namespace tandem

namespace tandem::server {

struct ChatInputs {
  std::string messages_json;              // JSON array of messages
  std::string tools_json;                 // JSON array, or empty
  std::string chat_template_kwargs_json;  // JSON object, or empty
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // leave the last (assistant) message open
  bool add_special_tokens = false;      // BOS/EOS on top of what the template writes
  std::string tool_choice_json;         // the request's tool_choice (JSON), or empty
};

class ChatPrompt {
 public:
  // The model's template, or the built-in fallback for its architecture (logged).
  // InvalidArgument when the model's template does not parse.
  static StatusOr<std::unique_ptr<ChatPrompt>> Create(const Model& model);
  // From explicit template text (tests, and a future --chat-template flag).
  static StatusOr<std::unique_ptr<ChatPrompt>> FromSource(std::string source, std::string name,
                                                          const Tokenizer& tokenizer);

  // The rendered prompt text. InvalidArgument for bad inputs or the template's own
  // raise_exception (its message is kept).
  StatusOr<std::string> Render(const ChatInputs& inputs) const;
  // Render + tokenize (special tokens in the text are parsed, as vLLM does).
  StatusOr<std::vector<int32_t>> Encode(const ChatInputs& inputs) const;

  // Where the template came from: "gguf", "gemma" (built-in) or "chatml" (built-in).
  const std::string& name() const { return name_; }

 private:
  ChatPrompt(ChatTemplate tmpl, std::string name, const Tokenizer& tokenizer)
      : template_(std::move(tmpl)), name_(std::move(name)), tokenizer_(tokenizer) {}

  ChatTemplate template_;
  std::string name_;
  const Tokenizer& tokenizer_;
};

}  // namespace tandem::server
