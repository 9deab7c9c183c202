// Built-in chat templates for models whose GGUF carries no `tokenizer.chat_template`
// (the default gemma3-270m file has none). As llama.cpp does, the fallback is chosen by
// architecture: gemma3 gets the Gemma turn format, everything else ChatML.
//
// Thread safety: returns views of static strings.
#pragma once

#include <string_view>

namespace tandem {

struct BuiltinChatTemplate {
  std::string_view name;    // "gemma" or "chatml", for the start-up log
  std::string_view source;  // Jinja text
};

// The fallback template for `arch` (general.architecture).
BuiltinChatTemplate BuiltinChatTemplateFor(std::string_view arch);

}  // namespace tandem
